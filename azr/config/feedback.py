"""The recipe's episode settings: which environment an episode runs in (`rollouts.env`; what each kind declares,
and the recipes none can run, are `azr.config.environments`'s) and the execution-feedback environment's own settings
(`feedback:`).

Only the recipe's side: rendering the feedback is `azr.rewards.feedback`'s, running the episodes `azr.rollouts`'.
Which tests a task shows (public) and which score it (hidden) is `azr.data.Task.split_tests`'s rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from azr.config.schema import field


@dataclass
class RolloutsConfig:
    env: Literal["single", "feedback"] = field(
        "single",
        "The environment of a GRPO episode: 'single' (one attempt, scored on all the task's tests) or 'feedback' "
        "(the policy sees how its program did on the task's public tests and tries again, up to feedback.max_turns "
        "attempts; the final program is scored on the hidden tests only, which are never shown). 'feedback' also "
        "makes `azr gen` collect feedback episodes (with their token ids) instead of tool-using ones, and "
        "sft.rollouts train on those.",
    )


@dataclass
class FeedbackConfig:
    max_turns: int = field(
        2,
        "Attempts per episode in the feedback environment; 1 is one attempt scored on the hidden tests.",
        ge=1,
        le=32,
    )
    max_failures: int = field(
        2, "Failing public tests shown in one feedback message (the first ones, in the task's order).", ge=1, le=64
    )
    max_chars: int = field(
        300,
        "Each shown field (a test's input, expected output, the program's output, its error) is cut to this many "
        "characters.",
        ge=16,
        le=100_000,
    )
    stop_on_pass: bool = field(
        True, "End an episode as soon as its program passes every public test (no further attempt)."
    )
    turn_penalty: float = field(
        0.0, "Subtracted from an episode's reward for each attempt after the first (0: none).", ge=0, le=10
    )
    improvement_bonus: float = field(
        0.0,
        "Shaping: added to an episode's reward times the rise in the public-test pass fraction from its first "
        "attempt to its last (0: none).",
        ge=0,
        le=10,
    )
