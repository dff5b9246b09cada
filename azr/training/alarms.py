"""The reward-hacking alarms wired into the trainer: `eval.stop_on_alarm` as a TrainerCallback, in GRPO and
Absolute-Zero mode. The rules are `azr.alarms`' (its `AlarmWatch` checks every record the run writes) and the checks
against hardened cases `azr.audit`'s; this only ends training cleanly, on every rank at the same step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from transformers import Trainer, TrainerCallback

from azr.alarms import AlarmWatch

log = logging.getLogger(__name__)


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


def stop_on_alarm(trainer: Trainer, watch: AlarmWatch | None, world: int) -> None:
    """`eval.stop_on_alarm` on a built GRPO or Absolute-Zero trainer (its `summed_over_processes` sums the decision
    over ranks). Call it after the held-out evaluation's callback is attached: an alarm raised by that evaluation's
    record then stops training at the same step end."""
    trainer.add_callback(StopOnAlarm(watch, trainer.summed_over_processes if world > 1 else None))
