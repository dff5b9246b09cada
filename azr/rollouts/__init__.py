"""Rollouts: episodes (`episodes`: an episode's turns with token ids and masks; `environment`: the protocol every
environment implements; `runner`: the one loop that plays them; `chat`: the chat template as episode ids), the rollout
seam (`seam`: scored groups, the protocols of a trainer's round and of generation), the samplers, and what goes into a
generation batch: the group sampler, the curriculum, dynamic sampling, self-play rounds across processes, the
asynchronous pipeline (`ahead`: the episodes it plays ahead of the trainer), advantages as functions of scores, and
sequences packed by a token budget for the policy's forward passes (`packing`). The face of the package.

Nothing here computes a reward, imports TRL or calls a trainer's round: `azr.training` runs the rounds and hands
their scored groups in (`azr.training.trl.private`).
"""

from azr.rollouts.ahead import Columns, Grade, Playbook, play_ahead
from azr.rollouts.chat import ChatTokens
from azr.rollouts.curriculum import Curriculum, TaskStats
from azr.rollouts.environment import Environment, HasId
from azr.rollouts.episodes import ENV, POLICY, Episode, Message, Turn, rollout_columns
from azr.rollouts.groups import GroupSampler, GroupSource, whole_groups
from azr.rollouts.processes import OneProcess, Processes
from azr.rollouts.rounds import MainRounds, RoundHooks
from azr.rollouts.runner import Limits, play, play_replies, run_groups, run_text, start_groups
from azr.rollouts.samplers import (
    BackendSampler,
    GenerateSampler,
    TrainerSampler,
    continuation,
    eos_ids,
    sample_groups,
    trainer_sampler,
)
from azr.rollouts.seam import (
    VERSION,
    BatchView,
    Continuation,
    Policy,
    Prompt,
    Reply,
    RolloutSource,
    RolloutTiming,
    Row,
    Sampling,
    ScoredBatch,
    ScoredGroup,
    ScoredRound,
    TextPolicy,
    TokenSampler,
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
    "ungraded": "azr.rollouts.advantages",
    "Packed": "azr.rollouts.packing",
    "pack": "azr.rollouts.packing",
    "unpack": "azr.rollouts.packing",
    "group_signal": "azr.rollouts.tensors",
    "split_groups": "azr.rollouts.tensors",
    "unsplittable": "azr.rollouts.tensors",
}

__all__ = [
    "ENV",
    "POLICY",
    "VERSION",
    "AsyncRollouts",
    "BackendSampler",
    "BatchView",
    "ChatTokens",
    "Columns",
    "Continuation",
    "Curriculum",
    "Environment",
    "Episode",
    "GenerateSampler",
    "Grade",
    "GroupSampler",
    "GroupSource",
    "HasId",
    "Limits",
    "MainRounds",
    "Message",
    "OneProcess",
    "Packed",
    "Playbook",
    "Policy",
    "Processes",
    "Prompt",
    "Reply",
    "RolloutFilter",
    "RolloutSource",
    "RolloutTiming",
    "RoundHooks",
    "Row",
    "Sampling",
    "ScoredBatch",
    "ScoredGroup",
    "ScoredRound",
    "TaskStats",
    "TextPolicy",
    "TokenSampler",
    "TrainerSampler",
    "TrainerView",
    "Turn",
    "build_sampling",
    "continuation",
    "eos_ids",
    "group_advantages",
    "group_signal",
    "keyed_advantages",
    "pack",
    "play",
    "play_ahead",
    "play_replies",
    "rollout_columns",
    "run_groups",
    "run_text",
    "sample_groups",
    "split_groups",
    "start_groups",
    "trainer_sampler",
    "ungraded",
    "unpack",
    "unsplittable",
    "weighted_totals",
    "whole_groups",
]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
