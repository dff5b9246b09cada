"""Rollouts: the rollout seam (`seam`: scored groups tagged with the policy version, and the source protocol), and
what goes into a generation batch. The group sampler (which prompt groups: data, curriculum, self-play's
replay and hinted retries), the curriculum, dynamic sampling (which generated groups are trained), self-play rounds
across processes, and the one adapter to TRL's private batch API (`trl_batch`). The face of the package.

Nothing here computes a reward or an advantage; `azr.training` wires these into `AZRGRPOTrainer`.
"""

from azr.rollouts.curriculum import Curriculum, TaskStats
from azr.rollouts.groups import GroupSampler, GroupSource, whole_groups
from azr.rollouts.processes import OneProcess, Processes
from azr.rollouts.rounds import MainRounds, RoundHooks
from azr.rollouts.seam import RolloutSource, RolloutTiming, Row, ScoredGroup, ScoredRound

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
    "Curriculum",
    "GroupSampler",
    "GroupSource",
    "MainRounds",
    "OneProcess",
    "Processes",
    "RolloutFilter",
    "RolloutSource",
    "RolloutTiming",
    "RoundHooks",
    "Row",
    "ScoredGroup",
    "ScoredRound",
    "TaskStats",
    "TrainerBatches",
    "TrlRounds",
    "build_sampling",
    "whole_groups",
]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
