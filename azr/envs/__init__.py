"""Environments: one module per kind of episode, each an `azr.rollouts.Environment` played by the one runner —
today's single-turn code task (`code`), execution feedback on public tests (`feedback`), the tool loop (`tools`) —
the task as an environment receives it (`task`), scoring episodes through the run's `Rubric` (`scoring`), and
`azr gen`'s collection over the tool or the feedback environment (`gen`). The face of the package; it imports no torch,
transformers or trl at import.
"""

from azr.envs.code import CodeEnvironment
from azr.envs.feedback import (
    PUBLIC,
    FeedbackEnvironment,
    hidden_verdicts,
    public_checks,
    shaping_columns,
    turn_rates,
)
from azr.envs.gen import build_policy, episode_seed, gen_settings, gen_tasks, local_model, run_gen, vllm_tool_args
from azr.envs.scoring import score_answers, task_columns
from azr.envs.task import TaskPrompt
from azr.envs.tools import ToolEnvironment, events_of, final_answer, shown_messages, turn_parser

__all__ = [
    "PUBLIC",
    "CodeEnvironment",
    "FeedbackEnvironment",
    "TaskPrompt",
    "ToolEnvironment",
    "build_policy",
    "episode_seed",
    "events_of",
    "final_answer",
    "gen_settings",
    "gen_tasks",
    "hidden_verdicts",
    "local_model",
    "public_checks",
    "run_gen",
    "score_answers",
    "shaping_columns",
    "shown_messages",
    "task_columns",
    "turn_parser",
    "turn_rates",
    "vllm_tool_args",
]
