"""An episode as data: the first prompt (messages and, for a token-level policy, its token ids), then its turns in
order — each policy turn's sampled ids, the sampler's log-probabilities and its decoded text; each environment
observation's messages and the ids the chat template adds for them, tokenized once — with per-turn verdicts, the
finish reason and the rewards. The columns a trainer reads (`completion_ids`, `policy_mask`, `logprobs`) are views
of the turns; an endpoint policy's episode is the same object with messages and no ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

Message = dict[str, object]
POLICY, ENV = "policy", "env"


@dataclass
class Turn:
    """One turn: the policy's (`ids` sampled, `logprobs` per id where the sampler gave them, `text` decoded,
    `messages` the one assistant message) or the environment's (`messages` the observation, `ids` the chat
    template's tokens for them, `text` those tokens rendered). `info` holds the environment's verdicts on the turn.
    `tokens` counts the turn's tokens where there are no ids (an endpoint's usage)."""

    kind: Literal["policy", "env"]
    messages: list[Message]
    ids: list[int] = field(default_factory=list)
    text: str = ""
    logprobs: list[float] | None = None
    raw: str = ""  # a policy turn's text with special tokens kept (what a tool-call parser reads); "" when as `text`
    finish_reason: str = ""  # a policy turn: stop (it ended its turn) / length (cut off) / error
    info: dict[str, object] = field(default_factory=dict)
    tokens: int = 0
    prompt_tokens: int = 0  # what the policy read for this turn (an endpoint's usage; the context for ids)

    @property
    def message(self) -> Message:
        """A policy turn's assistant message (an environment may refine it: tool calls parsed from the text)."""
        return self.messages[0]

    @property
    def size(self) -> int:
        return len(self.ids) if self.ids else self.tokens


@dataclass
class Episode:
    """One episode of a task: `prompt` (the first messages) and `prompt_ids` (their tokens; empty for an endpoint
    policy), the `turns`, who spoke (`role`: the adapter or model that plays the policy, e.g. Absolute Zero's
    `propose` / `solve`), the policy `version` (optimizer steps taken by the weights that sampled it), its place in
    its group (`sample`), how it ended and what it scored. `state` is the environment's own per-episode state; `task`
    the task it was started from (its scorer reads the tests there)."""

    task_id: str
    prompt: list[Message]
    prompt_ids: list[int] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    role: str = POLICY
    version: int = 0
    sample: int = 0
    finish_reason: str = ""  # done / length / max_turns / max_tokens / context / error
    error: str | None = None
    rewards: dict[str, float | None] = field(default_factory=dict)  # reward function -> value (None: not graded)
    reward: float | None = None  # the rubric's weighted total
    info: dict[str, object] = field(default_factory=dict)  # the environment's verdicts on the whole episode
    state: dict[str, object] = field(default_factory=dict)
    task: object = None  # the task it was started from (what `Environment.start` was given)

    # ------------------------------------------------------------------------------------------- turns
    @property
    def messages(self) -> list[Message]:
        """The conversation: the first messages, then every turn's messages in order."""
        return [*self.prompt, *(m for turn in self.turns for m in turn.messages)]

    @property
    def policy_turns(self) -> list[Turn]:
        return [t for t in self.turns if t.kind == POLICY]

    @property
    def answer(self) -> str:
        """The last policy turn's text (what a single-answer rubric grades); empty before the first."""
        turns = self.policy_turns
        return turns[-1].text if turns else ""

    @property
    def tokenized(self) -> bool:
        """Whether the episode holds token ids (a token-level policy's), not only messages."""
        return bool(self.prompt_ids)

    @property
    def done(self) -> bool:
        return bool(self.finish_reason)

    # ---------------------------------------------------------------------------------- what a trainer reads
    @property
    def completion_ids(self) -> list[int]:
        """Every turn's ids after the prompt, policy and environment alike, in order."""
        return [i for turn in self.turns for i in turn.ids]

    @property
    def context_ids(self) -> list[int]:
        """The ids the policy continues from: the prompt's, then every turn's."""
        return [*self.prompt_ids, *self.completion_ids]

    @property
    def policy_mask(self) -> list[int]:
        """Over `completion_ids`: 1 for a token the policy sampled (trained), 0 for an environment token (masked out
        of the loss). TRL's `rollout_func` takes this list as its `env_mask` column (1 marks the model's tokens)."""
        return [1 if turn.kind == POLICY else 0 for turn in self.turns for _ in turn.ids]

    @property
    def env_mask(self) -> list[int]:
        """TRL's `env_mask` column, which is `policy_mask` under TRL's name (1: the model's token, 0: the
        environment's)."""
        return self.policy_mask

    @property
    def logprobs(self) -> list[float] | None:
        """Over `completion_ids`: the sampler's log-probability of each policy token, 0.0 for environment tokens
        (masked out); None when the sampler gave none for any policy turn (the trainer computes them)."""
        if not any(t.logprobs is not None for t in self.policy_turns):
            return None
        out: list[float] = []
        for turn in self.turns:
            if turn.kind == POLICY and turn.logprobs is not None:
                out.extend(turn.logprobs)
            else:
                out.extend([0.0] * len(turn.ids))
        return out

    @property
    def policy_tokens(self) -> int:
        return sum(t.size for t in self.policy_turns)

    @property
    def env_tokens(self) -> int:
        return sum(t.size for t in self.turns if t.kind == ENV)

    def usage(self) -> dict[str, int]:
        policy = self.policy_turns
        return {
            "prompt_tokens": sum(t.prompt_tokens for t in policy),
            "completion_tokens": self.policy_tokens,
            "env_tokens": self.env_tokens,
            "turns": len(policy),
        }


def rollout_columns(episodes: Sequence[Episode]) -> dict[str, list[object]]:
    """The columns TRL's `rollout_func` returns for `episodes` (one row each, in order): `prompt_ids`,
    `completion_ids`, `logprobs` (each row padded with 0.0 at environment tokens; None rows when the sampler gave
    none) and `env_mask` (1 on policy tokens) when any episode has environment tokens. Plain lists: no TRL here."""
    rows = list(episodes)
    if any(not e.tokenized for e in rows):
        raise ValueError("rollout_columns: an episode without token ids (an endpoint policy's) cannot be trained")
    logprobs = [e.logprobs for e in rows]
    columns: dict[str, list[object]] = {
        "prompt_ids": [e.prompt_ids for e in rows],
        "completion_ids": [e.completion_ids for e in rows],
        "logprobs": logprobs if all(lp is not None for lp in logprobs) else None,  # type: ignore[dict-item]
    }
    if any(e.env_tokens for e in rows):
        columns["env_mask"] = [e.policy_mask for e in rows]
    return columns
