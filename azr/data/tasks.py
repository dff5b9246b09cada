"""Coding tasks: the `Task` record, loaders for the shipped splits and for user files, and overlap checks.

Owns reading and validating task data (errors name `file:line` and the field); it does not run code (that is
`azr.rewards.grading`). JSONL files in azr's own format are read strictly (unknown fields are errors). Foreign files
(MBPP/APPS-style JSONL, JSON or parquet through `datasets`) are read through a column map, and their other columns
are ignored.
"""

from __future__ import annotations

import collections
import json
import math
import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from azr.errors import DataError, did_you_mean, show
from azr.inputs import env_limit

SPLITS = {"train": "train.jsonl", "held-out": "heldout.jsonl"}


@dataclass
class Task:
    """One coding problem: a prompt, the tests that judge an answer, and optionally a reference solution."""

    id: str
    prompt: str
    tests: list[str]
    solution: str | None = None
    timeout_s: float | None = None  # None: the sandbox default
    memory_mb: int | None = None  # None: the sandbox default
    entry_point: str | None = None
    tags: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None and v != []}


MAX_ROW_CHARS = ("AZR_MAX_TASK_ROW_CHARS", 16 << 20)  # one task row; a whole APPS problem is under 1 MiB
FIELDS = tuple(Task.__dataclass_fields__)


def check_task_limits(tasks: list[Task], max_timeout_s: float, max_memory_mb: int, label: str) -> None:
    """Refuse a task whose own timeout_s or memory_mb is over the ceiling (`sandbox.max_task_timeout_s`,
    `sandbox.max_task_memory_mb`) before any of them runs: a task file must not hold the sandbox for hours."""
    for task in tasks:
        for name, value, ceiling in (
            ("timeout_s", task.timeout_s, max_timeout_s),
            ("memory_mb", task.memory_mb, max_memory_mb),
        ):
            if value is not None and value > ceiling:
                raise DataError(
                    f"{label}: task {task.id!r}: {name} {value:g} is over the ceiling of {ceiling:g} "
                    f"(the recipe's sandbox.max_task_{name} raises it)"
                )


def load_tasks(source: str | Path, column_map: Mapping[str, str] | None = None) -> list[Task]:
    """Load tasks from a shipped split name ('train', 'held-out') or a .jsonl / .json / .parquet file."""
    if str(source) in SPLITS:
        if column_map:
            raise DataError(f"column map given for the shipped split '{source}', which needs none")
        ref = resources.files("azr.data") / SPLITS[str(source)]
        with resources.as_file(ref) as path:
            return read_jsonl(path, label=f"azr/data/{SPLITS[str(source)]}")
    path = check_task_source(source)
    assert path is not None  # the split names were handled above
    if path.suffix == ".jsonl":
        return read_jsonl(path, column_map)
    return _read_with_datasets(path, column_map or {})


def check_task_source(source: str | Path) -> Path | None:
    """The task file `source` names, checked to exist and be of a readable type; None for a shipped split. Reads
    nothing."""
    if str(source) in SPLITS:
        return None
    path = Path(source)
    if not path.is_file():
        hint = f" (shipped splits: {', '.join(SPLITS)})" if not path.suffix else ""
        raise DataError(f"{path}: task file not found{hint}")
    if path.suffix not in (".jsonl", ".json", ".parquet"):
        raise DataError(f"{path}: unsupported task file type '{path.suffix}' (use .jsonl, .json or .parquet)")
    return path


def read_jsonl(path: Path, column_map: Mapping[str, str] | None = None, label: str | None = None) -> list[Task]:
    label = label or str(path)
    rows = [(f"{label}:{number}", row) for number, row in json_lines(path, label)]
    return _tasks_from_rows(rows, column_map, label)


