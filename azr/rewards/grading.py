"""Grading: run a task's tests against a completion's code in the sandbox and turn the verdicts into a `Grade`.

The harness (`azr.rewards.harness`) builds the program from each test's plan (`azr.rewards.plans`), and
`azr.rewards.verdicts` reads back each test's verdict; this module runs it through an execution provider
(`azr.sandbox.ExecutionProvider`: the sandbox pool, or any other) with each task's own limits, and derives one
status per program: `passed` only when the harness saw every test pass; otherwise `timeout` / `memory` /
`crashed` / `error` from how the program ended, or `failed`.
`error` is the sandbox's own failure (infrastructure), never something a program can cause.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import os
import re
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from azr.config import SandboxConfig
from azr.data import AssertTest, ModuleTest, StdioCase, Task, encode, module_tests
from azr.rewards.harness import build_checker_program, build_program, harness_preload, preloads_harness
from azr.rewards.plans import TestPlan, plan_test
from azr.rewards.stdio import output_cap
from azr.rewards.verdicts import (
    CHECKER_PENDING,
    NO_CHECKER_VERDICT,
    TestOutcome,
    read_checks,
    read_outcomes,
    read_verdicts,
)
from azr.sandbox import Check, ExecResult, ExecutionProvider, Limits, SandboxPool, open_pool, open_provider, shared_pool

Status = Literal["passed", "failed", "timeout", "memory", "crashed", "error"]


@dataclass
class Grade:
    """Outcome of one program. `status` is `passed` only when the harness saw every test pass."""

    status: Status
    tests_passed: int
    tests_total: int
    failures: list[str] = field(default_factory=list)  # "test 2: AssertionError: ..." per failed test
    duration_s: float = 0.0
    stdout: str = ""
    stderr: str = ""
    backend: str = ""
    per_test: list[bool] = field(default_factory=list)  # test i passed?
    outcomes: list[TestOutcome] = field(default_factory=list)  # each test's input, expected, actual (`detail=True`)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def fraction(self) -> float:
        return self.tests_passed / self.tests_total if self.tests_total else 0.0


# Each test of a program runs in a fork of it (`azr.rewards.runner`): a few milliseconds apiece, more where the
# solution imports a large module, whose pages every fork copies. A task without a time limit of its own gets at least
# this much wall time per test, so that a right program with a thousand tests (EvalPlus's plus inputs: HumanEval/162's
# reference ran out of the default 5 s at its 954th) is not cut off by a default meant for a handful.
TEST_FORK_S = 0.01


def task_limits(task: Task, base: Limits) -> Limits:
    """`base`, with the task's own timeout and memory where it sets them, and at least `TEST_FORK_S` of wall time
    per test where it sets no timeout. For a stdin/stdout task the timeout is each case's, and the program (all
    cases, one after another) gets their sum, plus room on the report channel for every case's output."""
    if task.stdio:
        cases = [c for c in task.tests if isinstance(c, StdioCase)]
        report = sum(2 * output_cap(c) + 1024 for c in cases) + base.report_bytes
        return dataclasses.replace(
            base,
            wall_s=case_seconds(task, base) * len(cases) + 1.0,
            memory_mb=task.memory_mb or base.memory_mb,
            report_bytes=min(report, base.file_size_mb << 20),
        )
    # Values as large as the expected ones come back on the report channel: room for twice the tests' own text
    # (the expected literals are in it), so a right answer is never cut off after the first large ones. A module
    # test's values are computed as it runs (`"a" * 100_000`), and each check reports both sides and the twin's
    # value of its pure one: their size is not in the text, so the channel gets all the file-size limit allows.
    report = 2 * sum(len(encode(t)) for t in task.tests) + (64 << 10)
    if any(isinstance(t, ModuleTest) for t in task.tests):
        report = max(report, base.file_size_mb << 20)
    wall_s = task.timeout_s or max(base.wall_s, TEST_FORK_S * len(task.tests))
    if wall_s == base.wall_s and not task.memory_mb and report <= base.report_bytes:  # the usual task: base as it is
        return base
    return dataclasses.replace(
        base,
        wall_s=wall_s,
        memory_mb=task.memory_mb or base.memory_mb,
        report_bytes=min(max(report, base.report_bytes), base.file_size_mb << 20),
    )


def case_seconds(task: Task, base: Limits) -> float:
    """A stdin/stdout case's own time limit: the task's timeout, else the sandbox's."""
    return task.timeout_s or base.wall_s


