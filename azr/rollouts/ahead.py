"""Episodes played ahead of the trainer: what the asynchronous pipeline's producer does with one queued batch. A
`Playbook` names the run's environment and how a row starts its episode; `play_ahead` plays the batch's episodes
through the one runner (`azr.rollouts.runner.play`) with a token sampler that draws each turn from the newest policy
version it serves (adapter mode's `azr.serving.LoraSync`), every turn seeded from the batch's seed, the environment
answering between turns.
Owns no queue and no timing (`azr.rollouts.pipeline` does), and no reward: the trainer's round scores the rows (a
playbook's `grade` only runs their programs ahead, for the round's rewards to find).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from azr.rollouts.chat import ChatTokens
from azr.rollouts.environment import Environment, HasId
from azr.rollouts.episodes import Episode, Message, rollout_columns
from azr.rollouts.runner import Limits, play, start_groups
from azr.rollouts.seam import VERSION, Row, Sampling, TokenSampler

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

Columns = Callable[[Sequence[Episode]], dict[str, list[object]]]
# Runs a played batch's programs ahead of the trainer: (its episodes, its rows, its `rollout_func` columns).
Grade = Callable[[Sequence[Episode], Sequence[Row], dict[str, list[object]]], None]


@dataclass(frozen=True)
class RowTask:
    """A row as a task when the environment needs nothing but its id (a one-turn round the trainer scores)."""

    id: str
    row: Row


def row_task(row: Row) -> HasId:
    return RowTask(str(row.get("task_id", "")), row)


class OneTurn:
    """The environment of a plain GRPO round: one policy turn, no observation, scored by the trainer's rewards."""

    tools = None

    def start(self, task: HasId) -> list[Message]:
        return []

    def respond(self, episode: Episode, text: str) -> list[Message] | None:
        return None

    def score(self, episodes: Sequence[Episode]) -> None:
        """Nothing: the trainer's reward functions score the rows."""


@dataclass(frozen=True)
class Playbook:
    """What the pipeline plays for each queued row: an episode of `env` started from `task(row)`, at most
    `limits.max_turns` policy turns of at most `max_new_tokens` each (GRPO's `max_completion_length`, as the round
    samples). `tokenizer` (with the chat template's `template_kwargs`) renders each observation as ids once.
    `columns` adds columns per row for the rewards (a multi-turn environment's final answer, say). `grade(episodes,
    rows, columns)`, where given, runs the played batch's programs ahead of the trainer
    (`azr.rewards.CodeGrader.grade_ahead`: their outcomes wait in the grader's cache for the round's reward call).
    The default plays a one-turn round from ids alone."""

    env: Environment = field(default_factory=OneTurn)
    task: Callable[[Row], HasId] = row_task
    tokenizer: PreTrainedTokenizerBase | None = None
    template_kwargs: dict = field(default_factory=dict)
    max_new_tokens: int = Sampling().max_new_tokens
    limits: Limits = field(default_factory=Limits)
    columns: Columns | None = None
    grade: Grade | None = None

    def for_thread(self) -> Playbook:
        """This playbook with a tokenizer of its own: a fast tokenizer is not safe to share with a thread that
        changes its padding or truncation (the trainer's, which tokenizes its batches meanwhile)."""
        if self.tokenizer is None:
            return self
        return replace(self, tokenizer=copy.deepcopy(self.tokenizer))


def play_ahead(
    sampler: TokenSampler,
    playbook: Playbook,
    rows: list[Row],
    prompt_ids: list[list[int]],
    group_size: int,
    seed: int | None,
) -> tuple[int, list[Episode], dict[str, list[object]]]:
    """One episode per row of `rows` (whole groups of `group_size` in a row; `prompt_ids` one per group, as the
    trainer tokenizes them), played to its end by `sampler`, each turn from the newest version it serves: the
    version the batch is tagged with (the oldest first turn's: a later turn is drawn by the newest version at its
    time), the episodes, and TRL's `rollout_func` columns for them with `policy_version` and the playbook's own. A
    group's first turn is one request for its `group_size` completions under `seed` (turn k under `seed + k`; None:
    unseeded), as a one-turn batch always was."""
    book = playbook
    chat = ChatTokens(book.tokenizer, book.template_kwargs)  # type: ignore[arg-type]  # only tools and observations
    # An environment with tools renders their schemas into the prompt (as the round does), which the trainer's
    # tokenization of the rows would not.
    groups = start_groups(book.env, [book.task(row) for row in rows], chat if book.env.tools else None, 1)
    episodes = [e for group in groups for e in group]
    if not book.env.tools:
        for i, episode in enumerate(episodes):
            episode.prompt_ids = list(prompt_ids[i // group_size])
    play(
        book.env,
        episodes,
        sampler,
        chat,
        Sampling(n=group_size, seed=seed, max_new_tokens=book.max_new_tokens),
        book.limits,
    )
    version = min((e.version for e in episodes), default=0)
    for episode in episodes:
        episode.version = version
    columns = rollout_columns(episodes)
    if book.columns is not None:
        columns.update(book.columns(episodes))
    columns[VERSION] = [e.version for e in episodes]
    return version, episodes, columns