def json_lines(path: Path, label: str | None = None) -> list[tuple[int, Any]]:
    """(line number, parsed value) for every non-blank line of a JSONL file; DataError naming `label:line` (the
    path by default) for an unreadable file or a line that is not JSON."""
    label = label or str(path)
    try:
        # split on "\n" only: str.splitlines() would also break inside strings at U+2028 and friends
        lines = Path(path).read_text(encoding="utf-8-sig").split("\n")
    except FileNotFoundError:
        raise DataError(f"{label}: file not found") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{label}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise DataError(f"{label}: cannot read: {exc.strerror or exc}") from None
    found = []
    max_row = env_limit(*MAX_ROW_CHARS)
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if len(line) > max_row:
            raise DataError(
                f"{label}:{number}: row longer than the limit of {max_row:,} characters "
                f"({MAX_ROW_CHARS[0]}=N raises it)"
            )
        try:
            found.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise DataError(f"{label}:{number}: invalid JSON: {exc.msg} (column {exc.colno})") from None
        except RecursionError:  # json's C decoder stops itself at the interpreter's recursion limit
            raise DataError(f"{label}:{number}: invalid JSON: nested too deeply") from None
    return found


def _read_with_datasets(path: Path, column_map: Mapping[str, str]) -> list[Task]:
    import datasets  # lazy: pyarrow and friends are slow to import

    builder = "parquet" if path.suffix == ".parquet" else "json"
    try:
        table = datasets.load_dataset(builder, data_files=str(path), split="train")
    except Exception as exc:  # datasets raises many types for unreadable files
        raise DataError(f"{path}: cannot read as {builder}: {str(exc).splitlines()[0]}") from None
    # datasets gives every row every column, None where a row lacks it: drop those, as if absent
    rows = [(f"{path}:row {i + 1}", {k: v for k, v in row.items() if v is not None}) for i, row in enumerate(table)]
    return _tasks_from_rows(rows, column_map, str(path))


def _tasks_from_rows(rows: list[tuple[str, Any]], column_map: Mapping[str, str] | None, label: str) -> list[Task]:
    for key in column_map or {}:
        if key not in FIELDS:
            raise DataError(f"data.column_map.{key}: not a task field{did_you_mean(key, FIELDS)}")
    tasks: list[Task] = []
    first_seen: dict[str, str] = {}
    for where, row in rows:
        if not isinstance(row, dict):
            raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
        task = task_from_row(
            _apply_column_map(row, column_map, where) if column_map else row, where, strict=not column_map
        )
        if task.id in first_seen:
            raise DataError(f"{where}: duplicate id '{task.id}' (first at {first_seen[task.id]})")
        first_seen[task.id] = where
        tasks.append(task)
    if not tasks:
        raise DataError(f"{label}: no tasks")
    return tasks


def _apply_column_map(row: dict[str, Any], column_map: Mapping[str, str], where: str) -> dict[str, Any]:
    out = {k: v for k, v in row.items() if k in FIELDS and k not in column_map}
    for task_field, column in column_map.items():
        if column not in row:
            raise DataError(
                f"{where}: column '{column}' (mapped to {task_field}) is missing{did_you_mean(column, row)}"
            )
        value = row[column]
        json_list = isinstance(value, str) and value.lstrip().startswith("[")
        if json_list and (task_field in ("tests", "tags") or value.lstrip().startswith('["')):
            try:
                value = json.loads(value)  # APPS stores lists as JSON text
            except json.JSONDecodeError as exc:
                raise DataError(f"{where}: column '{column}': looks like a JSON list but is not: {exc.msg}") from None
        if task_field == "solution" and isinstance(value, list):
            value = value[0] if value else None  # several reference solutions: the first is enough
        if task_field == "id" and isinstance(value, int):
            value = str(value)
        out[task_field] = value
    return out


