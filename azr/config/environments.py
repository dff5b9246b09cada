"""One environment switch: the kinds of episode a recipe can run, what each declares, and which one a recipe asks
for. Training, `azr gen`, the pass-rate sampler, SFT on recorded episodes and the recipe's checks ask
`environment_of(cfg)` (or `gen_environment_of(cfg)`) once and read what the kind declares; no other module compares
an environment's name. A new kind of episode is its environment's module (`azr.envs`) plus an entry here. It lives
with the recipe, the bottom layer, because the recipe's own checks and every layer above ask it.

The kinds: `single` (one answer, scored on all the task's tests; TRL generates it), `feedback` (`rollouts.env:
feedback`: the policy sees its program's results on the public tests and answers again; scored on the hidden tests)
and `tools` (`tools.enabled`: the tool loop). Absolute Zero is not a kind: it is a mode (`mode: absolute_zero`) whose
proposer and solver each play single-answer episodes of their own tasks, with no public or hidden tests to show, so
it runs with `single` and refuses the others.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from azr.errors import ConfigError

if TYPE_CHECKING:
    from azr.config.sections import AzrConfig


@dataclass(frozen=True)
class EnvironmentKind:
    """What one kind of episode declares."""

    name: str  # as episodes record it (`env` of an `azr gen` record)
    hidden_tests: bool  # scored on the hidden tests only, its public ones shown: every task needs a hidden test
    feedback_turns: bool  # the policy sees its tests' results and answers again (turns depend on the sandbox)
    token_episodes: bool  # recorded episodes train from their token ids (the loss already on the policy's tokens)
    tools: bool  # the policy is offered tools
    max_turns: Callable[[AzrConfig], int]  # policy turns an episode may take
    # How GRPO plays it: "module:function" building TRL's `rollout_func` from the run's context (imported when a run
    # asks: the recipe's layer names the training code, never imports it); None: one answer, which TRL generates
    rollouts: str | None

    def is_named(self, name: str | None) -> bool:
        """Whether a recorded episode's `env` (absent in a tool episode) is this kind's."""
        return (name or TOOLS.name) == self.name

    def trainer_rollouts(self, ctx: Any) -> Any:
        """GRPO's `rollout_func` for this kind (also an observer of each scored batch) from a run's context
        (`azr.training.RunContext`, which this layer does not import), or None."""
        if self.rollouts is None:
            return None
        module, name = self.rollouts.split(":")
        return getattr(importlib.import_module(module), name)(ctx)


SINGLE = EnvironmentKind(
    name="single",
    hidden_tests=False,
    feedback_turns=False,
    token_episodes=False,
    tools=False,
    max_turns=lambda cfg: 1,
    rollouts=None,
)
FEEDBACK = EnvironmentKind(
    name="feedback",
    hidden_tests=True,
    feedback_turns=True,
    token_episodes=True,
    tools=False,
    max_turns=lambda cfg: cfg.feedback.max_turns,
    rollouts="azr.training.episodes:feedback_rollouts",
)
TOOLS = EnvironmentKind(
    name="tools",
    hidden_tests=False,
    feedback_turns=False,
    token_episodes=False,
    tools=True,
    max_turns=lambda cfg: cfg.gen.max_turns,
    rollouts="azr.training.episodes:tool_rollouts",
)
KINDS = {kind.name: kind for kind in (SINGLE, FEEDBACK, TOOLS)}


def environment_of(cfg: AzrConfig) -> EnvironmentKind:
    """The kind a GRPO run plays (`rollouts.env`, `tools.enabled`); a ConfigError naming the field for a recipe
    that asks for two, or for one its mode cannot play."""
    kind = KINDS[cfg.rollouts.env]
    if cfg.tools.enabled:
        if kind.feedback_turns:
            raise ConfigError(f"rollouts.env: {kind.name!r} is not with tools.enabled (one environment per run)")
        kind = TOOLS
    if kind.hidden_tests and cfg.mode == "absolute_zero":
        raise ConfigError(
            f"rollouts.env: {kind.name!r} runs in mode 'grpo' only (Absolute Zero's proposed tasks have no public "
            "tests)"
        )
    return kind


def gen_environment_of(cfg: AzrConfig) -> EnvironmentKind:
    """The kind `azr gen` collects: the recipe's own where it shows feedback, else the tool loop (gen's episodes are
    conversations with turns; a single answer is what `azr eval` records)."""
    kind = KINDS[cfg.rollouts.env]
    return kind if kind.feedback_turns else TOOLS


def environment_named(name: str) -> EnvironmentKind:
    """The kind `name` (`rollouts.env`'s value or a record's `env`); a ConfigError for an unknown one."""
    try:
        return KINDS[name]
    except KeyError:
        raise ConfigError(f"unknown environment {name!r} (one of {', '.join(KINDS)})") from None
