"""Recipe sections for what enters a generation batch: dynamic sampling (`sampling:`) and the curriculum over tasks,
with self-play's frontier replay (`curriculum:`). Both drive one group sampler (`azr.rollouts.groups`); the checks
between their fields and the trainer's batch are `azr.config.check_groups`'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from azr.config.schema import field


@dataclass
class SamplingConfig:
    dynamic: bool = field(
        False,
        "Dynamic sampling (DAPO): generate more prompt groups than the batch needs, keep only groups whose rewards "
        "differ (ungraded rows never count), until the batch is full; a group whose completions all score the same "
        "has zero advantage and teaches nothing.",
    )
    oversample: float = field(
        2.0, "Prompt groups generated per group still missing, on each attempt (rounded up).", ge=1, le=100
    )
    max_attempts: int = field(
        3,
        "Generation rounds per batch; after the last, the batch is topped up with groups that showed no difference "
        "(counted in sampling/short_groups) rather than generating on.",
        gt=0,
        le=100,
    )
    carry_over: int = field(
        1,
        "Groups with a difference beyond a full batch wait for at most this many later generation batches and "
        "fill them first (their clipped ratio is taken against the log-probs of the policy that generated them); "
        "0 drops them.",
        ge=0,
        le=1000,
    )
    max_staleness: int = field(
        0,
        "Asynchronous GRPO: how many policy versions (optimizer steps) a trained sample may lag the weights it trains. "
        "0 is synchronous GRPO (each step waits for its own generation). With N >= 1 the vLLM sidecar (vllm.mode: "
        "adapter) plays the next N batches' episodes while the trainer trains (every turn of the run's environment: "
        "with rollouts.env feedback the public tests run between turns), each episode tagged with the adapter "
        "version that sampled its first turn; a sample older than N is never trained (dropped, counted, "
        "regenerated). TRL's "
        "importance-sampling correction (grpo.vllm_importance_sampling_mode / _clip_max / _clip_min) weighs each "
        "sample against its sampler's log-probabilities.",
        ge=0,
        le=16,
    )


@dataclass
class CurriculumConfig:
    enabled: bool = field(
        False,
        "Draw each batch's tasks by per-task statistics (graded attempts, recent pass rate, last step seen) "
        "instead of TRL's shuffled order; saved with each checkpoint.",
    )
    weighting: Literal["learnability", "ucb"] = field(
        "learnability",
        "Task weight: 'learnability' p(1-p) of the recent pass rate p (highest at p = 0.5); 'ucb' adds "
        "ucb_c * sqrt(ln(total groups) / task groups), so rarely drawn tasks come back.",
    )
    ucb_c: float = field(0.1, "Exploration coefficient of 'ucb' weighting.", ge=0)
    unseen_weight: float = field(
        0.25, "Weight of a task never graded (0.25 is p(1-p) at its highest), so every task is tried early.", gt=0
    )
    min_weight: float = field(
        0.01,
        "Floor on a graded task's weight: always-failed and always-solved tasks are still drawn now and then.",
        ge=0,
    )
    window: int = field(
        32, "The recent pass rate is over a task's last this many graded completions.", gt=0, le=10_000_000
    )
    rest_after: int = field(
        2,
        "A task whose last this many groups passed every graded completion rests for rest_steps steps.",
        gt=0,
        le=10_000_000,
    )
    rest_steps: int = field(20, "Steps a task solved every time is not drawn (0: it never rests).", ge=0, le=10_000_000)
    replay: bool = field(
        False,
        "Mix frontier tasks (neither / opponent-only, not solved since) back into training, as whole prompt groups. "
        "Needs self_play.enabled.",
    )
    replay_rate: float = field(
        0.25, "Share of a generation batch's prompt groups (rounded down) given to frontier replay.", ge=0, le=1
    )
