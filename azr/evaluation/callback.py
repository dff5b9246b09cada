"""The held-out evaluation's place in the trainer: a TrainerCallback that runs `azr.evaluation.heldout`'s evaluator
at the first step, every `eval.every_steps` steps and the last, on every rank together, and hands each result to
the trainer's own report_to loggers as `eval/` keys (and to its log history, saved with each checkpoint).

The only module of the evaluation package that imports transformers; what an evaluation measures and writes to
metrics.jsonl is the evaluator's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from transformers import Trainer, TrainerCallback

from azr.evaluation.samplers import Draws

if TYPE_CHECKING:
    from azr.rollouts import TrainerView


class Evaluation(Protocol):
    """What the callback needs of an evaluator (`azr.evaluation.heldout.HeldOutEvaluator`)."""

    def begin(self) -> None: ...

    def due(self, step: int, max_steps: int) -> bool: ...

    def evaluate(self, draws: Draws, step: int) -> dict[str, Any] | None: ...

    def draws_for(self, view: TrainerView) -> Draws: ...

    def logger_keys(self, record: dict[str, Any]) -> dict[str, float]: ...


class HeldOutCallback(TrainerCallback):
    """Runs `evaluator` on the policy of `trainer` (sampled as the trainer samples, vLLM or `generate`, through
    `view`: the trainer as an `azr.rollouts.TrainerView`)."""

    def __init__(self, evaluator: Evaluation, trainer: Trainer, view: TrainerView):
        self.evaluator, self.trainer, self.view = evaluator, trainer, view

    def on_train_begin(self, args, state, control, **kwargs):
        self.evaluator.begin()  # resumed: the steps already evaluated are not evaluated again
        if self.evaluator.due(state.global_step, state.max_steps) and state.global_step == 0:
            self._evaluate(args, state, control)

    def on_step_end(self, args, state, control, **kwargs):
        if self.evaluator.due(state.global_step, state.max_steps):
            self._evaluate(args, state, control)

    def _evaluate(self, args, state, control) -> None:
        record = self.evaluator.evaluate(self.evaluator.draws_for(self.view), state.global_step)
        if record is None:  # not the main process
            return
        logs = self.evaluator.logger_keys(record)
        state.log_history.append({**logs, "step": state.global_step})
        # Only the report_to integrations (wandb, tensorboard, ...): azr's own callbacks log GRPO's steps.
        for callback in self.trainer.callback_handler.callbacks:
            if type(callback).__module__.startswith("transformers.integrations"):
                callback.on_log(args, state, control, logs=dict(logs))
