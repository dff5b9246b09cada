"""TRL's generation round as a rollout source: `TrlRounds.round(rows)` runs the trainer's round (generation,
rewards, advantages, old log-probs, through `azr.rollouts.trl_batch.TrainerBatches`) and hands back its batch as
scored groups (`azr.rollouts.seam`), each tagged with the policy version that sampled it: the column
`policy_version` when the asynchronous pipeline sampled the completions ahead, else the weights being trained.

Owns turning one round into groups; which groups are trained is `azr.rollouts.dynamic`'s decision.
"""

from __future__ import annotations

import time

from azr.rollouts.seam import RolloutTiming, Row, ScoredRound
from azr.rollouts.tensors import group_signal, split_groups, unsplittable
from azr.rollouts.trl_batch import TrainerBatches

VERSION = "policy_version"  # the row column the asynchronous pipeline's rollout function sets


class TrlRounds:
    """A `RolloutSource` over an `AZRGRPOTrainer`'s own round (or anything `TrainerBatches` can view)."""

    def __init__(self, trl: TrainerBatches):
        self.trl = trl

    @property
    def group_size(self) -> int:
        return self.trl.group_size

    def round(self, rows: list[Row], born: int) -> ScoredRound:
        """This process's `rows` generated and scored in one round (a collective: every process calls it)."""
        trl, size = self.trl, self.trl.group_size
        started, clock = time.time(), time.perf_counter()
        output, rewards = trl.score_round(rows)
        timing = RolloutTiming(started, time.perf_counter() - clock)
        # The whole round's rewards (every process's, in rank order) are whole groups even when a process's rows are
        # not: every process counts the same.
        signals = group_signal(rewards, trl.reward_weights, size) if len(rewards) % size == 0 else []
        if len(rows) % size or unsplittable(output):  # a group split over processes; an image batch
            return ScoredRound(output, [], signals)
        mine = rewards[trl.rank * len(rows) : (trl.rank + 1) * len(rows)]
        now = trl.step - 1  # a round samples from the weights it trains unless the rows say otherwise
        versions = [int(rows[i].get(VERSION, now)) for i in range(0, len(rows), size)]  # type: ignore[call-overload]
        groups = split_groups(
            output,
            rows,
            group_signal(mine, trl.reward_weights, size),
            born,
            rewards=mine,
            weights=trl.reward_weights,
            names=trl.reward_names,
            versions=versions,
            timing=timing,
        )
        return ScoredRound(output, groups, signals)
