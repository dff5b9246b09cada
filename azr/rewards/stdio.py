"""Judging stdin/stdout cases: the program's output for one case compared with the expected output, here, outside
the sandbox, as competitive-programming judges compare.

The harness's sandbox side (`azr.rewards.runner`) runs the program once per case with the input on stdin, in a
process of its own that never loaded the program, and reports what the program printed, how it exited and whether
it ran out of time. The expected output never enters the sandbox, so printing harness-looking text gains nothing:
stdout is only ever compared. `lines` ignores trailing whitespace of each line and of the whole (Codeforces'
default); `tokens` compares whitespace-separated tokens; `float_tol` lets numeric tokens differ by that much,
absolutely or relatively; `decimals` is LiveCodeBench's rule (lines stripped at both ends, and a line that differs as
text passes when its tokens are equal as decimals: `2.500000` is `2.5`).
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from typing import Any

from azr.data import StdioCase

MIN_OUTPUT_CAP = 64 * 1024  # bytes of a case's stdout read back, at least; more for cases that expect more


def output_cap(case: StdioCase) -> int:
    """Bytes of stdout read back for this case: a power of two at least twice the expected output's size, so the
    cap says next to nothing about the answer's length."""
    need = 2 * len(case.output.encode()) + 1
    return max(MIN_OUTPUT_CAP, 1 << (need - 1).bit_length())


def judge_output(case: StdioCase, report: Any) -> str | None:
    """None when the reported run of `case` passes, else why not. `report` comes from the sandbox: anything
    malformed fails the case."""
    return ran_cleanly(report) or compare_output(case, report["out"])


def ran_cleanly(report: Any) -> str | None:
    """None when the reported run ended cleanly, within its limits (its output is then compared, or given to the
    task's checker), else why not; a runtime error shows the last line of the program's stderr."""
    if not isinstance(report, dict) or not isinstance(report.get("out"), str):
        return f"malformed stdin/stdout report {report!r:.80}"
    if report.get("timeout"):
        return f"time limit exceeded ({report.get('limit_s', '?')} s for this case)"
    if report.get("cut"):
        return "output limit exceeded"
    if report.get("exit") != 0:
        signal = report.get("signal")
        why = f"runtime error (killed by signal {signal})" if signal else f"runtime error (exit {report.get('exit')})"
        error = report.get("error")
        return f"{why}: {error[:300]}" if isinstance(error, str) and error else why
    return None


def compare_output(case: StdioCase, actual: str) -> str | None:
    """None when `actual` matches the case's expected output under its comparison, else the first difference."""
    if case.compare == "decimals" and case.float_tol is None:
        return _compare_decimals(case.output, actual)
    if case.compare == "lines" and case.float_tol is None:
        want, got = _lines(case.output), _lines(actual)
        for number, (a, b) in enumerate(zip(want, got, strict=False), 1):
            if a != b:
                return f"wrong answer: line {number}: expected {_short(a)}, got {_short(b)}"
        if len(want) != len(got):
            return f"wrong answer: expected {len(want)} lines, got {len(got)}"
        return None
    want, got = case.output.split(), actual.split()
    for number, (a, b) in enumerate(zip(want, got, strict=False), 1):
        if not _same_token(a, b, case.float_tol):
            return f"wrong answer: token {number}: expected {_short(a)}, got {_short(b)}"
    if len(want) != len(got):
        return f"wrong answer: expected {len(want)} tokens, got {len(got)}"
    return None


def _compare_decimals(expected: str, actual: str) -> str | None:
    """LiveCodeBench's `grade_stdio`: both texts stripped and split on newlines, each line stripped; as many lines,
    and each pair equal as text or, token by token, as `Decimal`s (a line with a token that is no decimal fails)."""
    want = [line.strip() for line in expected.strip().split("\n")]
    got = [line.strip() for line in actual.strip().split("\n")]
    if len(want) != len(got):
        return f"wrong answer: expected {len(want)} lines, got {len(got)}"
    for number, (a, b) in enumerate(zip(want, got, strict=True), 1):
        if a == b:
            continue
        if not _same_decimals(_decimals(a), _decimals(b)):
            return f"wrong answer: line {number}: expected {_short(a)}, got {_short(b)}"
    return None


def _same_decimals(a: list[Decimal] | None, b: list[Decimal] | None) -> bool:
    try:
        return a is not None and b is not None and a == b
    except InvalidOperation:  # a signalling NaN refuses comparison: no match
        return False


def _decimals(line: str) -> list[Decimal] | None:
    try:
        return [Decimal(token) for token in line.split()]
    except (InvalidOperation, ValueError):
        return None


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _same_token(expected: str, actual: str, tol: float | None) -> bool:
    if expected == actual:
        return True
    if tol is None:
        return False
    try:
        a, b = float(expected), float(actual)
    except ValueError:
        return False
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    return abs(a - b) <= tol * max(1.0, abs(a))


def _short(text: str) -> str:
    return repr(text) if len(text) <= 80 else repr(text[:80]) + "..."
