"""Outputs: what a program returns or prints on given inputs, run through the harness in the sandbox and read back
here as plain data, for callers that compare two programs (the test audit's equivalent mutants and its oracle).

An input is a call expression (`f(1, [2])`, run as a value test: its value comes back typed, `azr.rewards.values`)
or, for a stdin/stdout task, the text given on stdin (its stdout comes back). Nothing is judged here: each input's
`Output` says what came back, or why nothing usable did.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from azr.data import StdioCase, Task
from azr.rewards.grading import case_seconds, task_limits
from azr.rewards.harness import build_program, preloads_harness
from azr.rewards.plans import TestPlan, ValueCheck
from azr.rewards.stdio import MIN_OUTPUT_CAP
from azr.rewards.values import Opaque, decode_value
from azr.rewards.verdicts import harness_lines
from azr.sandbox import ExecutionProvider, Limits


@dataclass(frozen=True)
class Output:
    """One input's outcome: `ok` with the value returned (call inputs) or the text printed (stdin inputs), else
    `why` it has none (an exception, a timeout, a non-zero exit, a value that is not plain data)."""

    ok: bool
    value: Any = None
    why: str = ""


def outputs_many(
    jobs: Sequence[tuple[Task, str, Sequence[str]]], pool: ExecutionProvider, limits: Limits
) -> list[list[Output]]:
    """For each (task, code, inputs): the outputs of `code` on each input, with the task's setup and limits (a stdin
    task's inputs are stdin texts, any other's are call expressions). All programs go through `pool` at once."""
    preloaded = preloads_harness(pool.preload)
    built = []
    for task, code, inputs in jobs:
        if task.stdio:
            plans = [TestPlan("stdio", "", origin=StdioCase(text, "")) for text in inputs]
        else:
            plans = [TestPlan("value", expr, (ValueCheck(expr, "=="),)) for expr in inputs]
        nonce = os.urandom(16).hex()
        case_s = case_seconds(task, limits) if task.stdio else None
        program = build_program(code, plans, nonce, preloaded, task.setup, case_s)
        own = _limits(task, limits, len(inputs))
        built.append((nonce, len(inputs), program, own))
    results = pool.map([b[2] for b in built], [b[3] for b in built]) if built else []
    return [_read(result.report, nonce, n) for (nonce, n, _, _), result in zip(built, results, strict=True)]


def _limits(task: Task, base: Limits, n: int) -> Limits:
    """The task's own limits, its time scaled from its own tests to these `n` inputs (one program runs them all)."""
    own = task_limits(task, base)
    if task.stdio:
        report = min(n * (2 * MIN_OUTPUT_CAP + 1024) + base.report_bytes, base.file_size_mb << 20)
        return dataclasses.replace(own, wall_s=case_seconds(task, base) * n + 1.0, report_bytes=report)
    return dataclasses.replace(own, wall_s=own.wall_s * max(1.0, n / max(1, len(task.tests))))


def _read(report: str, nonce: str, n: int) -> list[Output]:
    seen, load_error = harness_lines(report, nonce, n)
    if load_error is not None:
        return [Output(False, why=f"failed to load: {load_error}")] * n
    missing = Output(False, why="no output: the program ended or was stopped first")
    return [_output(*seen[i][0]) if i in seen else missing for i in range(n)]


def _output(kind: str, payload: Any) -> Output:
    if kind == "error":
        return Output(False, why=str(payload)[:300])
    if kind == "stdout":
        if not isinstance(payload, dict) or not isinstance(payload.get("out"), str):
            return Output(False, why="malformed report")
        if payload.get("timeout") or payload.get("cut") or payload.get("exit") != 0:
            return Output(False, why="timeout, output cut or non-zero exit")
        return Output(True, payload["out"])
    if kind == "value" and isinstance(payload, list) and len(payload) == 1:
        try:
            value = decode_value(payload[0])
        except Exception as exc:  # a malformed value is no output, nothing else
            return Output(False, why=f"{type(exc).__name__}: {exc}"[:300])
        if _opaque(value):
            return Output(False, why="not plain data")
        return Output(True, value)
    return Output(False, why=f"unexpected report {kind!r}")


def _opaque(value: Any) -> bool:
    if isinstance(value, Opaque):
        return True
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_opaque(v) for v in value)
    if isinstance(value, dict):
        return any(_opaque(k) or _opaque(v) for k, v in value.items())
    return False
