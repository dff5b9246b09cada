"""Execution-feedback episodes over token ids: the policy answers, its program runs on the task's public tests, and
while any fails and turns remain the feedback is appended as a user turn and the policy answers again from the whole
context. Ids are kept across turns (never re-tokenized from text); environment tokens are marked 0 in `env_mask`.
It neither grades nor renders feedback: `check` (the public tests) and `sampler` (the policy) are handed in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Check:
    """One program's result on its task's public tests: all passed, the share passed, and the observation the
    policy is shown next ('' when nothing failed)."""

    passed: bool
    fraction: float
    feedback: str


class TurnSampler(Protocol):
    """The policy at GRPO's sampling settings: `n` completions of each context (contexts hold each prompt `n` times
    in a row, TRL's contract), their token ids and per-token sampler log-probabilities (None where the backend
    gives none, as `generate` does)."""

    def sample(self, contexts: list[list[int]], n: int) -> tuple[list[list[int]], list[list[float]] | None]: ...


# (episode indices, answer texts) -> one Check per text, in order
PublicCheck = Callable[[list[int], list[str]], list[Check]]


@dataclass
class Episode:
    """One episode: the prompt's ids, then every turn's sampled ids with the environment's ids between them
    (`env_mask` 1 for the policy's tokens, 0 for the environment's), the sampler's log-probabilities (0.0 at
    environment tokens), each turn's answer text and its public check."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    turn_ids: list[list[int]] = field(default_factory=list)  # each turn's sampled ids, as sampled
    feedback_tokens: int = 0

    @property
    def turns(self) -> int:
        return len(self.texts)

    @property
    def answer(self) -> str:
        """The final answer: what the episode is scored on."""
        return self.texts[-1] if self.texts else ""

    def add_turn(self, ids: list[int], logprobs: list[float] | None, text: str) -> None:
        self.turn_ids.append(list(ids))
        self.completion_ids += ids
        self.env_mask += [1] * len(ids)
        self.logprobs = None if self.logprobs is None or logprobs is None else self.logprobs + list(logprobs)
        self.texts.append(text)

    def add_observation(self, ids: list[int]) -> None:
        self.completion_ids += ids
        self.env_mask += [0] * len(ids)
        if self.logprobs is not None:
            self.logprobs += [0.0] * len(ids)
        self.feedback_tokens += len(ids)


class FeedbackTokens:
    """The ids of a feedback user turn as they follow an assistant turn in the chat template: the delta between a
    conversation ending in an assistant turn and the same with the user turn and the generation prompt appended,
    cut at the end-of-turn token the policy sampled (templates write a newline after it)."""

    def __init__(self, tokenizer: Any, **template_kwargs: Any):
        self.tokenizer, self.kwargs = tokenizer, template_kwargs
        self.eos = tokenizer.eos_token_id

    def __call__(self, feedback: str, after: Sequence[int]) -> list[int]:
        """The environment's ids after the sampled turn `after` (an end-of-turn token first when it was cut off)."""
        base = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "answer"}]
        prefix = self._ids(base, False)
        full = self._ids([*base, {"role": "user", "content": feedback}], True)
        ends = [i for i, t in enumerate(prefix) if t == self.eos]
        if ends:
            prefix = prefix[: ends[-1] + 1]
        if full[: len(prefix)] != prefix:
            raise ValueError("the chat template does not render a conversation as a prefix of its continuation")
        delta = full[len(prefix) :]
        return delta if (after and after[-1] == self.eos) or self.eos is None else [self.eos, *delta]

    def _ids(self, messages: list[dict[str, str]], generation_prompt: bool) -> list[int]:
        ids = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=generation_prompt, tokenize=True, return_dict=False, **self.kwargs
        )
        return list(ids["input_ids"] if isinstance(ids, dict) else ids)


def run_episodes(
    prompt_ids: list[list[int]],
    n: int,
    sampler: TurnSampler,
    decode: Callable[[list[int]], str],
    check: PublicCheck,
    observation: Callable[[str, Sequence[int]], list[int]],
    max_turns: int,
    stop_on_pass: bool = True,
) -> list[Episode]:
    """The episodes of `prompt_ids` (each prompt `n` times in a row): turn 1 sampled `n` per prompt, later turns one
    per episode from its whole context; every turn's program checked on the public tests (the last one too, for the
    metrics and the improvement bonus). An episode stops once its public tests pass (`stop_on_pass`) or after
    `max_turns` answers."""
    ids, logprobs = sampler.sample(prompt_ids, n)
    episodes = [Episode(list(p), logprobs=[]) for p in prompt_ids]
    for i, episode in enumerate(episodes):
        episode.add_turn(ids[i], logprobs[i] if logprobs is not None else None, decode(ids[i]))
    active = list(range(len(episodes)))
    for turn in range(1, max_turns + 1):
        checks = check(active, [episodes[i].answer for i in active])
        for i, result in zip(active, checks, strict=True):
            episodes[i].checks.append(result)
        if turn == max_turns:
            break
        active = [i for i, c in zip(active, checks, strict=True) if not (stop_on_pass and c.passed)]
        if not active:
            break
        for i in active:
            episode = episodes[i]
            episode.add_observation(observation(episode.checks[-1].feedback, episode.turn_ids[-1]))
        ids, logprobs = sampler.sample([episodes[i].prompt_ids + episodes[i].completion_ids for i in active], 1)
        for j, i in enumerate(active):
            episodes[i].add_turn(ids[j], logprobs[j] if logprobs is not None else None, decode(ids[j]))
    return episodes
