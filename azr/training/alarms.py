"""The reward-hacking alarms in the trainer: `eval.stop_on_alarm` as a TrainerCallback, in GRPO and Absolute-Zero mode,
and `data.hardened`'s check of the answers that pass a weak task's tests (`HardenedWatch`, GRPO).

The rules and the alarm records are `azr.alarms`' (an `AlarmWatch` wraps the run's metrics writer, so every step log
and held-out evaluation written is checked as it is written). `StopOnAlarm` only ends training cleanly once an
alarm has fired: the trainer leaves its loop, and the phase saves the final model as after its last step. On several
processes the decision is summed over them (only the main one writes metrics), so every rank stops at the same step.
"""

from __future__ import annotations

import collections
import hashlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

from azr.alarms import Alarm, AlarmWatch
from azr.config import AzrConfig
from azr.data import Task, load_tasks
from azr.prompts import completion_text, parse_answer
from azr.rewards import CodeGrader

if TYPE_CHECKING:
    from azr.audit import HardenedVerdict
    from azr.training.trainer import ScoredBatch

log = logging.getLogger(__name__)
HACKING = "reward_hacking"  # the rule of data.hardened's alarm records


class StopOnAlarm(TrainerCallback):
    """Set `control.should_training_stop` at the first step end or log after `watch` (None on every rank but the
    main one) has fired an alarm. `total` sums a number over the processes (None: a single process)."""

    def __init__(self, watch: AlarmWatch | None, total: Callable[..., list[float]] | None = None):
        self.watch, self.total = watch, total
        self.stopped_at: int | None = None

    def _check(self, state, control) -> None:
        fired = float(bool(self.watch is not None and self.watch.fired))
        if self.total is not None:
            fired = self.total(fired)[0]
        if fired and not control.should_training_stop:
            control.should_training_stop = True
            self.stopped_at = state.global_step
            if self.watch is not None:
                first = self.watch.fired[0]
                log.warning(
                    "eval.stop_on_alarm: training stops at step %d (alarm %s at step %d); the final model is saved "
                    "as after a last step",
                    state.global_step,
                    first.rule,
                    first.step,
                )

    def on_step_end(self, args, state, control, **kwargs):
        self._check(state, control)

    def on_log(self, args, state, control, logs=None, **kwargs):
        self._check(state, control)


def stop_on_alarm(trainer, watch: AlarmWatch | None, world: int) -> None:
    """`eval.stop_on_alarm` on a built GRPO or Absolute-Zero trainer. Call it after the held-out evaluation's callback
    is attached: an alarm raised by that evaluation's record then stops training at the same step end."""
    trainer.add_callback(StopOnAlarm(watch, trainer.summed_over_processes if world > 1 else None))


class HardenedWatch:
    """`data.hardened` in GRPO: an observer of every scored batch (main process) that grades each distinct answer
    passing every test of a weak task on that task's hardened cases (`azr.audit.check_answers`, in the run's
    sandbox pool, one batch), at most `max_checks` per batch, and writes a `reward_hacking` alarm record to
    `metrics` for each completion whose answer fails any. Rewards are never changed. `metrics()` gives the counts
    since the last log for GRPO's step record (`alarms/reward_hacking`, `hardened/*`)."""

    CACHE = 4096  # verdicts kept across batches: GRPO's groups repeat answers, and a task recurs every epoch

    def __init__(self, cases: dict[str, Task], grader: CodeGrader, metrics: AlarmWatch | None, max_checks: int):
        self.cases, self.grader, self.metrics_writer, self.max_checks = cases, grader, metrics, max_checks
        self.verdicts: collections.OrderedDict[tuple[str, str], HardenedVerdict] = collections.OrderedDict()
        self.counts = dict.fromkeys(("alarms", "checked", "skipped", "errors"), 0)
        self.seconds = 0.0

    def observe(self, batch: ScoredBatch) -> None:
        rows = self._passing(batch)
        todo = list(dict.fromkeys(key for _, key, _ in rows if key not in self.verdicts))
        self.counts["skipped"] += max(0, len(todo) - self.max_checks)
        todo = todo[: self.max_checks]
        if todo:
            from azr.audit import check_answers

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

    def _passing(self, batch: ScoredBatch) -> list[tuple[int, tuple[str, str], str]]:
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


def hardened_watch(cfg: AzrConfig, tasks: list[Task], grader: CodeGrader, metrics: AlarmWatch | None):
    """The run's `HardenedWatch` over its training `tasks` (after data.min_kill_rate), or None without data.hardened
    or when no weak task has a hardened case (one log line says which)."""
    data = cfg.data
    if data.hardened is None or data.audit is None:
        return None
    from azr.audit import hardened_cases, read_audit

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
