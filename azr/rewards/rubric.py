"""`Rubric`: a run's reward setup as one object, built once and checked when built — the reward functions, their
weights, the answer parser every reward reads completions with, and the grader behind them. GRPO's episodes, the
pass rate, the held-out evaluation and `azr gen` all score through one (`Rubric.score`). `recipe_rubric` makes the
recipe's (over `build_rubric`); `trained_rubric` what GRPO trains with (self-play's reward blended in once).
Absolute Zero's two role rewards are its own rubric. A reward's None is an infrastructure failure that leaves the
whole completion ungraded (out of the loss, its group's mean and spread, and every reported reward), unless the
reward is `optional` (`is_optional`: its None means it does not apply to the row).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from azr.config import AzrConfig, RewardSpec, SandboxConfig
from azr.errors import ConfigError
from azr.prompts import Answer, AnswerFormat, parse_answer
from azr.rewards.control import Shuffled
from azr.rewards.functions import CodeGrader, EpisodeReward, Outcome, SelfPlayReward, instantiate
from azr.rewards.grading import limits_from_config, pool_from_config
from azr.sandbox import ExecutionProvider

RewardFunc = Callable[..., list]  # TRL's contract: (prompts, completions, **columns) -> one value (or None) per row


def is_optional(func: RewardFunc) -> bool:
    """Whether `func`'s None means "does not apply to this row" (self-play without an opponent's verdict, Absolute
    Zero's other role) rather than an infrastructure failure, which leaves the row ungraded. Declared by an
    `optional = True` attribute; any reward function without one (a custom reward included) is not optional."""
    return getattr(func, "optional", False) is True


@dataclass(frozen=True)
class Scored:
    """One completion under a rubric: each reward's value by name, their weighted `total` (None: not graded), and
    the grader's `outcome` (the answer as read, the status, the tests passed)."""

    values: dict[str, float | None]
    total: float | None
    outcome: Outcome

    @property
    def status(self) -> str:
        return self.outcome.status


@dataclass(frozen=True)
class Rubric:
    """Reward functions and one weight each, the answer format they parse completions with, and the `grader` the
    graded ones share (None when the rubric was only checked, not built to score). Raises ValueError when built
    with weights that do not match the functions, a weight that is not a finite number, or two functions of one
    name (TRL logs each reward by its name)."""

    funcs: tuple[RewardFunc, ...]
    weights: tuple[float, ...]
    grader: CodeGrader | None = None
    answer_format: AnswerFormat = "strict"

    def __post_init__(self) -> None:
        if len(self.funcs) != len(self.weights):
            raise ValueError(f"Rubric: {len(self.funcs)} reward functions but {len(self.weights)} weights")
        for name, weight in zip(self.names, self.weights, strict=True):
            if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight):
                raise ValueError(f"Rubric: the weight of {name} is {weight!r}, not a finite number")
        twice = sorted({n for n in self.names if self.names.count(n) > 1})
        if twice:
            raise ValueError(f"Rubric: reward functions named twice: {twice}")

    @property
    def names(self) -> list[str]:
        return [getattr(f, "__name__", type(f).__name__) for f in self.funcs]

    def parse(self, text: str) -> Answer:
        """The answer in a completion, as every reward of this rubric reads it."""
        return parse_answer(text, self.answer_format)

    @property
    def graded(self) -> bool:
        """Whether any of its functions reads the grader's outcomes (runs the answers' programs), such as `tests`."""
        return any(getattr(f, "needs_grader", False) for f in self.funcs)

    @property
    def required(self) -> list[bool]:
        """Per function: whether its None leaves the row ungraded (every function that is not `is_optional`)."""
        return [not is_optional(f) for f in self.funcs]

    def total(self, values: Sequence[float | None]) -> float | None:
        """The weighted sum of one completion's rewards, the one weighing of every score azr trains on or reports
        (GRPO's round sums the same weights over the same rows: `AZRGRPOTrainer` masks what this calls ungraded).
        None (not graded) when a reward that is not optional has no value, or none has; an optional reward without
        a value adds nothing."""
        present = [v is not None for v in values]
        if not any(present) or any(r and not p for r, p in zip(self.required, present, strict=True)):
            return None
        return sum(w * v for w, v in zip(self.weights, values, strict=True) if v is not None)

    def score(self, completions: Sequence[Any], columns: dict[str, Any]) -> list[Scored]:
        """Every completion's rewards and total, against its row of `columns` (TRL's dataset columns, one row per
        completion); each program runs once, its outcome shared by the graded rewards. ValueError when the rubric
        was only checked (no grader)."""
        if self.grader is None:
            raise ValueError("the rubric was only checked; build it with a sandbox to score")
        completions = list(completions)
        outcomes = self.grader.outcomes(completions, columns)
        per_func = [f(prompts=[None] * len(completions), completions=completions, **columns) for f in self.funcs]
        scored = []
        for row, outcome in enumerate(outcomes):
            values = [values[row] for values in per_func]
            scored.append(Scored(dict(zip(self.names, values, strict=True)), self.total(values), outcome))
        return scored

    def blended(self, weight: float) -> Rubric:
        """Self-play's blend: every weight scaled by (1 - `weight`) and the `selfplay` reward at `weight` (the one
        already among the functions, with its own tie values, or a default one added)."""
        funcs, scaled = list(self.funcs), [(1 - weight) * w for w in self.weights]
        found = [i for i, f in enumerate(funcs) if isinstance(f, SelfPlayReward)]
        if found:
            scaled[found[0]] = weight
        else:
            funcs.append(SelfPlayReward(self.grader))
            scaled.append(weight)
        return replace(self, funcs=tuple(funcs), weights=tuple(scaled))


