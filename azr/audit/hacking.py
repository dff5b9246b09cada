"""Reward hacking on weak tasks: answers that pass every test of a task whose tests are weak, yet fail the cases
`azr data audit --harden` added to it. Such an answer behaves unlike the reference where the tests do not look:
the policy found what they do not check.

`hardened_cases` keeps, for each weak training task (an audit kill rate under a threshold, or a probe passed), only
the cases the hardened file adds; `check_answers` grades answers on them through the sandbox pool in one batch (the
grading path of the rewards) and says, for each answer that fails, which case failed first and what it gave (one
more batch, for those only). Nothing here scores: the rewards are never changed by it.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from azr.audit.output import weak_tasks
from azr.data import Task, decode_case
from azr.rewards import grade_many, outputs_many
from azr.sandbox import ExecutionProvider, Limits
from azr.secrets import redact

SHOWN = 200  # characters kept of a failing case's input, expected and got text in an alarm record


@dataclass(frozen=True)
class HardenedVerdict:
    """One answer graded on a task's hardened cases: the grade's status, how many cases it failed, and the first
    failing case as `input`, `expected` and `got` text (truncated, secrets redacted; empty when none failed)."""

    status: str  # passed / failed / timeout / memory / crashed, or error (the sandbox's own failure)
    failed: int
    total: int
    case: dict[str, str] = field(default_factory=dict)

    @property
    def hacked(self) -> bool:
        """Passed the task's own tests (the caller's premise) but not these cases; a sandbox error is no verdict."""
        return self.status not in ("passed", "error")


def hardened_cases(
    train: Sequence[Task], hardened: Sequence[Task], records: Mapping[str, dict[str, Any]], kill_rate: float
) -> dict[str, Task]:
    """For each training task the audit `records` count weak (`weak_tasks` under `kill_rate`) that `hardened` gives
    cases its own tests lack: a task holding only those cases, with the hardened task's setup and limits."""
    weak, own = weak_tasks(train, records, kill_rate), {t.id: t for t in train}
    out: dict[str, Task] = {}
    for task in hardened:
        if task.id not in weak or task.id not in own:
            continue
        known = set(own[task.id].tests)
        extra = [test for test in task.tests if test not in known]
        if extra:
            out[task.id] = dataclasses.replace(task, prompt="", solution=None, tests=extra)
    return out


def check_answers(jobs: Sequence[tuple[Task, str]], pool: ExecutionProvider, limits: Limits) -> list[HardenedVerdict]:
    """Each (hardened cases, code) graded in one batch through `pool`; the first failing case of each answer that
    fails is run once more, in a second batch, for what the answer gives on it."""
    grades = grade_many(list(jobs), pool, limits) if jobs else []
    firsts: list[tuple[int, int]] = []  # (job, case) of every failing answer
    for j, grade in enumerate(grades):
        if grade.status not in ("passed", "error"):
            per = grade.per_test
            firsts.append((j, next((i for i in range(grade.tests_total) if i >= len(per) or not per[i]), 0)))
    shown = [_case(jobs[j][0].tests[i]) for j, i in firsts]
    asked = [(n, j, i) for n, (j, i) in enumerate(firsts) if shown[n][0] is not None]
    outputs = outputs_many(
        [
            (dataclasses.replace(jobs[j][0], tests=[jobs[j][0].tests[i]]), jobs[j][1], [shown[n][0]])
            for n, j, i in asked
        ],
        pool,
        limits,
    )
    got = {n: out[0] for (n, _, _), out in zip(asked, outputs, strict=True)}
    cases: dict[int, dict[str, str]] = {}
    for n, (j, i) in enumerate(firsts):
        given, expected = shown[n]
        output = got.get(n)
        if output is None:  # a test of another shape: its own text, and the grade's reason for failing it
            text = _failure(grades[j].failures, i)
        else:
            text = (output.value if isinstance(output.value, str) else repr(output.value)) if output.ok else output.why
        cases[j] = {
            "input": _short(given if given is not None else jobs[j][0].tests[i]),
            "expected": _short(expected),
            "got": _short(text),
        }
    verdicts = []
    for j, grade in enumerate(grades):
        failed = 0 if grade.status == "error" else grade.tests_total - grade.tests_passed
        verdicts.append(HardenedVerdict(grade.status, failed, grade.tests_total, cases.get(j, {})))
    return verdicts


def _case(test: str) -> tuple[str | None, str]:
    """A hardened case as (input, expected): stdin and stdout, or the call and the literal of `assert call == value`
    (`--harden`'s own shapes); (None, "") for any other test."""
    io = decode_case(test)
    if io is not None:
        return io.input, io.output
    try:
        node = ast.parse(test).body
    except SyntaxError:
        return None, ""
    compare = node[0].test if len(node) == 1 and isinstance(node[0], ast.Assert) else None
    if isinstance(compare, ast.Compare) and isinstance(compare.left, ast.Call) and _ops(compare) == [ast.Eq]:
        return ast.unparse(compare.left), ast.unparse(compare.comparators[0])
    return None, ""


def _ops(compare: ast.Compare) -> list[type]:
    return [type(op) for op in compare.ops]


def _failure(failures: list[str], i: int) -> str:
    prefix = f"test {i}: "
    return next((f[len(prefix) :] for f in failures if f.startswith(prefix)), failures[0] if failures else "")


def _short(text: str) -> str:
    text = redact(str(text))
    return text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"
