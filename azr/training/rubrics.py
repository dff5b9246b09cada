"""The run's two rubrics, built in one place: the recipe's (what the pass rate and the held-out evaluation score
with) and the one GRPO trains with (self-play's reward blended in once; in Absolute Zero mode its own role rewards,
built by its phase around its judge). The recipe check builds them without a sandbox, for TRL's reward weights.
"""

from __future__ import annotations

from dataclasses import dataclass

from azr.config import AzrConfig, SandboxConfig
from azr.rewards import CodeGrader, Rubric, recipe_rubric, trained_rubric
from azr.sandbox import ExecutionProvider


@dataclass(frozen=True)
class RunRewards:
    """`rubric` is the recipe's; `trained` what GRPO trains with (None in Absolute Zero mode, whose phase builds its
    own around its judge)."""

    rubric: Rubric
    trained: Rubric | None

    @property
    def grader(self) -> CodeGrader:
        """The grader the recipe's rewards share (a run builds its rubric to score)."""
        if self.rubric.grader is None:
            raise RuntimeError("the run's rubric was checked, not built to score: no grader")
        return self.rubric.grader

    @property
    def trained_weights(self) -> list[float]:
        """One weight per reward function TRL trains with: TRL's `reward_weights`."""
        if self.trained is None:
            from azr.absolute_zero import ROLE_WEIGHTS

            return list(ROLE_WEIGHTS)
        return list(self.trained.weights)


def run_rewards(
    cfg: AzrConfig, sandbox: SandboxConfig | None = None, pool: ExecutionProvider | None = None
) -> RunRewards:
    """The run's rubrics. With `sandbox`, built to score over `pool` (default: the shared pool of `sandbox`); without,
    only checked (every reward name and its params, no sandbox started). ConfigError names the field at fault."""
    rubric = recipe_rubric(cfg, sandbox, pool)
    return RunRewards(rubric, None if cfg.mode == "absolute_zero" else trained_rubric(cfg, rubric))
