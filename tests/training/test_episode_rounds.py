"""GRPO's rounds as episodes (`azr.training.episodes.EpisodeRollouts`, TRL's `rollout_func`): a one-turn code task
is exactly TRL's own round (the same prompt ids, the same sampled completions from the same seed), and a two-turn
environment's observation tokens reach TRL's batch masked out of the loss, with the policy's ids kept as sampled.

Real parts: TRL's GRPOTrainer (as `AZRGRPOTrainer`) on the tiny model generates and scores; the two-turn environment
is scripted.
"""

from __future__ import annotations

import pytest
from recipes import tiny_grpo_args

from azr.data import load_tasks
from azr.envs import CodeEnvironment
from azr.training import grpo_dataset
from azr.training.grpo import grpo_rows

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def trainer(tiny_model_dir, tmp_path_factory):

    from azr.config import ModelConfig
    from azr.models.loading import build_model_and_tokenizer
    from azr.training.trl.trainer import AZRGRPOTrainer

    model, tokenizer = build_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))
    return AZRGRPOTrainer(
        model=model,
        reward_funcs=[lambda completions, **kw: [float(len(c[0]["content"]) % 3) for c in completions]],
        args=tiny_grpo_args(tmp_path_factory.mktemp("episodes") / "checkpoints", max_completion_length=12),
        train_dataset=grpo_dataset(load_tasks("train")[:2]),
        processing_class=tokenizer,
    )


def _rows():
    return [row for row in grpo_rows(load_tasks("train")[:2]) for _ in range(2)]  # each prompt twice, TRL's layout


def _round(trainer, seed: int):
    torch.manual_seed(seed)
    output, rewards = trainer._score_round(_rows())
    return output, rewards


def test_a_one_turn_episode_round_is_trls_own_round(trainer):
    from azr.training.episodes.rounds import EpisodeRollouts
    from azr.training.trl.private import TrainerBatches

    trainer.rollout_func = None
    plain, plain_rewards = _round(trainer, 11)
    rollouts = EpisodeRollouts(CodeEnvironment(), TrainerBatches(trainer), {})
    trainer.rollout_func = rollouts
    try:
        played, played_rewards = _round(trainer, 11)
    finally:
        trainer.rollout_func = None
    for key in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages"):
        assert torch.equal(plain[key], played[key]), key
    assert torch.equal(plain_rewards, played_rewards) and "tool_mask" not in played
    assert [e.task_id for e in rollouts.last] == [r["task_id"] for r in _rows()]
    assert all(len(e.policy_turns) == 1 and e.finish_reason == "done" for e in rollouts.last)


class TwoTurns:
    """Shows every first answer a fixed note and asks again; the second answer ends the episode."""

    tools = None

    def start(self, task):
        return list(task.messages)

    def respond(self, episode, text):
        if len(episode.policy_turns) == 1:
            return [{"role": "user", "content": "Your function failed the first test. Try again."}]
        return None

    def score(self, episodes):
        raise AssertionError("GRPO's rows are scored by TRL's reward functions")


def test_a_two_turn_episodes_observation_is_masked_out_of_trls_batch(trainer):
    from azr.rollouts import Limits
    from azr.training.episodes.rounds import EpisodeRollouts
    from azr.training.trl.private import TrainerBatches

    rollouts = EpisodeRollouts(TwoTurns(), TrainerBatches(trainer), {}, Limits(max_turns=2))
    trainer.rollout_func = rollouts
    try:
        output, _ = _round(trainer, 5)
    finally:
        trainer.rollout_func = None
    episodes = rollouts.last
    assert len(episodes) == 4 and all(len(e.policy_turns) == 2 for e in episodes)
    mask, ids = output["tool_mask"], output["completion_ids"]  # TRL's name for the env_mask it was handed
    for row, episode in enumerate(episodes):
        n = len(episode.completion_ids)
        assert ids[row, :n].tolist() == episode.completion_ids
        assert mask[row, :n].tolist() == episode.policy_mask and 0 in episode.policy_mask
        first = episode.turns[0]
        assert episode.completion_ids[: len(first.ids)] == first.ids  # turn 1's ids as sampled, inside turn 2's