def limits_from_config(cfg: SandboxConfig) -> Limits:
    return Limits(
        wall_s=cfg.timeout_s,
        memory_mb=cfg.memory_mb,
        output_bytes=cfg.max_output_kb * 1024,
        file_size_mb=cfg.file_size_mb,
        open_files=cfg.open_files,
        processes=cfg.processes,
    )


def pool_from_config(cfg: SandboxConfig, label: str = "") -> ExecutionProvider:
    """The process-wide provider for these sandbox settings (`open_provider`: the local pool or sandbox servers),
    with the harness preloaded (a local pool's workers start on first use, or by `start_pool`; closed at exit);
    `label` names a local pool's directory."""
    return open_provider(cfg, harness_preload(), label, worker_memory_mb(cfg))


def start_pool(cfg: SandboxConfig) -> None:
    """Start `pool_from_config(cfg)` and its workers in the background, while the caller reads its input; returns
    at once. A failure here (no backend works) is met again, and reported, where the pool is first used."""

    def start() -> None:
        with contextlib.suppress(Exception):  # reported by the caller's own pool_from_config, not from this thread
            provider = pool_from_config(cfg)
            if isinstance(provider, SandboxPool):  # a remote provider has nothing to start
                provider.start()

    threading.Thread(target=start, name="azr-sandbox-start", daemon=True).start()


def worker_memory_mb(cfg: SandboxConfig) -> int:
    """Memory cap of one worker (as root, through its memory cgroup): room for a program of `memory_mb` with a few
    helper processes, both tmpfs full, and the worker itself."""
    return 4 * cfg.memory_mb + 2 * cfg.tmp_size_mb + 256


def grade_many(
    pairs: Sequence[tuple[Task, str]],
    pool: ExecutionProvider | None = None,
    limits: Limits | None = None,
    detail: bool = False,
) -> list[Grade]:
    """Grade (task, code) pairs in parallel over the pool, keeping order; each task's own limits apply. Tasks with
    a special judge get a second run each, of their checker on the outputs (all such runs in parallel too). With
    `detail`, each grade holds its tests' outcomes (`Grade.outcomes`: inputs, expected and actual outputs)."""
    pool = pool or shared_pool()
    jobs = list(_jobs(pairs, limits or Limits(), pool, detail))
    results = pool.map([job.program for job in jobs], [job.limits for job in jobs])
    read = [job.read(result) for job, result in zip(jobs, results, strict=True)]
    checks = [job.checker_program(verdicts, outputs) for job, (verdicts, outputs) in zip(jobs, read, strict=True)]
    todo = [(i, c) for i, c in enumerate(checks) if c is not None]
    if todo:
        checked = pool.map([c[1] for _, c in todo], [jobs[i].limits for i, _ in todo])
        for (i, (nonce, _, indexes)), result in zip(todo, checked, strict=True):
            jobs[i].apply_checks(read[i][0], indexes, nonce, result)
    return [job.grade(verdicts, result) for job, (verdicts, _), result in zip(jobs, read, results, strict=True)]


def grade_stream(
    pairs: Iterable[tuple[Task, str]], pool: ExecutionProvider | None = None, limits: Limits | None = None
) -> Iterator[Grade]:
    """`grade_many` as a stream: each program is queued as soon as it is built (workers start on the first while the
    rest are planned), and each grade comes, in order, as soon as it and those before it are done."""
    jobs: list[_Job] = []
    pool = pool or shared_pool()

    def programs() -> Iterator[tuple[str, Limits]]:
        for job in _jobs(pairs, limits or Limits(), pool):
            jobs.append(job)
            yield job.program, job.limits

    for index, result in enumerate(pool.imap(programs())):  # every job is built by then
        job = jobs[index]
        verdicts, outputs = job.read(result)
        check = job.checker_program(verdicts, outputs)
        if check is not None:
            job.apply_checks(verdicts, check[2], check[0], pool.run(check[1], job.limits))
        yield job.grade(verdicts, result)


CHECKER_LOST = "the checker did not judge this case"
CHECKER_OUT_OF = {  # worded so that `_grade` reads the status from them, as from a program's own case
    "timeout": "time limit exceeded: the checker ran past the time limit",
    "memory": "MemoryError: the checker ran out of memory",
}


