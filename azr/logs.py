"""Files a run writes as it goes: atomic whole-file writes, append-and-flush JSONL, and the generation log.

A crash at any moment leaves either the old or the new version of an atomically written file, and a JSONL file
whose complete lines all parse (a torn last line is dropped on the next open). Every writer here applies
`azr.secrets.redact`, so no key reaches a file whatever record carries it. `prune_jsonl` rewrites a log
atomically without the records a resumed run will write again. The generation log writes from a background thread
through a bounded queue into size-rotated files, and drains on close (called on exit and after a crash).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from azr.inputs import parse_json
from azr.secrets import redact

log = logging.getLogger(__name__)


def atomic_write_text(path: Path, text: str) -> Path:
    """Write `text` to `path` through a temp file in the same directory and an atomic rename; secrets redacted."""
    path, text = Path(path), redact(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_json(path: Path, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


class JsonlWriter:
    """Append one JSON object per line and flush it, so readers and crashes never see half a record.

    On open, a torn final line left by an earlier crash is truncated away before new lines are appended.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _drop_torn_tail(self.path)
        self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close() / __exit__)

    def write(self, record: dict[str, Any]) -> None:
        self._fh.write(redact(json.dumps(record, ensure_ascii=False, default=str)) + "\n")
        self._fh.flush()

    @property
    def size(self) -> int:
        return self._fh.tell()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _drop_torn_tail(path: Path) -> None:
    """Cut a final line that lacks its newline (a write torn by a crash), scanning back from the end."""
    if not path.exists():
        return
    with open(path, "rb+") as fh:
        end = fh.seek(0, os.SEEK_END)
        pos = end
        while pos > 0:
            step = min(pos, 1 << 16)
            fh.seek(pos - step)
            chunk = fh.read(step)
            if pos == end and chunk.endswith(b"\n"):
                return
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                fh.truncate(pos - step + cut + 1)
                return
            pos -= step
        fh.truncate(0)


def read_jsonl_records(path: Path) -> list[dict[str, Any]]:
    """Every line of `path` that parses as a JSON object; lines that do not (a torn tail) are skipped."""
    records = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                obj = parse_json(line)
            except ValueError:  # a torn line; nested too deep; an integer too long
                continue
            if isinstance(obj, dict):
                records.append(obj)
    return records


def prune_jsonl(path: Path, keep: Callable[[dict[str, Any]], bool]) -> int:
    """Rewrite `path` atomically with only the records `keep` accepts; returns how many were dropped."""
    path = Path(path)
    if not path.exists():
        return 0
    records = read_jsonl_records(path)
    kept = [r for r in records if keep(r)]
    lines = "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in kept)
    atomic_write_text(path, lines)
    return len(records) - len(kept)


_STOP = object()


class GenerationLog:
    """Records written by a background thread into `folder/generations-NNNNN.jsonl`, a new file once one passes
    `max_bytes`. The queue is bounded so a slow disk cannot grow memory without limit: a put that waits more than
    `put_timeout_s` drops the record and counts it in `dropped`."""

    def __init__(self, folder: Path, max_bytes: int, queue_size: int = 4096, put_timeout_s: float = 5.0):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.max_bytes, self.put_timeout_s = max_bytes, put_timeout_s
        existing = self.files()
        self._index = int(existing[-1].stem.rsplit("-", 1)[1]) if existing else 0
        self._writer: JsonlWriter | None = None
        self._queue: queue.Queue = queue.Queue(maxsize=queue_size)
        self.dropped = self.written = 0
        self._closed = False
        self._thread = threading.Thread(target=self._drain, name="azr-generation-log", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def files(self) -> list[Path]:
        return generation_files(self.folder)

    def put(self, records: Iterable[dict[str, Any]]) -> None:
        for record in records:
            try:
                self._queue.put(record, timeout=self.put_timeout_s)
            except queue.Full:
                self.dropped += 1

    def _drain(self) -> None:
        while (record := self._queue.get()) is not _STOP:
            try:
                self._write(record)
            except OSError as exc:  # a full disk must not kill training; the loss is counted and reported
                self.dropped += 1
                log.error("generation log: cannot write to %s: %s", self.folder, exc)

    def _write(self, record: dict[str, Any]) -> None:
        if self._writer is not None and self._writer.size >= self.max_bytes:
            self._writer.close()
            self._writer, self._index = None, self._index + 1
        if self._writer is None:
            self._writer = JsonlWriter(self.folder / f"generations-{self._index:05d}.jsonl")
        self._writer.write(record)
        self.written += 1

    def close(self) -> None:
        """Write everything queued, then close the file; safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(_STOP)
        self._thread.join()
        if self._writer is not None:
            self._writer.close()
        atexit.unregister(self.close)
        if self.dropped:
            log.warning("generation log: %d records were dropped (queue full or disk error)", self.dropped)


def generation_files(folder: Path) -> list[Path]:
    """A generation log's files, oldest first (the name's index orders them)."""
    return sorted(Path(folder).glob("generations-*.jsonl"))
