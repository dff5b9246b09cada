"""Files a run writes as it goes: atomic whole-file writes, append-and-flush JSONL (a torn last line dropped on the
next open), and the generation log (a background thread into size-rotated files that never blocks the trainer).
Every writer of logs and reports applies `azr.secrets.redact`; data a user owns (task files, hardened tests,
triplets) goes through `write_data_file`, verbatim. Any Python string is written as valid UTF-8 (a lone surrogate
becomes U+FFFD), only to regular files, a link resolved so that the file it names is replaced and never the link
(docs/limits.md, docs/training.md).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from azr.errors import UserError
from azr.inputs import irregular_kind, load_json, valid_text
from azr.secrets import redact

log = logging.getLogger(__name__)


def check_regular_file(path: Path, what: str | None = None) -> Path:
    """`path` if it is absent or a regular file (a link is followed); a UserError naming `what` otherwise. azr writes
    regular files only: it never writes through a device, a FIFO or a socket, nor renames over one or a folder."""
    try:
        kind = irregular_kind(path)
    except OSError as exc:
        raise UserError(f"{what or path}: cannot write {path}: {exc.strerror or exc}") from None
    if kind:
        raise UserError(f"{what or 'output'}: {path} is {kind}; azr writes only regular files")
    return Path(path)


def atomic_write_text(path: Path, text: str) -> Path:
    """Write `text` to `path` through a temp file in the same directory and an atomic rename; secrets redacted,
    surrogates replaced (`valid_text`). Refused (UserError) where `path` is not a regular file."""
    return _atomic_write(path, redact(valid_text(text)))


def write_data_file(path: Path, text: str) -> Path:
    """`atomic_write_text` for data a user owns (task rows, hardened tests, triplets): verbatim, never redacted (a
    test holding `Bearer x` or `http://u:p@h` must stay that test), surrogates replaced (`valid_text`)."""
    return _atomic_write(path, valid_text(text))


def _atomic_write(path: Path, text: str) -> Path:
    """Replace the file `path` names (a link resolved: the link itself is never replaced) atomically; returns the
    path as given."""
    check_regular_file(Path(path))
    target = Path(os.path.realpath(path))
    check_regular_file(target, str(path))  # /dev/stdout as a pipe resolves to no name: refused, never created
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(path)


def atomic_write_json(path: Path, obj: object) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


class JsonlWriter:
    """Append one JSON object per line and flush it, so readers and crashes never see half a record.

    On open, a torn final line left by an earlier crash is truncated away before new lines are appended.
    """

    def __init__(self, path: Path):
        self.path = check_regular_file(Path(path))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _drop_torn_tail(self.path)
        self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close() / __exit__)

    def write(self, record: dict[str, Any]) -> None:
        self._fh.write(redact(valid_text(json.dumps(record, ensure_ascii=False, default=str))) + "\n")
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
                obj = load_json(line)
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
    `put_timeout_s` drops the record and counts it in `dropped`, and later puts drop at once while the queue stays
    full (a stuck disk costs the trainer one wait, not one per record).

    A record the thread cannot write (a full disk, or anything else it raises) is dropped and counted, and the first
    such error is kept in `error` (`failed` is then True): a run reports it in summary.json and exits 1. Once the
    thread is gone, puts drop at once; `close` waits at most `close_timeout_s` and counts what it could not write."""

    def __init__(
        self,
        folder: Path,
        max_bytes: int,
        queue_size: int = 4096,
        put_timeout_s: float = 5.0,
        close_timeout_s: float = 60.0,
    ):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.max_bytes, self.put_timeout_s, self.close_timeout_s = max_bytes, put_timeout_s, close_timeout_s
        existing = self.files()
        self._index = int(existing[-1].stem.rsplit("-", 1)[1]) if existing else 0
        self._writer: JsonlWriter | None = None
        self._queue: queue.Queue = queue.Queue(maxsize=queue_size)
        self.dropped = self.written = 0
        self.error: str | None = None
        self._closed = self._stalled = False
        self._thread = threading.Thread(target=self._drain, name="azr-generation-log", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    @property
    def failed(self) -> bool:
        return self.error is not None

    def files(self) -> list[Path]:
        return generation_files(self.folder)

    def put(self, records: Iterable[dict[str, Any]]) -> None:
        for record in records:
            if self._closed or not self._thread.is_alive():  # nobody would take it: a dead writer blocks no one
                self.dropped += 1
                continue
            try:  # once a put has waited in vain, the next ones do not wait until the writer catches up
                self._queue.put(record, block=not self._stalled, timeout=self.put_timeout_s)
                self._stalled = False
            except queue.Full:
                self.dropped += 1
                self._stalled = True

    def _drain(self) -> None:
        try:
            while (record := self._queue.get()) is not _STOP:
                try:
                    self._write(record)
                except Exception as exc:  # a full disk or a record it cannot write must not stop training
                    self.dropped += 1
                    self._fail(exc)
        except BaseException as exc:  # the thread ends here (recorded, not raised): close() counts what is queued
            self.dropped += 1  # the record it was writing
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        if self.error is None:
            self.error = f"{type(exc).__name__}: {exc}"
            log.error("generation log: cannot write to %s: %s", self.folder, self.error)

    def _write(self, record: dict[str, Any]) -> None:
        if self._writer is not None and self._writer.size >= self.max_bytes:
            self._writer.close()
            self._writer, self._index = None, self._index + 1
        if self._writer is None:
            self._writer = JsonlWriter(self.folder / f"generations-{self._index:05d}.jsonl")
        self._writer.write(record)
        self.written += 1

    def close(self) -> None:
        """Write everything queued, then close the file; safe to call more than once. Returns within
        `close_timeout_s` whatever the thread does: records it did not write by then are counted as dropped."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        deadline = time.monotonic() + self.close_timeout_s
        while self._thread.is_alive():
            try:
                self._queue.put(_STOP, timeout=0.05)
                break
            except queue.Full:
                if time.monotonic() >= deadline:
                    break
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():  # stuck in a write: leave it (a daemon thread), never wait for ever
            self._fail(TimeoutError(f"the writer did not finish within {self.close_timeout_s:g} s"))
        else:
            if self._writer is not None:
                try:
                    self._writer.close()
                except OSError as exc:
                    self._fail(exc)
        lost = 0
        while True:
            try:
                lost += self._queue.get_nowait() is not _STOP
            except queue.Empty:
                break
        if lost:
            self.dropped += lost
            self._fail(RuntimeError(f"the writer stopped with {lost} records queued"))
        if self.dropped:
            log.warning("generation log: %d records were dropped (queue full or writer failure)", self.dropped)

    def summary(self) -> dict[str, Any]:
        """What the log wrote and lost, as summary.json records it."""
        return {"written": self.written, "dropped": self.dropped, "error": self.error}


def generation_files(folder: Path) -> list[Path]:
    """A generation log's files, oldest first (the name's index orders them)."""
    return sorted(Path(folder).glob("generations-*.jsonl"))
