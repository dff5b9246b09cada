"""Reward hacking on weak tasks (`data.hardened`): answers that pass every test of a weak task yet fail the cases
`azr data audit --harden` added to it. The one home of checks against hardened cases: which cases (`hardened_cases`),
grading answers on them (`check_answers`), and the run's observer that writes a `reward_hacking` alarm record per
such answer (`HardenedWatch`; training only attaches it). Nothing here scores: rewards are never changed by it.
"""

from __future__ import annotations

import ast
import collections
import dataclasses
import hashlib
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from azr.alarms import Alarm, AlarmWatch
from azr.audit.output import read_audit, weak_tasks
from azr.config import DataConfig
from azr.data import AssertTest, StdioCase, Task, Test, encode, load_tasks
from azr.prompts import completion_text, parse_answer
from azr.rewards import CodeGrader, grade_many, outputs_many
from azr.sandbox import ExecutionProvider, Limits
from azr.secrets import redact

log = logging.getLogger(__name__)
SHOWN = 200  # characters kept of a failing case's input, expected and got text in an alarm record
HACKING = "reward_hacking"  # the rule of data.hardened's alarm records


class ScoredAnswers(Protocol):
    """What the watch reads of one scored batch (the trainer's `ScoredBatch`): each row's task and completion, and
    the grader's verdict of it."""

    step: int
    inputs: list[dict[str, Any]]
    completions: list[Any]
    details: list[dict[str, Any]]


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
            "input": _short(given if given is not None else encode(jobs[j][0].tests[i])),
            "expected": _short(expected),
            "got": _short(text),
        }
    verdicts = []
    for j, grade in enumerate(grades):
        failed = 0 if grade.status == "error" else grade.tests_total - grade.tests_passed
        verdicts.append(HardenedVerdict(grade.status, failed, grade.tests_total, cases.get(j, {})))
    return verdicts


def _case(test: Test) -> tuple[str | None, str]:
    """A hardened case as (input, expected): stdin and stdout, or the call and the literal of `assert call == value`
    (`--harden`'s own shapes); (None, "") for any other test."""
    if isinstance(test, StdioCase):
        return test.input, test.output
    if not isinstance(test, AssertTest):
        return None, ""
    try:
        node = ast.parse(test.source).body
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


