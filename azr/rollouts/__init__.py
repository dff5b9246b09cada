"""Rollouts: the rollout seam (`seam`: scored groups, the protocols of a trainer's round and of samplers), the samplers,
and what goes into a generation batch: the group sampler, the curriculum, dynamic sampling, self-play rounds across
processes, the asynchronous pipeline, advantages as functions of scores. The face of the package.

Nothing here computes a reward, imports TRL or calls a trainer's round: `azr.training` runs the rounds and hands
their scored groups in (`azr.training.trl_private`).
"""

from azr.rollouts.curriculum import Curriculum, TaskStats
from azr.rollouts.feedback import Check, Episode, FeedbackTokens, PublicCheck, TurnSampler, run_episodes
from azr.rollouts.groups import GroupSampler, GroupSource, whole_groups
from azr.rollouts.processes import OneProcess, Processes
from azr.rollouts.rounds import MainRounds, RoundHooks
from azr.rollouts.samplers import (
    BackendSampler,
    GenerateSampler,
    GenerateTurns,
    TrainerSampler,
    eos_ids,
    restore_rng,
    save_rng,
    trainer_sampler,
)
from azr.rollouts.seam import (
    VERSION,
    BatchView,
    Policy,
    Prompt,
    RolloutSource,
    RolloutTiming,
    Row,
    Sampler,
    Sampling,
    ScoredBatch,
    ScoredGroup,
    ScoredRound,
    TrainerView,
)

# Heavy (torch at import): loaded on first use, so importing this package stays cheap.
_LAZY = {
    "AsyncRollouts": "azr.rollouts.pipeline",
    "RolloutFilter": "azr.rollouts.dynamic",
    "build_sampling": "azr.rollouts.dynamic",
    "group_advantages": "azr.rollouts.advantages",
    "keyed_advantages": "azr.rollouts.advantages",
    "weighted_totals": "azr.rollouts.advantages",
    "group_signal": "azr.rollouts.tensors",
    "split_groups": "azr.rollouts.tensors",
    "unsplittable": "azr.rollouts.tensors",
}

__all__ = [
    "VERSION",
    "AsyncRollouts",
    "BackendSampler",
    "BatchView",
    "Check",
    "Curriculum",
    "Episode",
    "FeedbackTokens",
    "GenerateSampler",
    "GenerateTurns",
    "GroupSampler",
    "GroupSource",
    "MainRounds",
    "OneProcess",
    "Policy",
    "Processes",
    "Prompt",
    "PublicCheck",
    "RolloutFilter",
    "RolloutSource",
    "RolloutTiming",
    "RoundHooks",
    "Row",
    "Sampler",
    "Sampling",
    "ScoredBatch",
    "ScoredGroup",
    "ScoredRound",
    "TaskStats",
    "TrainerSampler",
    "TrainerView",
    "TurnSampler",
    "build_sampling",
    "eos_ids",
    "group_advantages",
    "group_signal",
    "keyed_advantages",
    "restore_rng",
    "run_episodes",
    "save_rng",
    "split_groups",
    "trainer_sampler",
    "unsplittable",
    "weighted_totals",
    "whole_groups",
]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