@dataclass
class _Job:
    """One program to grade: its tests' plans, nonce, program and limits; reads its verdicts back."""

    plans: list[TestPlan]
    nonce: str
    program: str
    limits: Limits
    preloaded: bool
    checker: str | None = None  # the task's special judge of its stdin/stdout cases
    detail: bool = False  # read each test's outcome too (execution feedback)

    def read(self, result: ExecResult) -> tuple[list[str | None], dict[int, str]]:
        if not self.plans:
            return [], {}
        outputs: dict[int, str] = {}
        read = read_verdicts(result.report, self.nonce, self.plans, outputs if self.checker is not None else None)
        return [_not_offered(why) for why in read], outputs

    def checker_program(self, verdicts: list[str | None], outputs: dict[int, str]) -> tuple[str, str, list[int]] | None:
        """(nonce, program, case indexes) of the checker's run over the cases that ran cleanly; None if none."""
        indexes = [i for i, why in enumerate(verdicts) if why == CHECKER_PENDING]
        cases = [self.plans[i].stdio for i in indexes]
        if not indexes or self.checker is None:
            return None
        triples = [(c.input, c.output, outputs[i]) for c, i in zip(cases, indexes, strict=True) if c is not None]
        nonce = os.urandom(16).hex()
        return nonce, build_checker_program(self.checker, triples, nonce, self.preloaded), indexes

    def apply_checks(self, verdicts: list[str | None], indexes: list[int], nonce: str, result: ExecResult) -> None:
        """The checker run's verdicts; a case it left unjudged because the run ran out of time or memory says so
        (the grade is then `timeout` or `memory`, not `crashed`)."""
        for i, why in zip(indexes, read_checks(result.report, nonce, len(indexes)), strict=True):
            if why == NO_CHECKER_VERDICT and result.status in CHECKER_OUT_OF:
                why = CHECKER_OUT_OF[result.status]
            verdicts[i] = why

    def grade(self, verdicts: list[str | None], result: ExecResult) -> Grade:
        verdicts = [CHECKER_LOST if why == CHECKER_PENDING else why for why in verdicts]
        grade = _grade(self.plans, verdicts, result)
        if self.detail and self.plans:
            timed_out = result.status == "timeout"
            grade.outcomes = read_outcomes(result.report, self.nonce, self.plans, verdicts, timed_out)
        return grade


def _jobs(
    pairs: Iterable[tuple[Task, str]], base: Limits, pool: ExecutionProvider, detail: bool = False
) -> Iterator[_Job]:
    """A job per pair for `pool`: a fresh nonce per program, the task's own limits."""
    preloaded = preloads_harness(pool.preload)
    random = b""
    for task, code in pairs:
        plans = [plan_test(t, task.atol, task.rtol) for t in task.tests]
        if len({p.kind == "stdio" for p in plans} | {task.stdio}) > 1:
            plans = []  # stdin/stdout cases mixed with asserts (the loader refuses such rows): nothing can be judged
        if not random:  # 128 random bits per program, drawn from the OS in batches (a syscall each is slow in VMs)
            random = os.urandom(16 * 256)  # what secrets.token_bytes returns, without its hashlib import
        nonce, random = random[:16].hex(), random[16:]
        case_s = case_seconds(task, base) if task.stdio else None
        program = build_program(code, plans, nonce, preloaded, task.setup, case_s, task.prelude)
        checker = task.checker if task.stdio else None
        yield _Job(plans, nonce, program, task_limits(task, base), preloaded, checker, detail)


def grade(
    task: Task, code: str, pool: ExecutionProvider | None = None, limits: Limits | None = None, detail: bool = False
) -> Grade:
    """Run `task`'s tests against `code` in the sandbox (`detail`: with each test's outcome)."""
    return grade_many([(task, code)], pool, limits, detail)[0]


def _grade(plans: Sequence[TestPlan], verdicts: list[str | None], result: ExecResult) -> Grade:
    if not plans:  # nothing can be judged: never a pass; the data loader rejects such tasks before this
        return Grade("error", 0, 0, ["the task has no tests"], result.duration_s, backend=result.backend)
    failures = [f"test {i}: {why}" for i, why in enumerate(verdicts) if why is not None]
    passed = len(plans) - len(failures)
    if passed == len(plans):
        status: Status = "passed"
    elif result.status == "ok":
        missing = any(why and why.startswith("no verdict") for why in verdicts)
        memory = any(why and "MemoryError" in why for why in verdicts)
        late = any(why and why.startswith("time limit exceeded") for why in verdicts)  # a stdin/stdout case's own
        status = "memory" if memory else "crashed" if missing else "timeout" if late else "failed"
    else:
        status = result.status  # timeout / memory / crashed / error
    if result.note:
        failures.append(result.note)
    per_test = [why is None for why in verdicts]
    return Grade(
        status, passed, len(plans), failures, result.duration_s, result.stdout, result.stderr, result.backend, per_test
    )


