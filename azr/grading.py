"""Grading: build a program from (task, code), run each test on its own, and return a `Grade`.

Each test runs in a fresh copy of the namespace the code left, so one failing test does not stop the others
(partial credit). The verdict travels on a private duplicate of stdout, tagged with a per-run nonce, and the
program's own stdout goes to stderr, so ordinary printing is never read as a verdict and a program that exits
early passes nothing.

Execution here is a plain subprocess with a cleared environment, its own session and a wall-clock limit, and the
harness shares the program's interpreter. That is enough for trusted reference solutions (`azr data validate`);
it is NOT a defence against hostile code (which could find the nonce), nor isolation: the sandbox and its
unforgeable verdicts (`azr/sandbox/`) replace `_execute` and the harness.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal

from azr.data import Task

Status = Literal["passed", "failed", "error", "timeout"]

# Runs inside the child. Reads {"code", "tests", "nonce"} from stdin; writes one tagged JSON verdict line.
_HARNESS = r"""
import json, os, sys
payload = json.loads(sys.stdin.read())
verdict = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
results = []
namespace = {"__name__": "__main__"}
try:
    exec(compile(payload["code"], "<solution>", "exec"), namespace)
    setup_error = None
except BaseException as exc:
    setup_error = f"{type(exc).__name__}: {exc}"
for i, test in enumerate(payload["tests"]):
    if setup_error is not None:
        results.append("solution failed to load: " + setup_error)
        continue
    try:
        exec(compile(test, f"<test {i}>", "exec"), dict(namespace))
        results.append(None)
    except BaseException as exc:
        results.append(f"{type(exc).__name__}: {exc}"[:500])
verdict.write(payload["nonce"] + json.dumps(results) + "\n")
verdict.flush()
"""


@dataclass
class Grade:
    """Outcome of one program: `status` is decided from the harness verdict, never from the exit code."""

    status: Status
    tests_passed: int
    tests_total: int
    failures: list[str] = field(default_factory=list)  # "test 2: AssertionError: ..." per failed test
    duration_s: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def build_program(task: Task, code: str) -> dict:
    """The payload the harness runs: the code, then each of the task's tests on its own."""
    return {"code": code, "tests": list(task.tests)}


def grade(task: Task, code: str, timeout_s: float = 10.0) -> Grade:
    payload = build_program(task, code)
    started = time.monotonic()
    verdict, note = _execute(payload, task.timeout_s or timeout_s)
    duration = time.monotonic() - started
    total = len(task.tests)
    if verdict is None:
        status: Status = "timeout" if note == "timeout" else "error"
        return Grade(status, 0, total, [note], duration)
    failures = [f"test {i}: {err}" for i, err in enumerate(verdict) if err is not None]
    passed = total - len(failures)
    return Grade("passed" if passed == total else "failed", passed, total, failures, duration)


def grade_many(pairs: Sequence[tuple[Task, str]], workers: int | None = None, timeout_s: float = 10.0) -> list[Grade]:
    """Grade (task, code) pairs in parallel, keeping order."""
    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        return list(pool.map(lambda pair: grade(pair[0], pair[1], timeout_s), pairs))


def _execute(payload: dict, timeout_s: float) -> tuple[list[str | None] | None, str]:
    nonce = "AZR-" + secrets.token_hex(16) + ":"
    env = {"PATH": os.defpath, "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}  # nothing of the caller's, secrets included
    with tempfile.TemporaryDirectory(prefix="azr-grade-") as cwd:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _HARNESS],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
            text=True,
        )
        try:
            out, err = proc.communicate(json.dumps({**payload, "nonce": nonce}), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the child's own group, never ours
            proc.communicate()
            return None, "timeout"
        finally:
            _kill_group(proc.pid)
    for line in reversed(out.splitlines()):
        if line.startswith(nonce):
            return json.loads(line[len(nonce) :]), "ok"
    tail = err.strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
    return None, f"no verdict: the program ended before its tests ran ({tail[0][:300]})"


def _kill_group(pgid: int) -> None:
    """Reap anything the program left running in its session."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def validate_references(
    tasks: Sequence[Task], workers: int | None = None, timeout_s: float = 10.0
) -> list[tuple[Task, Grade | None]]:
    """Grade each task's reference solution against its own tests; None where a task has no solution."""
    with_solution = [t for t in tasks if t.solution is not None]
    grades = iter(grade_many([(t, t.solution) for t in with_solution], workers, timeout_s))
    return [(t, next(grades) if t.solution is not None else None) for t in tasks]