def build_rubric(
    specs: Sequence[RewardSpec],
    sandbox: SandboxConfig | None = None,
    pool: ExecutionProvider | None = None,
    answer_format: AnswerFormat = "strict",
) -> Rubric:
    """The recipe's rubric. With `sandbox`, built to score: one `CodeGrader` over `pool` (default: the shared pool
    of `sandbox`) shared by the graded rewards. Without, only checked: every name resolved and its params bound,
    no sandbox started. Raises ConfigError naming `rewards[i]` at fault."""
    grader = None
    if sandbox is not None:
        grader = CodeGrader(
            pool or pool_from_config(sandbox),
            limits_from_config(sandbox),
            answer_format,
            sandbox.max_infra_failure_rate,
        )
    funcs = [instantiate(spec, grader, f"rewards[{i}]") for i, spec in enumerate(specs)]
    try:
        return Rubric(tuple(funcs), tuple(float(spec.weight) for spec in specs), grader, answer_format)
    except ValueError as exc:
        raise ConfigError(f"rewards: {exc}") from None


def recipe_rubric(
    cfg: AzrConfig, sandbox: SandboxConfig | None = None, pool: ExecutionProvider | None = None
) -> Rubric:
    """The recipe's rubric: its `rewards`, read with its `answer_format`; what the pass rate, the held-out evaluation
    and `azr gen` score with, and what GRPO's (`trained_rubric`) is made from. `sandbox`, `pool`: `build_rubric`'s."""
    return build_rubric(cfg.rewards, sandbox, pool, answer_format=cfg.answer_format)


def trained_rubric(cfg: AzrConfig, rubric: Rubric) -> Rubric:
    """What GRPO trains with from the recipe's `rubric`: blended with self-play's reward when `self_play.enabled`;
    with execution feedback's shaping (`feedback.turn_penalty`, `feedback.improvement_bonus`) as one more reward of
    weight 1 when either is set and the recipe does not list `episode` itself; with `reward_control: shuffle`, each
    function's values permuted within the batch (`azr.rewards.control`)."""
    trained = with_shaping(cfg, rubric.blended(cfg.self_play.weight) if cfg.self_play.enabled else rubric)
    if cfg.reward_control == "shuffle":  # the control arm: the same rewards, permuted within each batch
        trained = replace(trained, funcs=tuple(Shuffled(f, cfg.seed) for f in trained.funcs))
    return trained


def with_shaping(cfg: AzrConfig, rubric: Rubric) -> Rubric:
    """`rubric` with execution feedback's shaping (`feedback.turn_penalty`, `feedback.improvement_bonus`) as one
    more reward of weight 1, for a feedback recipe that sets either and does not list `episode` itself: what GRPO
    pays a feedback episode, and what `azr gen` records of one."""
    shaping = cfg.feedback.turn_penalty or cfg.feedback.improvement_bonus
    from azr.config import environment_of

    if not environment_of(cfg).feedback_turns or not shaping or "episode_reward" in rubric.names:
        return rubric
    episode = EpisodeReward(cfg.feedback.turn_penalty, cfg.feedback.improvement_bonus)
    return replace(rubric, funcs=(*rubric.funcs, episode), weights=(*rubric.weights, 1.0))
