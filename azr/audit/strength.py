"""The audit of a task set's tests: how many near-miss programs (mutants, probes) each task's tests let through.
A survivor that passes every case of the reference's own oracle counts as equivalent; kill rate = killed /
(mutants - equivalent). Everything runs in the sandbox through the grading path of training, in four batches over
all tasks, each program under a time limit scaled from the reference's (docs/audit.md); comparisons are made here.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from azr.audit.cases import called_name, generated_inputs, inputs_in_tests
from azr.audit.mutants import mutants as make_mutants
from azr.audit.probes import empty_value_probe, static_probes
from azr.data import AssertTest, StdioCase, Task, Test
from azr.rewards import grade_many, grade_stream, outputs_many
from azr.sandbox import ExecutionProvider, Limits

Progress = Callable[[int, int], None]


@dataclass
class OracleCase:
    """One input with the reference's output on it (the same on two runs), as a test of azr's own kinds."""

    input: str
    test: Test  # an assert, or a stdin/stdout case
    generated: bool  # made by the audit, not one of the tests' own inputs
    value: Any = None  # what the reference returned or printed


@dataclass
class TaskAudit:
    """One task's figures: what `audit.jsonl` holds (`record()`), and for hardening the oracle and which of its
    cases kill which survivor."""

    id: str
    kill_rate: float | None = None
    mutants: int = 0
    killed: int = 0
    equivalent: int = 0
    survivors: list[str] = field(default_factory=list)  # unified diffs against the reference
    probes_passed: list[str] = field(default_factory=list)
    note: str = ""  # why the task was not audited, or what limits its figures
    errors: int = 0  # mutants the sandbox failed to run (infrastructure): counted nowhere
    timeouts: int = 0  # killed mutants that ran out of time (SLOWER times the reference's)
    survivor_sources: list[str] = field(default_factory=list, repr=False)
    oracle: list[OracleCase] = field(default_factory=list, repr=False)
    kills: list[list[bool]] = field(default_factory=list, repr=False)  # per survivor: oracle case i kills it?

    def record(self) -> dict[str, Any]:
        keys = ("id", "kill_rate", "mutants", "killed", "equivalent", "survivors", "probes_passed")
        row = {k: getattr(self, k) for k in keys}
        if self.note:
            row["note"] = self.note
        if self.errors:
            row["errors"] = self.errors
        if self.timeouts:
            row["timeouts"] = self.timeouts
        return row


def audit_tasks(
    tasks: Sequence[Task],
    pool: ExecutionProvider,
    limits: Limits,
    max_mutants: int = 30,
    max_generated: int = 30,
    progress: Progress | None = None,
) -> list[TaskAudit]:
    """Audit every task (see the module docstring); one `TaskAudit` per task, in order."""
    audits = [TaskAudit(t.id) for t in tasks]
    for audit, task in zip(audits, tasks, strict=True):
        if not task.solution:
            audit.note = "no reference solution"
    with_solution = [i for i, t in enumerate(tasks) if t.solution]
    references = grade_many([(tasks[i], tasks[i].solution or "") for i in with_solution], pool, limits)
    passing = set()
    timed = list(tasks)
    durations: dict[int, float] = {}
    for i, grade in zip(with_solution, references, strict=True):
        if grade.passed:
            passing.add(i)
            durations[i] = grade.duration_s
            timed[i] = _timed(tasks[i], grade.duration_s, limits)
        else:
            audits[i].note = f"the reference fails its own tests ({grade.status})"
    plans: list[tuple[int, str, str]] = []  # (task index, role "mutant:<op>" or "probe:<name>", program)
    for i in sorted(passing):
        solution = tasks[i].solution or ""
        given = given_lines(solution, tasks[i].prompt)
        plans += [(i, f"mutant:{m.operator}", m.source) for m in make_mutants(solution, max_mutants, given)]
        plans += [(i, f"probe:{name}", code) for name, code in static_probes(tasks[i]).items()]
    total = len(plans)
    grades = []
    for grade in grade_stream([(timed[i], code) for i, _, code in plans], pool, limits):
        grades.append(grade)
        if progress:
            progress(len(grades), total)
    survivors: dict[int, list[str]] = {}
    for (i, role, code), grade in zip(plans, grades, strict=True):
        kind = role.split(":", 1)[0]
        if kind == "probe" and grade.passed:
            audits[i].probes_passed.append(role.split(":", 1)[1])
        elif kind == "mutant":
            audits[i].mutants += 1
            if grade.status == "error":
                audits[i].errors += 1
            elif grade.passed:
                survivors.setdefault(i, []).append(code)
            else:
                audits[i].killed += 1
                audits[i].timeouts += grade.status == "timeout"
    _oracles(tasks, durations, audits, pool, limits, max_generated)
    _against_oracle(tasks, durations, survivors, audits, pool, limits)
    for i in passing:
        audit = audits[i]
        counted = audit.mutants - audit.equivalent - audit.errors
        audit.kill_rate = round(audit.killed / counted, 4) if counted > 0 else None
        if not _compared(audit) and audit.survivor_sources:
            audit.note = "no input to compare outputs on: every survivor is counted against the tests"
    return audits


# A mutant's time: this many times what its reference took, at least MIN_S, at most the task's own limit. A mutant
# that loops forever (a dropped loop exit) then costs a second, not the task's whole limit.
SLOWER = 20.0
MIN_S = 1.0


def _timed(task: Task, reference_s: float, limits: Limits, scale: float = 1.0) -> Task:
    """`task` with the time limit a program running `scale` times its tests' work gets (see SLOWER): per program,
    or per case for a stdin task. At least MIN_S, at most the task's own limit scaled the same way."""
    own = task.timeout_s or limits.wall_s
    if task.stdio:
        cases = max(1, len(task.tests))
        return dataclasses.replace(task, timeout_s=min(own, max(MIN_S, SLOWER * reference_s / cases)))
    return dataclasses.replace(task, timeout_s=min(own * scale, max(MIN_S, SLOWER * reference_s * scale)))