def task_from_row(row: dict[str, Any], where: str, strict: bool = True) -> Task:
    """Validate one row and build a Task; `where` (file:line) starts every error message."""
    if strict:
        for key in row:
            if key not in FIELDS:
                raise DataError(f"{where}: unknown field '{key}'{did_you_mean(key, FIELDS)}")

    def fail(name: str, expected: str) -> DataError:
        return DataError(f"{where}: field '{name}': expected {expected}, got {show(row.get(name))}")

    for name in ("id", "prompt"):
        if name not in row:
            raise DataError(f"{where}: missing field '{name}'")
        if not isinstance(row[name], str) or not row[name].strip():
            raise fail(name, "a non-empty string")
    tests = row.get("tests")
    if "tests" not in row:
        raise DataError(f"{where}: missing field 'tests'")
    if not isinstance(tests, list) or not tests:
        raise fail("tests", "a non-empty list of test snippets")
    for i, test in enumerate(tests):
        if not isinstance(test, str) or not test.strip():
            raise DataError(f"{where}: field 'tests[{i}]': expected a non-empty string, got {show(test)}")
        try:
            compile(test, f"tests[{i}]", "exec")
        except SyntaxError as exc:
            raise DataError(f"{where}: field 'tests[{i}]': not valid Python: {exc.msg}") from None
    solution = row.get("solution")
    if solution is not None and not isinstance(solution, str):
        raise fail("solution", "a string")
    timeout = row.get("timeout_s")
    number = isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
    if timeout is not None and not (number and math.isfinite(timeout) and timeout > 0):
        raise fail("timeout_s", "a positive number of seconds")
    memory = row.get("memory_mb")
    if memory is not None and (isinstance(memory, bool) or not isinstance(memory, int) or memory <= 0):
        raise fail("memory_mb", "a positive integer (MiB)")
    entry = row.get("entry_point")
    if entry is not None and (not isinstance(entry, str) or not entry.isidentifier()):
        raise fail("entry_point", "a Python identifier")
    tags = row.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) and t for t in tags):
        raise fail("tags", "a list of strings")
    return Task(
        id=row["id"],
        prompt=row["prompt"],
        tests=list(tests),
        solution=solution,
        timeout_s=float(timeout) if timeout is not None else None,
        memory_mb=memory,
        entry_point=entry,
        tags=tags,
    )


def select_tasks(tasks: list[Task], *, shuffle: bool, seed: int, max_tasks: int | None) -> list[Task]:
    """The training subset: a seeded shuffle (same seed, same order), then at most `max_tasks`."""
    chosen = list(tasks)
    if shuffle:
        random.Random(seed).shuffle(chosen)
    return chosen[:max_tasks] if max_tasks else chosen


def near_duplicates(
    a: Iterable[Task], b: Iterable[Task] | None = None, threshold: float = 0.7
) -> list[tuple[Task, Task, float]]:
    """Pairs whose prompts overlap by word-trigram Jaccard >= threshold, or whose reference solutions are equal
    once whitespace is removed (similarity 1.0). With `b`, pairs across a and b; else pairs within a.

    Candidates come from an inverted index over trigrams, leaving out trigrams found in more than 2% of the tasks
    (boilerplate like "write a function"), so a 10k-task file takes seconds; candidates get the exact Jaccard."""
    left = list(a)
    right = left if b is None else list(b)
    sigs = {id(t): _signature(t) for t in left + right}
    index: dict[str, list[int]] = collections.defaultdict(list)
    for j, task in enumerate(right):
        shingles, code = sigs[id(task)]
        for key in shingles | ({"\0" + code} if code else set()):
            index[key].append(j)
    common = max(50, len(right) // 50)
    found = []
    for i, x in enumerate(left):
        shingles, code = sigs[id(x)]
        keys = [k for k in shingles if len(index[k]) <= common] + (["\0" + code] if code else [])
        for j in sorted({j for key in keys for j in index.get(key, ())}):
            if b is None and j <= i:
                continue
            other, other_code = sigs[id(right[j])]
            score = 1.0 if code and code == other_code else len(shingles & other) / len(shingles | other)
            if score >= threshold:
                found.append((x, right[j], score))
    return found


def _signature(task: Task) -> tuple[set[str], str]:
    words = re.findall(r"[a-z0-9_]+", task.prompt.lower())
    shingles = {" ".join(words[i : i + 3]) for i in range(max(1, len(words) - 2))}
    return shingles, re.sub(r"\s+", "", task.solution or "")
