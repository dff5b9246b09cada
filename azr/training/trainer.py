"""`AZRGRPOTrainer`: TRL's GRPOTrainer with the few changes azr needs, each explained where it is made.

Owns masking completions that could not be graded, timing the reward stage, handing each scored batch to observers
(the generation log, the scoreboard), calling a self-play round's hooks (`azr.selfplay.Arena`) around generation,
and handing generation to a `RolloutFilter` (`azr.training.sampling`: the group sampler's prompts, dynamic
sampling). It does not generate, compute advantages or the loss differently from TRL, and it knows nothing of
config files.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import TrainerCallback
from trl import GRPOTrainer
from trl.trainer.utils import RepeatSampler

from azr.prompts import completion_text, last_user_message
from azr.rewards import CodeGrader


@dataclass
class ScoredBatch:
    """What one process scored in one generation round, row by row; `rewards` is (rows, reward functions)."""

    step: int
    inputs: list[dict[str, Any]]
    prompts: list[Any]
    completions: list[Any]
    rewards: torch.Tensor
    reward_names: list[str]
    details: list[dict[str, Any]]

    def records(self) -> list[dict[str, Any]]:
        """One JSON-ready record per completion: prompt, completion, each reward, and the grader's verdict."""
        out = []
        for i, (row, prompt, completion) in enumerate(zip(self.inputs, self.prompts, self.completions, strict=True)):
            rewards = {n: _finite(v) for n, v in zip(self.reward_names, self.rewards[i].tolist(), strict=True)}
            out.append(
                {
                    "step": self.step,
                    "task_id": row.get("task_id"),
                    "prompt": str(last_user_message(prompt) or ""),
                    "completion": completion_text(completion),
                    "source": row.get("source", "data"),  # data / hint (a hinted retry) / replay (frontier)
                    "hinted": bool(row.get("hint")),
                    "opponent_passed": row.get("opponent_passed"),
                    "rewards": rewards,
                    **(self.details[i] if i < len(self.details) else {}),
                }
            )
        return out


class AZRGRPOTrainer(GRPOTrainer):
    """GRPOTrainer plus:

    - `_calculate_rewards` masks every row whose code could not be graded (the `tests` reward is None, i.e. an
      infrastructure error): TRL sums rewards with nansum, so such a row would otherwise keep its format reward and
      be pushed up or down for the sandbox's failure. A row that is NaN throughout gets advantage 0 and stays out
      of its group's baseline in TRL. It also times the reward stage, and passes the scored batch to observers.
    - The prompt order of each epoch depends on the seed and the epoch only: TRL's sampler draws every epoch's
      shuffle from one generator, which a resumed run restarts, so it would replay the first epoch's order.
    - `grader` is checked after every step by a callback, so a run whose infrastructure failure rate passes
      `sandbox.max_infra_failure_rate` stops with `SandboxUnhealthy` instead of training on noise.
    - `rounds` (an `azr.selfplay.Arena`, for self-play) gets each round's rows before the policy generates (it
      starts the opponent on the tasks), sets its columns just before the rewards, observes each scored batch, and
      adds its metrics to every log.
    - `sampling` (an `azr.training.sampling.RolloutFilter`) builds each generation batch in training: which prompt
      groups are generated (the group sampler), and with dynamic sampling which generated groups are trained. It
      calls `_score_round` once per round, and adds its metrics to every log.
    """

    def __init__(
        self,
        *args: Any,
        grader: CodeGrader | None = None,
        mask_reward: str | None = "tests_reward",
        observers: Sequence[Callable[[ScoredBatch], None]] = (),
        rounds: Any = None,
        sampling: Any = None,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        self.grader = grader
        self.rounds = rounds
        self.sampling = sampling
        self.round_rewards: torch.Tensor | None = None  # this process's rows of the last round's rewards
        self.observers = list(observers) + ([rounds.observe] if rounds is not None else [])
        self.reward_seconds = 0.0  # reward-stage wall time since the metrics callback last read it
        self._mask_col = self.reward_func_names.index(mask_reward) if mask_reward in self.reward_func_names else None
        if grader is not None:
            self.add_callback(_GraderHealth(grader))

    def _get_train_sampler(self, dataset=None):
        sampler = super()._get_train_sampler(dataset)
        if type(sampler) is RepeatSampler:
            sampler.__class__ = _EpochSampler  # the same fields; only `set_epoch` is added
        return sampler

    def _generate_and_score_completions(self, inputs):
        if self.sampling is not None and self.model.training:
            return self.sampling.fill(self, list(inputs))
        return self._score_round(list(inputs))[0]

    def _score_round(self, rows: list[dict[str, Any]]) -> tuple[dict[str, Any], torch.Tensor]:
        """One round of TRL's generation and scoring for `rows`: its output, and this process's rewards (rows,
        reward functions; NaN where not graded)."""
        if self.rounds is not None and self.model.training:
            # Before generating, so that the opponent answers while the policy generates and its own code is graded.
            rows = self.rounds.start(rows, self.state.global_step + 1)
        output = super()._generate_and_score_completions(rows)
        return output, self.round_rewards

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        if self.rounds is not None:
            self.rounds.finish(inputs)  # waits for the opponent; TRL reads the reward columns from these rows next
        started = time.perf_counter()
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if self._mask_col is not None:
            rewards[torch.isnan(rewards[:, self._mask_col])] = torch.nan
        self.reward_seconds += time.perf_counter() - started
        # `rewards` is gathered over processes; this process's rows come at its rank's offset.
        offset = self.accelerator.process_index * len(prompts)
        self.round_rewards = rewards[offset : offset + len(prompts)].detach()
        if self.observers:
            details = self.grader.last_details if self.grader else []  # set by the tests reward for this batch
            batch = ScoredBatch(
                step=self.state.global_step + 1,  # the optimizer step these completions train
                inputs=list(inputs),
                prompts=list(prompts),
                completions=list(completions),
                rewards=rewards[offset : offset + len(prompts)].detach().float().cpu(),
                reward_names=list(self.reward_func_names),
                details=details if len(details) == len(prompts) else [],
            )
            for observe in self.observers:
                observe(batch)
        return rewards

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "train_runtime" not in logs:
            for part in (self.rounds, self.sampling):
                logs = {**logs, **part.metrics()} if part is not None else logs
        super().log(logs, start_time)


class _EpochSampler(RepeatSampler):
    """TRL's RepeatSampler, reseeded with (seed + epoch) by the HF Trainer's `set_epoch` at the start of each epoch."""

    def set_epoch(self, epoch: int) -> None:
        if self.shuffle:
            self.generator.manual_seed((self.seed or 0) + epoch)


class _GraderHealth(TrainerCallback):
    """Raise the grader's SandboxUnhealthy at the end of the step whose batch passed the failure-rate limit."""

    def __init__(self, grader: CodeGrader):
        self.grader = grader

    def on_step_end(self, args, state, control, **kwargs):
        self.grader.check()


def _finite(value: float) -> float | None:
    return None if value != value else value  # NaN (not graded) becomes JSON null
