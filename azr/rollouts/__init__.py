"""Rollouts: the rollout seam (`seam`: scored groups tagged with the policy version, the source protocol of GRPO's
round and the sampler protocol outside it; `samplers`: HF generate and the trainer's vLLM backend as samplers), and
what goes into a generation batch. The group sampler (which prompt groups: data, curriculum, self-play's
replay and hinted retries), the curriculum, dynamic sampling (which generated groups are trained), self-play rounds
across processes, and the one adapter to TRL's private batch API (`trl_batch`). The face of the package.

Nothing here computes a reward or an advantage; `azr.training` wires these into `AZRGRPOTrainer`.
"""

from azr.rollouts.curriculum import Curriculum, TaskStats
from azr.rollouts.groups import GroupSampler, GroupSource, whole_groups
from azr.rollouts.processes import OneProcess, Processes
from azr.rollouts.rounds import MainRounds, RoundHooks
from azr.rollouts.samplers import BackendSampler, GenerateSampler, TrainerSampler, eos_ids, trainer_sampler
from azr.rollouts.seam import (
    Prompt,
    RolloutSource,
    RolloutTiming,
    Row,
    Sampler,
    Sampling,
    ScoredGroup,
    ScoredRound,
)

# Heavy (torch at import): loaded on first use, so importing this package stays cheap.
_LAZY = {
    "AsyncRollouts": "azr.rollouts.pipeline",
    "RolloutFilter": "azr.rollouts.dynamic",
    "build_sampling": "azr.rollouts.dynamic",
    "TrainerBatches": "azr.rollouts.trl_batch",
    "TrlRounds": "azr.rollouts.trl_round",
}

__all__ = [
    "AsyncRollouts",
    "BackendSampler",
    "Curriculum",
    "GenerateSampler",
    "GroupSampler",
    "GroupSource",
    "MainRounds",
    "OneProcess",
    "Processes",
    "Prompt",
    "RolloutFilter",
    "RolloutSource",
    "RolloutTiming",
    "RoundHooks",
    "Row",
    "Sampler",
    "Sampling",
    "ScoredGroup",
    "ScoredRound",
    "TaskStats",
    "TrainerBatches",
    "TrainerSampler",
    "TrlRounds",
    "build_sampling",
    "eos_ids",
    "trainer_sampler",
    "whole_groups",
]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
