"""Input/output tests: stdin/stdout cases and function-call cases given as data, as a task carries them.

A stdin/stdout case (`{"input": ..., "output": ...}`) travels inside `Task.tests` as one string: a NUL byte, a tag
and the case as JSON. NUL never occurs in Python source (compile refuses it), so no assert test can be mistaken for
a case, and every place that moves a task's `tests` column (training rows, evaluation, self-play) moves cases too.
How a case is compared (`compare`, `float_tol`) travels with it. A function-call case (`{"args": [...],
"output": ...}`) is compiled here into the assert `assert f(*args) == output`, so the value rules of
`azr.rewards.harness` judge it outside the sandbox. Nothing here runs code.
"""

from __future__ import annotations

import ast
import json
import keyword
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from azr.errors import DataError, show
from azr.inputs import load_json

Compare = Literal["lines", "tokens"]
COMPARES: tuple[str, ...] = ("lines", "tokens")
_TAG = "\x00stdio:"


@dataclass(frozen=True)
class IOCase:
    """One stdin/stdout case: the program reads `input` on stdin and must print `output`.

    `compare` is how outputs are matched: `lines` (trailing whitespace of each line and of the whole ignored, as
    competitive-programming judges do) or `tokens` (whitespace-separated tokens); `float_tol` (absolute or
    relative) lets numeric tokens differ by that much, and implies `tokens`."""

    input: str
    output: str
    compare: Compare = "lines"
    float_tol: float | None = None

    def encode(self) -> str:
        """The case as one string of `Task.tests`."""
        body: dict[str, Any] = {"input": self.input, "output": self.output}
        if self.compare != "lines":
            body["compare"] = self.compare
        if self.float_tol is not None:
            body["float_tol"] = self.float_tol
        return _TAG + json.dumps(body, ensure_ascii=False)

    def to_json(self) -> dict[str, Any]:
        return json.loads(self.encode()[len(_TAG) :])


def decode_case(test: str) -> IOCase | None:
    """The case a `Task.tests` string holds, or None for an assert test (or anything malformed)."""
    if not test.startswith(_TAG):
        return None
    try:
        body = load_json(test[len(_TAG) :])
        case = IOCase(str(body["input"]), str(body["output"]), body.get("compare", "lines"), body.get("float_tol"))
    except (ValueError, KeyError, TypeError):
        return None
    return case if case.compare in COMPARES else None


def is_case(test: str) -> bool:
    return test.startswith(_TAG)


def shown_test(test: str) -> Any:
    """A test as a user wrote it: the string of an assert test, the object of a stdin/stdout case."""
    case = decode_case(test)
    return case.to_json() if case is not None else test


def stdio_case(item: Mapping[str, Any], where: str, compare: Compare, float_tol: float | None) -> IOCase:
    """A `{"input", "output"}` object as a case; a list of lines is joined with newlines (as TACO stores some)."""
    parts = []
    for key in ("input", "output"):
        value = item.get(key)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = "\n".join(value)
        if not isinstance(value, str):
            raise DataError(f"{where}.{key}: expected a string (or a list of lines), got {show(value)}")
        parts.append(value)
    unknown = set(item) - {"input", "output", "compare", "float_tol"}
    if unknown:
        raise DataError(f"{where}: unknown key '{sorted(unknown)[0]}' in a stdin/stdout case (input, output)")
    compare = item.get("compare", compare)
    if compare not in COMPARES:
        raise DataError(f"{where}.compare: expected one of {', '.join(COMPARES)}, got {show(compare)}")
    tol = check_float_tol(item.get("float_tol", float_tol), f"{where}.float_tol")
    return IOCase(parts[0], parts[1], "tokens" if tol is not None else compare, tol)


def check_float_tol(value: Any, where: str) -> float | None:
    if value is None:
        return None
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (number and math.isfinite(value) and value >= 0):
        raise DataError(f"{where}: expected a non-negative number, got {show(value)}")
    return float(value)


def is_function_name(name: Any) -> bool:
    """A name a test may call: a Python identifier that is not a keyword (never an expression such as a lambda)."""
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)


def call_test(
    call: str, args: Sequence[Any], expected: Any, where: str, kwargs: Mapping[str, Any] | None = None
) -> str:
    """`assert CALL(*args, **kwargs) == expected` for values given as data; each must be a Python literal (what
    JSON holds always is, but for infinities and NaN). CALL is a function's name, or `Solution().method`: code is
    built from it, so anything else is refused."""
    if not all(is_function_name(part.removesuffix("()") if i == 0 else part) for i, part in enumerate(call.split("."))):
        raise DataError(f"{where}: the function to call must be a Python identifier, got {show(call)}")
    pieces = [_literal(a, f"{where}.args[{i}]") for i, a in enumerate(args)]
    pieces += [f"{k}={_literal(v, f'{where}.kwargs.{k}')}" for k, v in (kwargs or {}).items()]
    return f"assert {call}({', '.join(pieces)}) == {_literal(expected, f'{where}.output')}"


def call_case(item: Mapping[str, Any], entry_point: str | None, where: str) -> str:
    """A `{"args": [...], "output": ...}` object (optionally `kwargs`) as an assert on the task's entry point."""
    if not entry_point:
        raise DataError(f"{where}: a function-call case needs the task's 'entry_point' (the function to call)")
    unknown = set(item) - {"args", "kwargs", "output"}
    if unknown or "output" not in item:
        bad = f"unknown key '{sorted(unknown)[0]}'" if unknown else "missing key 'output'"
        raise DataError(f"{where}: {bad} in a function-call case (args, kwargs, output)")
    args, kwargs = item.get("args", []), item.get("kwargs", {})
    if not isinstance(args, list):
        raise DataError(f"{where}.args: expected a list of arguments, got {show(args)}")
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) and k.isidentifier() for k in kwargs):
        raise DataError(f"{where}.kwargs: expected an object of keyword arguments, got {show(kwargs)}")
    return call_test(entry_point, args, item["output"], where, kwargs)


def _literal(value: Any, where: str) -> str:
    text = repr(value)
    try:
        same = ast.literal_eval(text) == value
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        same = False
    if not same and value == value:  # NaN never equals itself, and is no literal either
        raise DataError(f"{where}: {show(value)} cannot be written as a Python literal")
    if not same:
        raise DataError(f"{where}: NaN cannot be compared with ==")
    return text
