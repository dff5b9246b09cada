"""Grading: run a task's tests against some code and return a `Grade`.

Each test runs on its own, in a namespace made fresh by running the code again, so one failing test does not
stop the others (partial credit) and no state leaks from one test into the next. The verdict travels on a private
duplicate of stdout, tagged with a per-run nonce, and the program's own stdout goes to stderr, so ordinary
printing is never read as a verdict and a program that exits early passes nothing.

Statuses: `passed` / `failed` (the harness ran every test), `timeout` (wall clock), `crashed` (the program ended
without a verdict: exit, signal, memory), `error` (the harness itself could not run: an infrastructure fault).

Execution here is a plain subprocess with a cleared environment, its own session, an address-space limit and a
wall clock, and the harness shares the program's interpreter. That is enough for trusted reference solutions
(`azr data validate`); it is NOT a defence against hostile code (which could find the nonce), nor isolation: the
sandbox and its unforgeable verdicts (`azr/sandbox/`) replace `_execute` and the harness.
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
from pathlib import Path
from typing import Literal

from azr.data import Task

Status = Literal["passed", "failed", "timeout", "crashed", "error"]

# Runs inside the child. Reads {"code", "tests", "nonce", "memory_mb"} from stdin; writes one tagged verdict line.
_HARNESS = r"""
import json, os, resource, sys
payload = json.loads(sys.stdin.read())
limit = payload["memory_mb"] * 1024 * 1024
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
verdict = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
code = compile(payload["code"], "<solution>", "exec")
results = []
for i, test in enumerate(payload["tests"]):
    namespace = {"__name__": "__main__"}
    try:
        exec(code, namespace)
    except BaseException as exc:
        results.append(f"solution failed to load: {type(exc).__name__}: {exc}"[:500])
        continue
    try:
        exec(compile(test, f"<test {i}>", "exec"), namespace)
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


def grade(task: Task, code: str, timeout_s: float = 5.0, memory_mb: int = 512) -> Grade:
    """Run `task`'s tests against `code`; the task's own limits win over the defaults given here."""
    started = time.monotonic()
    payload = {"code": code, "tests": list(task.tests), "memory_mb": task.memory_mb or memory_mb}
    verdict, status, note = _execute(payload, task.timeout_s or timeout_s)
    duration = time.monotonic() - started
    total = len(task.tests)
    if verdict is None:
        return Grade(status, 0, total, [note], duration)
    failures = [f"test {i}: {err}" for i, err in enumerate(verdict) if err is not None]
    passed = total - len(failures)
    return Grade("passed" if passed == total else "failed", passed, total, failures, duration)


def grade_many(
    pairs: Sequence[tuple[Task, str]], workers: int | None = None, timeout_s: float = 5.0, memory_mb: int = 512
) -> list[Grade]:
    """Grade (task, code) pairs in parallel, keeping order."""
    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        return list(pool.map(lambda pair: grade(pair[0], pair[1], timeout_s, memory_mb), pairs))


def validate_references(
    tasks: Sequence[Task], workers: int | None = None, timeout_s: float = 5.0, memory_mb: int = 512
) -> list[tuple[Task, Grade | None]]:
    """Grade each task's reference solution against its own tests; None where a task has no solution."""
    with_solution = [t for t in tasks if t.solution is not None]
    grades = iter(grade_many([(t, t.solution) for t in with_solution], workers, timeout_s, memory_mb))
    return [(t, next(grades) if t.solution is not None else None) for t in tasks]


def _execute(payload: dict, timeout_s: float) -> tuple[list[str | None] | None, Status, str]:
    """Run the harness; returns (per-test errors or None, status when there is no verdict, note)."""
    nonce = "AZR-" + secrets.token_hex(16) + ":"
    env = {"PATH": os.defpath, "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}  # nothing of the caller's, secrets included
    with tempfile.TemporaryDirectory(prefix="azr-grade-") as tmp:
        work = Path(tmp)
        (work / "in").write_text(json.dumps({**payload, "nonce": nonce}))
        # Files, not pipes: a child the program leaves behind cannot hold the verdict hostage by keeping a pipe open.
        with open(work / "in", "rb") as stdin, open(work / "out", "wb") as out, open(work / "err", "wb") as err:
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-I", "-c", _HARNESS],
                    stdin=stdin,
                    stdout=out,
                    stderr=err,
                    cwd=tmp,
                    env=env,
                    start_new_session=True,
                )
            except OSError as exc:
                return None, "error", f"harness did not start: {exc}"
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                return None, "timeout", f"timeout after {timeout_s:g} s"
            finally:
                _kill_group(proc.pid)  # the child's own session: never the caller's group
                proc.wait()
        stdout = (work / "out").read_bytes().decode("utf-8", errors="replace")
        stderr = (work / "err").read_bytes().decode("utf-8", errors="replace")
    for line in reversed(stdout.splitlines()):
        if line.startswith(nonce):
            return json.loads(line[len(nonce) :]), "failed", "ok"
    tail = stderr.strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
    return None, "crashed", f"no verdict: the program ended before its tests finished ({tail[0][:300]})"


def _kill_group(pgid: int) -> None:
    """Kill whatever the program left running in its session."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