_MISSING = re.compile(r"ModuleNotFoundError: No module named '([A-Za-z_]\w*)[\w.]*'")


def _not_offered(why: str | None) -> str | None:
    """A module the program could not import although it is installed here: say it is not offered, and how to."""
    found = _MISSING.search(why) if why else None
    if found is None or not _installed_here(found.group(1)):
        return why
    name = found.group(1)
    return why.replace(
        found.group(0), f"ModuleNotFoundError: {name} is not offered to programs; add it to sandbox.packages"
    )


@functools.cache
def _installed_here(name: str) -> bool:
    """A top-level module of this environment outside the standard library (which programs always have)."""
    return name not in sys.stdlib_module_names and importlib.util.find_spec(name) is not None


_FORGERIES = {
    "os._exit(0) at load": "import os\nos._exit(0)",
    "exit(0) at load": "exit(0)",
    "os._exit(0) inside the function": "def f(x):\n    import os\n    os._exit(0)",
    "SystemExit inside the function": "def f(x):\n    raise SystemExit(0)",
    "closed stdout": "import os\nos.close(1)\ndef f(x):\n    return 0",
    "atexit hook": "import atexit, sys\natexit.register(lambda: print('passed'))\ndef f(x):\n    sys.exit(0)",
    "always-equal object": "class A:\n    def __eq__(self, other):\n        return True\ndef f(x):\n    return A()",
}


_DOCTOR_MODULE = (
    "from solution import f\n\ndef test_one():\n    assert f(1) == 2\n\ndef test_two():\n    assert f(2) == 3\n"
)


def verdict_check(pool: ExecutionProvider) -> Check:
    """Doctor row: none of the known ways to fake a pass gets a test passed, of asserts or of a pytest-style
    module."""
    tasks = [
        Task("doctor", "", ["assert f(1) == 2", "assert f(2) == 3"]),
        Task("doctor-pytest", "", module_tests("pytest", _DOCTOR_MODULE, "doctor")),
    ]
    jobs = [(task, code) for code in _FORGERIES.values() for task in tasks]
    grades = grade_many(jobs, pool, Limits(wall_s=5.0))
    passed = [sum(g.tests_passed for g in grades[i : i + len(tasks)]) for i in range(0, len(grades), len(tasks))]
    forged = [name for name, n in zip(_FORGERIES, passed, strict=True) if n]
    detail = f"forged: {', '.join(forged)}" if forged else f"{len(_FORGERIES)} tricks, none passed a test"
    return Check("verdicts cannot be forged", not forged, detail)


def run_program(code: str, tests: Sequence[str], cfg: SandboxConfig) -> dict[str, Any]:
    """`azr sandbox run`: one program, with or without tests, as the JSON contract's object."""
    limits = limits_from_config(cfg)
    settings = (cfg.backend, cfg.workers, cfg.tmp_size_mb, cfg.processes, worker_memory_mb(cfg))
    with open_pool(*settings, packages=tuple(cfg.packages)) as pool:
        if tests:
            g = grade(Task("cli", "", [AssertTest(t) for t in tests]), code, pool, limits)
            status = "ok" if g.passed else g.status
            fields = (g.passed, g.tests_passed, g.tests_total, g.stdout, g.stderr, g.duration_s, g.backend)
        else:
            r = pool.run(code, limits)
            status = "failed" if r.status == "ok" and r.exit_code != 0 else r.status
            fields = (status == "ok", 0, 0, r.stdout, r.stderr, r.duration_s, r.backend)
    keys = ("passed", "tests_passed", "tests_total", "stdout", "stderr", "duration_s", "backend")
    return {"status": status, **dict(zip(keys, fields, strict=True))}


def validate_references(
    tasks: Sequence[Task], pool: ExecutionProvider | None = None, limits: Limits | None = None
) -> list[tuple[Task, Grade | None]]:
    """Grade each task's reference solution against its own tests; None where a task has no solution."""
    with_solution = [t for t in tasks if t.solution is not None]
    grades = iter(grade_many([(t, t.solution) for t in with_solution], pool, limits))
    return [(t, next(grades) if t.solution is not None else None) for t in tasks]