def _oracles(
    tasks: Sequence[Task],
    durations: dict[int, float],
    audits: list[TaskAudit],
    pool: ExecutionProvider,
    limits: Limits,
    max_generated: int,
) -> None:
    """Each passing reference run twice on its tests' inputs and the generated ones; the inputs whose outputs came
    back, the same both times, become the task's oracle cases."""
    indices = sorted(durations)
    inputs = {i: (inputs_in_tests(tasks[i]), generated_inputs(tasks[i], max_generated)) for i in indices}
    jobs = []
    for i in indices:
        own, new = inputs[i]
        scale = _scale(tasks[i], len(own) + len(new))
        budget = _timed(tasks[i], durations[i], limits, scale)  # outputs_many scales a call task's time itself
        if not tasks[i].stdio and budget.timeout_s:
            budget = dataclasses.replace(budget, timeout_s=budget.timeout_s / scale)
        jobs.append((budget, tasks[i].solution or "", own + new))
    runs = outputs_many(jobs + jobs, pool, limits)
    first, second = runs[: len(jobs)], runs[len(jobs) :]
    for i, a, b in zip(indices, first, second, strict=True):
        own, new = inputs[i]
        for k, (text, x, y) in enumerate(zip(own + new, a, b, strict=True)):
            if not (x.ok and y.ok and _same(x.value, y.value)):
                continue
            test = _oracle_test(tasks[i], text, x.value)
            if test is not None:
                audits[i].oracle.append(OracleCase(text, test, k >= len(own), x.value))


def _scale(task: Task, inputs: int) -> float:
    """How many times its own tests' work a program running `inputs` inputs of a call task does (1 for stdin tasks,
    whose limit is per case)."""
    return 1.0 if task.stdio else max(1.0, inputs / max(1, len(task.tests)))