class HardenedWatch:
    """`data.hardened` in GRPO: an observer of every scored batch (main process) that grades each distinct answer
    passing every test of a weak task on that task's hardened cases (`check_answers`, in the run's
    sandbox pool, one batch), at most `max_checks` per batch, and writes a `reward_hacking` alarm record to
    `metrics` for each completion whose answer fails any. Rewards are never changed. `metrics()` gives the counts
    since the last log for GRPO's step record (`alarms/reward_hacking`, `hardened/*`)."""

    CACHE = 4096  # verdicts kept across batches: GRPO's groups repeat answers, and a task recurs every epoch

    def __init__(self, cases: dict[str, Task], grader: CodeGrader, metrics: AlarmWatch | None, max_checks: int):
        self.cases, self.grader, self.metrics_writer, self.max_checks = cases, grader, metrics, max_checks
        self.verdicts: collections.OrderedDict[tuple[str, str], HardenedVerdict] = collections.OrderedDict()
        self.counts = dict.fromkeys(("alarms", "checked", "skipped", "errors"), 0)
        self.seconds = 0.0

    def observe(self, batch: ScoredAnswers) -> None:
        rows = self._passing(batch)
        todo = list(dict.fromkeys(key for _, key, _ in rows if key not in self.verdicts))
        self.counts["skipped"] += max(0, len(todo) - self.max_checks)
        todo = todo[: self.max_checks]
        if todo:
            started = time.perf_counter()
            codes = {key: code for _, key, code in rows}
            jobs = [(self.cases[key[0]], codes[key]) for key in todo]
            for key, verdict in zip(todo, check_answers(jobs, self.grader.pool, self.grader.limits), strict=True):
                self.verdicts[key] = verdict
                self.counts["checked"] += 1
                self.counts["errors"] += verdict.status == "error"
            while len(self.verdicts) > self.CACHE:
                self.verdicts.popitem(last=False)
            self.seconds += time.perf_counter() - started
        hacked = [(i, key) for i, key, _ in rows if key in self.verdicts and self.verdicts[key].hacked]
        for _, key in hacked:
            self._alarm(batch.step, key, self.verdicts[key])
        if hacked:
            log.warning(
                "alarm at step %d (%s): %d answers on %d weak tasks pass their tests but fail cases of data.hardened "
                "(records in metrics.jsonl)",
                batch.step,
                HACKING,
                len(hacked),
                len({key[0] for _, key in hacked}),
            )

    def _passing(self, batch: ScoredAnswers) -> list[tuple[int, tuple[str, str], str]]:
        """(row, (task id, code digest), code) of every completion that passed all its task's tests, on a task with
        hardened cases."""
        rows = []
        for i, (row, completion) in enumerate(zip(batch.inputs, batch.completions, strict=True)):
            task_id = row.get("task_id")
            if task_id not in self.cases:
                continue
            if i >= len(batch.details):  # no verdict came with the batch: nothing to go on, said rather than silent
                self.counts["skipped"] += 1
                continue
            if batch.details[i].get("status") != "passed":
                continue
            code = parse_answer(completion_text(completion), self.grader.answer_format).code
            if code is not None:
                rows.append((i, (task_id, hashlib.sha256(code.encode()).hexdigest()[:16]), code))
        return rows

    def _alarm(self, step: int, key: tuple[str, str], verdict: HardenedVerdict) -> None:
        self.counts["alarms"] += 1
        if self.metrics_writer is None:
            return
        case = verdict.case
        message = (
            f"an answer to {key[0]} passes its tests but fails {verdict.failed} of {verdict.total} hardened cases "
            f"({verdict.status}); first: {case.get('input', '')} gave {case.get('got', '')}, expected "
            f"{case.get('expected', '')}"
        )
        extra = {"task_id": key[0], "status": verdict.status, "failed": verdict.failed, "cases": verdict.total}
        extra |= {"case": case, "completion_sha256": key[1]}
        self.metrics_writer.write(Alarm(step, HACKING, message).record() | extra)

    def metrics(self) -> dict[str, Any]:
        """The counts since the last call: alarms raised, answers checked, skipped over the cap, sandbox errors,
        and the seconds the checks took."""
        out = {"alarms/reward_hacking": self.counts["alarms"]}
        out |= {f"hardened/{k}": v for k, v in self.counts.items() if k != "alarms"}
        out["hardened/time_s"] = round(self.seconds, 4)
        self.counts, self.seconds = dict.fromkeys(self.counts, 0), 0.0
        return out


def hardened_watch(
    data: DataConfig, tasks: list[Task], grader: CodeGrader, metrics: AlarmWatch | None
) -> HardenedWatch | None:
    """The run's `HardenedWatch` over its training `tasks` (after data.min_kill_rate), or None without data.hardened
    or when no weak task has a hardened case (one log line says which)."""
    if data.hardened is None or data.audit is None:
        return None
    hardened = load_tasks(data.hardened, compare=data.compare, float_tol=data.float_tol)
    cases = hardened_cases(tasks, hardened, read_audit(Path(data.audit)), data.hardened_kill_rate)
    log.info(
        "data.hardened: %d of %d training tasks are weak (kill rate under %.2f) with %d hardened cases; answers that "
        "pass their tests are graded on them too (at most %d per batch)",
        len(cases),
        len(tasks),
        data.hardened_kill_rate,
        sum(len(t.tests) for t in cases.values()),
        data.hardened_max_checks,
    )
    return HardenedWatch(cases, grader, metrics, data.hardened_max_checks) if cases else None
