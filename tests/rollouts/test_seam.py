"""The rollout seam: a round of the trainer becomes scored groups with their completions, the sampler's
log-probabilities, rewards and their breakdown, and the policy version that sampled them."""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch

from azr.rollouts.seam import VERSION, ScoredGroup
from azr.training.trl.private import TrainerBatches, TrlRounds

NAN = math.nan


class _Round:
    """The trainer at the one edge a source uses: a round of two groups of two completions (the second completion of
    each group one token shorter), two reward functions, the second group's first row not graded."""

    num_generations = 2
    reward_weights = torch.tensor([1.0, 0.5])
    reward_func_names = ("tests_reward", "format_reward")

    def __init__(self, step: int):
        self.state = SimpleNamespace(global_step=step)
        self.accelerator = SimpleNamespace(process_index=0, device=torch.device("cpu"))

    def _score_round(self, rows):
        n = len(rows)
        output = {
            "prompt_ids": torch.tensor([[0, 11, 12]] * n),
            "prompt_mask": torch.tensor([[0, 1, 1]] * n),
            "completion_ids": torch.tensor([[21, 22, 23], [31, 32, 0]] * (n // 2)),
            "completion_mask": torch.tensor([[1, 1, 1], [1, 1, 0]] * (n // 2)),
            "sampling_per_token_logps": torch.tensor([[-0.1, -0.2, -0.3], [-0.4, -0.5, 0.0]] * (n // 2)),
            "advantages": torch.zeros(n),
            "num_items_in_batch": torch.tensor(10),
        }
        rewards = torch.tensor([[1.0, 1.0], [0.0, 1.0], [NAN, NAN], [1.0, NAN]])
        return output, rewards


def test_a_trl_round_becomes_scored_groups_tagged_with_their_version():
    rows = [{"task_id": t, "prompt": t} for t in "aabb"]
    rows[2][VERSION] = rows[3][VERSION] = 3  # sampled ahead by version 3
    scored = TrlRounds(TrainerBatches(_Round(step=4))).round(rows, born=7)
    first, second = scored.groups
    assert isinstance(first, ScoredGroup) and scored.signals == [True, False]
    assert (first.task_id, first.born, first.version, second.version) == ("a", 7, 4, 3)  # 4: the weights trained
    assert first.prompt_ids == [11, 12] and first.completion_ids == [[21, 22, 23], [31, 32]]
    assert [[round(v, 6) for v in c] for c in first.sampler_logprobs] == [[-0.1, -0.2, -0.3], [-0.4, -0.5]]
    assert first.rewards == [1.5, 0.5] and first.breakdown == {"tests_reward": [1.0, 0.0], "format_reward": [1.0, 1.0]}
    assert second.rewards == [None, 1.0]  # a row no reward applies to was not graded
    assert second.breakdown["tests_reward"] == [None, 1.0]
    assert first.staleness(5) == 1 and first.timing.generate_s >= 0
    assert scored.batch["num_items_in_batch"].item() == 10  # the trainer's batch passes intact
