"""`AbsoluteZeroTrainer`: AZRGRPOTrainer with Absolute Zero's rollout (TRL's public `rollout_func`: slot rows in, the
prompt and completion ids TRL trains and the `az_*` columns the rewards read out), its per-(type, role) baseline,
metrics and generation-log records. The rollout draws through `TrainerGenerator`: one-turn episodes tagged with
their role, played through the trainer's own tokenisation and generation, so every sample (learnability samples
included) comes at the training temperature from the backend TRL trains with. `baseline: type_role` recomputes the
advantages per (task type, role) over the batch from the same rewards.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from accelerate.utils import gather_object

from azr.absolute_zero import Rollout
from azr.envs import CodeEnvironment, TaskPrompt
from azr.rollouts import Episode, ScoredBatch, keyed_advantages
from azr.training.episodes.rounds import play_asked
from azr.training.trl.private import TrainerBatches
from azr.training.trl.trainer import AZRGRPOTrainer


class TrainerGenerator:
    """`Generate` for the rollout: `n` one-turn episodes per conversation, played by `role` through the trainer's
    own generation (`azr.training.episodes.play_asked`: TRL's tokenisation, the sampling settings of `grpo:`, never
    greedy unless the recipe says temperature 0), a conversation's episodes in a row as TRL's rows lie."""

    def __init__(self, trainer: AZRGRPOTrainer):
        self.trainer = trainer

    def __call__(self, conversations: list[list[dict[str, str]]], n: int, role: str) -> list[Episode]:
        asked = [TaskPrompt("absolute_zero", list(c)) for c in conversations]
        return play_asked(CodeEnvironment(), TrainerBatches(self.trainer), asked, n, n, role=role)


class AbsoluteZeroTrainer(AZRGRPOTrainer):
    """AZRGRPOTrainer whose batches come from `rollout` (an `azr.absolute_zero.Rollout`); `baseline` is 'group'
    (TRL's) or 'type_role'. The rollout's metrics join every log."""

    def __init__(self, *args: Any, rollout: Rollout, baseline: str = "group", **kwargs: Any):
        with warnings.catch_warnings():  # TRL flags rollout_func as experimental; azr pins the contract it uses
            warnings.filterwarnings("ignore", message=".*rollout_func.*")
            super().__init__(*args, rollout_func=self._rollout_rows, **kwargs)  # its role rewards are optional
        self.rollout, self.baseline = rollout, baseline

    def _rollout_rows(self, prompts: list[object], trainer: object) -> dict[str, Any]:
        """TRL's `rollout_func` (called with this trainer): the rollout's rows for `prompts`, each group as large as
        TRL's training or evaluation groups, drawn through the rollout's generator for this trainer."""
        group = self.num_generations if self.model.training else self.num_generations_eval
        return self.rollout.run(prompts, self.rollout.generator(self), group)

    def adjust_advantages(self, output: dict[str, Any], rows: list[dict[str, Any]]) -> None:
        rewards = self.round_rewards  # this round's, every process's rows in rank order
        if self.baseline == "type_role" and self.model.training and rewards is not None:
            # TRL merged the rollout's columns into these rows; the keys of every process's rows, in rank order
            keys = gather_object([f"{row['az_type']}/{row['az_role']}" for row in rows])
            total = TrainerBatches(self).totals(rewards)
            advantages = keyed_advantages(total, keys, self.scale_rewards != "none")
            start = self.accelerator.process_index * len(rows)
            output["advantages"] = advantages[start : start + len(rows)].to(output["advantages"].device)
            TrainerBatches(self).replace_logged_advantages(advantages.tolist())  # TRL logged the group ones

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "train_runtime" not in logs:
            logs = {**logs, **self.rollout.metrics()}
        super().log(logs, start_time)


def az_records(batch: ScoredBatch, rewards: Sequence[Any]) -> list[dict[str, Any]]:
    """Generation-log records: TRL's row record with the real prompt, the row's role and type, and what decided
    its reward (validity reason and solve rate for a proposal, the verdict for an answer)."""
    out = []
    for i, record in enumerate(batch.records()):
        row = batch.inputs[i]
        for key in ("task_id", "source", "hinted", "opponent_passed"):
            record.pop(key, None)
        record |= {"role": row.get("az_role"), "type": row.get("az_type"), "prompt": row.get("az_prompt", "")}
        if row.get("az_role") == "propose":
            record |= {"reason": row.get("az_reason", ""), "detail": row.get("az_detail", "")}
        record["task"] = row.get("az_task")
        for reward in rewards:
            details = getattr(reward, "last_details", [])
            if i < len(details):
                record |= details[i]
        out.append(record)
    return out
