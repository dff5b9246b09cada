"""Rewards: the program built from a task and a completion, its verdicts from the sandbox (`Grade`), the reward
functions and their REWARDS table. The face of the rewards package; it imports no torch, transformers or trl.
"""

from azr.rewards.batches import OutcomeCache
from azr.rewards.feedback import (
    NO_CODE,
    hidden_task,
    public_feedback_many,
    public_task,
    render_feedback,
)
from azr.rewards.functions import (
    EPISODE_TURNS,
    PUBLIC_FIRST,
    PUBLIC_LAST,
    REWARDS,
    CodeGrader,
    SelfPlayReward,
    selfplay_score,
)
from azr.rewards.grading import (
    Grade,
    grade,
    grade_many,
    grade_stream,
    limits_from_config,
    pool_from_config,
    run_program,
    start_pool,
    task_limits,
    validate_references,
    verdict_check,
)
from azr.rewards.harness import harness_preload
from azr.rewards.health import InfraFailures
from azr.rewards.oracle import sandbox_oracle
from azr.rewards.outputs import Output, outputs_many
from azr.rewards.rubric import (
    Rubric,
    Scored,
    build_rubric,
    is_optional,
    recipe_rubric,
    trained_rubric,
    with_shaping,
)
from azr.rewards.stdio import compare_output
from azr.rewards.verdicts import TestOutcome

__all__ = [
    "EPISODE_TURNS",
    "NO_CODE",
    "PUBLIC_FIRST",
    "PUBLIC_LAST",
    "REWARDS",
    "CodeGrader",
    "Grade",
    "InfraFailures",
    "OutcomeCache",
    "Output",
    "Rubric",
    "Scored",
    "SelfPlayReward",
    "TestOutcome",
    "build_rubric",
    "compare_output",
    "grade",
    "grade_many",
    "grade_stream",
    "harness_preload",
    "hidden_task",
    "is_optional",
    "limits_from_config",
    "outputs_many",
    "pool_from_config",
    "public_feedback_many",
    "public_task",
    "recipe_rubric",
    "render_feedback",
    "run_program",
    "sandbox_oracle",
    "selfplay_score",
    "start_pool",
    "task_limits",
    "trained_rubric",
    "validate_references",
    "verdict_check",
    "with_shaping",
]