def _oracle_test(task: Task, text: str, value: object) -> Test | None:
    if task.stdio:
        first = next((c for c in task.tests if isinstance(c, StdioCase)), None)
        compare, tol = (first.compare, first.float_tol) if first else ("lines", None)
        return StdioCase(text, str(value), compare, tol)
    try:
        literal = repr(value)  # ValueError: an integer too long to print
        if not _same(ast.literal_eval(literal), value):
            return None
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return AssertTest(f"assert {text} == {literal}")


def _same(a: object, b: object) -> bool:
    """1 and 1.0, [..] and (..) told apart; NaN equal to itself; a value Python cannot print (an integer past its
    digit limit, nesting past its recursion limit) is never the same, so never an oracle's expected value."""
    try:
        return type(a) is type(b) and repr(a) == repr(b)
    except (ValueError, RecursionError):
        return False


def _against_oracle(
    tasks: Sequence[Task],
    durations: dict[int, float],
    survivors: dict[int, list[str]],
    audits: list[TaskAudit],
    pool: ExecutionProvider,
    limits: Limits,
) -> None:
    """Survivors graded against their task's oracle cases (equivalent when they pass every one), and the probe that
    returns the empty value of the reference's type graded against the task's own tests."""
    pairs: list[tuple[Task, str]] = []
    owners: list[tuple[int, str]] = []
    for i, codes in survivors.items():
        audit = audits[i]
        if not audit.oracle:
            audit.survivor_sources = codes
            continue
        budget = _timed(tasks[i], durations[i], limits, _scale(tasks[i], len(audit.oracle)))
        oracle_task = dataclasses.replace(budget, tests=[c.test for c in audit.oracle])
        pairs += [(oracle_task, code) for code in codes]
        owners += [(i, code) for code in codes]
    for i, audit in enumerate(audits):
        first = next((c for c in audit.oracle if not c.generated), None)
        if first is None or tasks[i].stdio:
            continue
        probe = empty_value_probe(tasks[i], called_name(first.input), first.value)
        if probe is not None:
            pairs.append((_timed(tasks[i], durations[i], limits), probe))
            owners.append((i, "\0probe"))
    for (i, code), grade in zip(owners, grade_many(pairs, pool, limits), strict=True):
        audit = audits[i]
        if code == "\0probe":
            if grade.passed:
                audit.probes_passed.append("returns the empty value")
        elif grade.passed and _compared(audit):
            audit.equivalent += 1
        else:
            audit.survivor_sources.append(code)
            audit.kills.append([not ok for ok in grade.per_test] or [False] * len(audit.oracle))
    for i, task in enumerate(tasks):
        reference = task.solution or ""
        audits[i].survivors = [_diff(reference, code) for code in audits[i].survivor_sources]


def _compared(audit: TaskAudit) -> bool:
    """Whether the oracle holds an input beyond the tests' own. On those alone a survivor shows what the tests
    showed already: with every new input failed or timed out on the reference, none is counted as equivalent."""
    return any(c.generated for c in audit.oracle)


def _diff(reference: str, mutant: str) -> str:
    lines = difflib.unified_diff(reference.splitlines(), mutant.splitlines(), "reference", "mutant", n=1, lineterm="")
    return "\n".join(lines)


def kill_rate(audits: Sequence[TaskAudit]) -> float | None:
    """The file's kill rate: the mean of the tasks' kill rates (each task counts once, whatever its mutant count)."""
    rates = [a.kill_rate for a in audits if a.kill_rate is not None]
    return sum(rates) / len(rates) if rates else None


def given_lines(solution: str, prompt: str) -> int:
    """How many of the reference's first lines the prompt shows verbatim (HumanEval's reference is its prompt,
    helpers included, then the body): code the task gives is not the solution's, so mutants leave it alone."""
    lines = solution.splitlines(keepends=True)
    given, text = 0, ""
    for line in lines:
        text += line
        if text not in prompt and text.rstrip("\n") not in prompt:
            break
        given += 1
    return given if given < len(lines) else 0  # a prompt that shows the whole reference gives nothing away here
