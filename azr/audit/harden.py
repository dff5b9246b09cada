"""Hardening: new cases for weak tasks, picked greedily from the audit's oracle (the reference's own outputs, the
same on two runs) so that the tests kill what survived; every new case passes the reference. Cases with a float
expected value and tasks whose tests only check properties are left out; a stdin task whose cases all accept one
output gets a case with another (docs/audit.md, "Hardening weak tasks").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from azr.audit.cases import compares_values
from azr.audit.strength import OracleCase, TaskAudit
from azr.data import StdioCase, Task
from azr.rewards import compare_output


def hardened(tasks: Sequence[Task], audits: Sequence[TaskAudit], threshold: float) -> tuple[list[Task], dict[str, int]]:
    """Every task, weak ones with new tests; and the number of new tests per hardened task id."""
    out: list[Task] = []
    added: dict[str, int] = {}
    for task, audit in zip(tasks, audits, strict=True):
        weak = audit.kill_rate is not None and (audit.kill_rate < threshold or audit.survivor_sources)
        weak = weak and (task.stdio or compares_values(task))
        cases = _cover(audit) if weak else []
        if task.stdio and cases:
            cases += _another_output(task, audit, cases)
        existing = set(task.tests)
        new = [c.test for c in cases if c.test not in existing]
        if new:
            added[task.id] = len(new)
            task = dataclasses.replace(task, tests=[*task.tests, *new])
        out.append(task)
    return out, added


def _cover(audit: TaskAudit) -> list[OracleCase]:
    """Greedy set cover: the oracle cases that kill the most survivors still alive, one at a time."""
    usable = [i for i, case in enumerate(audit.oracle) if not _has_float(case.value)]
    alive = set(range(len(audit.kills)))
    chosen: list[OracleCase] = []
    while alive:
        best, killed = None, set()
        for i in usable:
            now = {s for s in alive if i < len(audit.kills[s]) and audit.kills[s][i]}
            if len(now) > len(killed):
                best, killed = i, now
        if best is None:
            break
        chosen.append(audit.oracle[best])
        alive -= killed
        usable.remove(best)
    return chosen


def _another_output(task: Task, audit: TaskAudit, chosen: list[OracleCase]) -> list[OracleCase]:
    """For a stdin task whose cases, the chosen ones included, all accept one output (a program printing it whatever
    the input passes them all: the probe `prints another case's output`), the first new oracle case that does not."""
    cases = [c for c in [*task.tests, *(c.test for c in chosen)] if isinstance(c, StdioCase)]
    if not cases or any(compare_output(c, cases[0].output) is not None for c in cases):
        return []
    other = (c for c in audit.oracle if c.generated and c not in chosen)
    return next(([c] for c in other if compare_output(cases[0], str(c.value)) is not None), [])


def _has_float(value: object) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_has_float(v) for v in value)
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    return False
