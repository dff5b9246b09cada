"""Data sets' own row shapes, converted to azr's task fields: `--format NAME` / `data.format: NAME` where a column
map cannot say it. One module per family: `classic` (mbpp, humaneval, apps), `evalplus` (mbpp+, humaneval+),
`contests` (livecodebench, code_contests, primeintellect), `suites` (kodcode, bigcodebench).

Each converter takes a row as the set publishes it and returns task fields for `azr.data.tasks.task_from_row`,
which validates them; errors name `file:line` and the column. Nothing here runs code: where a file lacks expected
outputs (EvalPlus's plus inputs), `oracle_rows` has the caller's sandbox run the reference solution first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from azr.data.formats import classic, contests, evalplus, suites
from azr.data.formats.classic import HUMANEVAL_INSTRUCTION, HUMANEVAL_TIMEOUT_S
from azr.data.formats.common import Row
from azr.errors import DataError, UserError, did_you_mean
from azr.inputs import env_limit, read_bounded_text, regular_file

log = logging.getLogger(__name__)

FORMATS: dict[str, Callable[[Row, str], Row]] = {
    "mbpp": classic.mbpp,
    "mbpp+": evalplus.mbpp_plus,
    "humaneval": classic.humaneval,
    "humaneval+": evalplus.humaneval_plus,
    "apps": classic.apps,
    "livecodebench": contests.livecodebench,
    "code_contests": contests.code_contests,
    "primeintellect": contests.primeintellect,
    "kodcode": suites.kodcode,
    "bigcodebench": suites.bigcodebench,
}
ORACLE_FORMATS = ("mbpp+", "humaneval+")

# Runs programs in the sandbox and gives each one's stdout, or None where it did not exit cleanly.
Oracle = Callable[[Sequence[str]], Sequence[str | None]]
# Checks a converted row's task fields (raising DataError); the reader's own validation, passed in.
Validate = Callable[[Row, str], None]


def converter(name: str) -> Callable[[Row, str], Row]:
    """The conversion for format `name`; DataError naming the choices for an unknown one. A row's `checker`
    (its own, or the file's) judges the task's stdin/stdout cases."""
    if name not in FORMATS:
        raise DataError(f"format '{name}': unknown{did_you_mean(name, FORMATS)} (one of {', '.join(FORMATS)})")
    convert = FORMATS[name]

    def with_checker(row: Row, where: str) -> Row:
        out = convert(row, where)
        if row.get("checker") is not None and _has_stdio(out.get("tests")):
            out["checker"] = row["checker"]
        return out

    return with_checker


def _has_stdio(tests: Any) -> bool:
    return isinstance(tests, list) and any(isinstance(t, dict) and "input" in t for t in tests)


def prepared_rows(
    rows: list[tuple[str, Any]],
    name: str | None,
    checker: str | None,
    oracle: Oracle | None,
    validate: Validate | None = None,
) -> list[tuple[str, Any]]:
    """A file's rows before conversion: the file's checker given to each row with stdin/stdout cases and none of
    its own, and the outputs a format's file lacks computed by `oracle` (`oracle_rows`; `validate` checks each
    converted row before the oracle's slow work starts)."""
    if checker is not None:
        rows = [(w, _checked(r, checker, name is not None)) for w, r in rows]
    return oracle_rows(rows, name, oracle, validate)


def _checked(row: Any, checker: str, formatted: bool) -> Any:
    if not isinstance(row, dict) or row.get("checker") is not None:
        return row
    if formatted or any(_has_stdio(v) for v in row.values()):
        return {**row, "checker": checker}
    return row


def oracle_rows(
    rows: list[tuple[str, Any]], name: str | None, oracle: Oracle | None, validate: Validate | None = None
) -> list[tuple[str, Any]]:
    """Rows of format `name` with the outputs the file lacks (`plus_output`, and `base_output` for HumanEval+ rows
    without `test`), computed by running each row's reference solution through `oracle` (the sandbox). Without an
    oracle the rows stand, and those inputs are not tests (logged once)."""
    if name not in ORACLE_FORMATS:
        return rows
    todo = [
        (i, where, row)
        for i, (where, row) in enumerate(rows)
        if isinstance(row, dict) and evalplus.oracle_columns(row, name)
    ]
    if not todo:
        return rows
    if oracle is None:  # a check of the file alone (the recipe's, at load): training and evaluation pass one
        log.info("%s: %d rows' inputs not graded: no sandbox to run their reference solutions", name, len(todo))
        return rows
    if validate is not None:  # a bad row is an error before the slow part starts
        convert = converter(name)
        for where, row in rows:
            if isinstance(row, dict):
                validate(convert(row, where), where)
    programs = [evalplus.oracle_program(row, where, name) for _, where, row in todo]
    stdouts = oracle(programs)
    done = list(rows)
    failed = 0
    for (i, where, row), stdout in zip(todo, stdouts, strict=True):
        columns = evalplus.oracle_inputs(row, where, name)
        outputs = evalplus.oracle_outputs(stdout, sum(len(inputs) for _, inputs in columns))
        failed += outputs is None
        if outputs is not None:
            for column, inputs in columns:
                row = {**row, f"{column}_output": outputs[: len(inputs)]}
                outputs = outputs[len(inputs) :]
        done[i] = (where, row)
    if failed:
        log.warning(
            "%s: %d rows' reference solutions gave no outputs for their inputs; their other tests only", name, failed
        )
    return done


__all__ = [
    "FORMATS",
    "HUMANEVAL_INSTRUCTION",
    "HUMANEVAL_TIMEOUT_S",
    "ORACLE_FORMATS",
    "Oracle",
    "converter",
    "oracle_rows",
    "prepared_rows",
    "read_checker",
]


MAX_CHECKER_BYTES = ("AZR_MAX_CHECKER_BYTES", 1 << 20)  # a special judge's source


def read_checker(path: str | Path) -> str:
    """The source of a checker file (`--checker FILE`): Python defining `check(input, expected, output)`, or a
    testlib-style program (given the input, output and answer files) — the rule a row's own `checker` follows.
    A regular file only (not /dev/zero, which never ends, nor a FIFO, which may never start), read up to
    MAX_CHECKER_BYTES and compiled here; run only in the sandbox."""
    path = Path(path)
    what = f"{path}"
    regular_file(path, what, DataError)
    try:
        source = read_bounded_text(path, env_limit(*MAX_CHECKER_BYTES), what, f"{MAX_CHECKER_BYTES[0]}=N raises it")
    except FileNotFoundError:
        raise DataError(f"{path}: checker file not found") from None
    except UserError as exc:
        raise DataError(str(exc)) from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read the checker: {exc.strerror or exc}") from None
    try:
        compile(source, str(path), "exec")
    except SyntaxError as exc:
        raise DataError(f"{path}:{exc.lineno}: checker is not valid Python: {exc.msg} (column {exc.offset})") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        why = "nested too deeply to compile" if not isinstance(exc, ValueError) else str(exc)
        raise DataError(f"{path}: checker is not valid Python: {why}") from None
    return source
