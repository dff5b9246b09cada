"""Hardening: new cases for weak tasks, picked from the audit's oracle, so that the tests kill what survived.

A weak task (kill rate under the threshold, or a survivor left) gets, greedily, the oracle cases that kill the most
survivors not yet killed, until none is left that a case kills. Each case is the reference's own output on an input
the tests use or one made from them (`azr.audit.cases`), the same on two runs within the task's limits, so every new
case passes the reference. Left out: cases whose expected value holds a float (an exact float is no fair test of
another correct solution), and tasks whose tests only check properties of a value (no `assert f(x) == literal`:
several answers may be right, so the reference's own is no fair expected value). Tasks whose tests call nothing
with literal arguments have no input to vary; stdin/stdout tasks get cases that change one token of an input (an
integer, or a word's characters), which may leave the statement's constraints (the reference's answer on it is
what is kept). Where a stdin task's cases, new ones included, would all accept one output (a program printing it,
whatever the input, would pass), a new case with another output is added too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from azr.audit.cases import compares_values
from azr.audit.strength import OracleCase, TaskAudit
from azr.data import Task, decode_case
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
    cases = [c for c in map(decode_case, [*task.tests, *(c.test for c in chosen)]) if c is not None]
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
