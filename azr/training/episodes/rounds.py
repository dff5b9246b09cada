"""GRPO's rounds as episodes: TRL's `rollout_func` over any `azr.rollouts.Environment` (the code task, execution
feedback, the tool loop). TRL hands the round's prompts (each row once, a group's rows in a row); each row becomes one
episode, started from the row's conversation and its task, played by the episode runner through the trainer's own
generation (vLLM or `generate`, at GRPO's settings, the same calls TRL's round makes), and handed back as TRL's
columns: prompt and completion ids, the sampler's log-probabilities, and `env_mask` where environment tokens are to
be masked out of the loss. TRL's reward functions (the run's rubric) then score the rows; its advantages, as before.
With `sampling.max_staleness` the same episodes are played ahead by the asynchronous pipeline (`ahead_playbook`),
and their programs run in the sandbox as soon as they are played (`ahead_grading`), so a step's reward stage finds
its batch graded.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from azr.data import Task
from azr.envs import TaskPrompt
from azr.rollouts import (
    ChatTokens,
    Columns,
    Environment,
    Episode,
    Grade,
    Limits,
    Message,
    Playbook,
    Row,
    Sampling,
    TrainerSampler,
    play,
    rollout_columns,
    start_groups,
)
from azr.training.trl.private import TrainerBatches

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from azr.rewards import CodeGrader
    from azr.training.trl.private import GRPOTrainer

log = logging.getLogger(__name__)

# The column of a row that holds what the rewards score in place of TRL's decoding of the whole transcript (a
# multi-turn episode's final answer, or its calls and results): see `episode_completions`.
COMPLETION = "episode_completion"


class EpisodeRollouts:
    """TRL's `rollout_func(prompts, trainer)` over `env` (with at most `limits.max_turns` policy turns an episode),
    the rows' tasks looked up in `tasks` by `task_id`. `view` is the trainer's (None: the trainer TRL passes on the
    first call). `columns` adds columns per row for the reward functions (TRL merges them into the rows): a
    multi-turn environment's `COMPLETION`, say. `last` holds the episodes of the latest round (this process's rows,
    in order)."""

    def __init__(
        self,
        env: Environment,
        view: TrainerBatches | None,
        tasks: Mapping[str, Task],
        limits: Limits = Limits(),
        columns: Columns | None = None,
    ):
        self.env, self.view, self.tasks, self.limits, self.columns = env, view, dict(tasks), limits, columns
        self.last: list[Episode] = []

    def __call__(self, prompts: list[Any], trainer: GRPOTrainer) -> dict[str, list[object]]:
        if self.view is None:
            self.view = TrainerBatches(trainer)
        rows = self.view.round_rows
        if len(rows) != len(prompts):
            raise RuntimeError(f"rollout_func: {len(prompts)} prompts for a round of {len(rows)} rows")
        asked = [
            TaskPrompt(str(row.get("task_id", "")), prompt, self.tasks.get(str(row.get("task_id", ""))))
            for row, prompt in zip(rows, prompts, strict=True)
        ]
        # TRL's layout: each prompt `group` times in a row (a group split over processes included), which TRL's own
        # round passes its vLLM backend as the group size; every process passes the same.
        episodes = play_asked(self.env, self.view, asked, 1, self.view.round_group_size, limits=self.limits)
        self.last = episodes
        out = rollout_columns(episodes)
        if self.columns is not None:
            out.update(self.columns(episodes))
        return out


def play_asked(
    env: Environment,
    view: TrainerBatches,
    asked: Sequence[TaskPrompt],
    n: int,
    run: int,
    role: str = "policy",
    limits: Limits = Limits(),
) -> list[Episode]:
    """`n` episodes of each of `asked` (in order), played through the trainer's own generation: the first messages
    tokenized as TRL tokenizes them (so a one-turn episode is what TRL's round samples; an environment with tools
    renders their schemas into the prompt, which TRL, handed none, would not), the first turn asked as runs of `run`
    identical contexts, every turn at most what is left of GRPO's `max_completion_length`, tagged with `role` and the
    weights' version (`TrainerSampler`'s)."""
    chat = ChatTokens(view.tokenizer, view.template_kwargs)
    groups = start_groups(env, list(asked), chat if env.tools else None, n, role=role)
    episodes = [e for group in groups for e in group]
    if not env.tools:
        for episode, ids in zip(episodes, view.tokenize([e.prompt for e in episodes]), strict=True):
            episode.prompt_ids = ids
    sampling = Sampling(n=run, max_new_tokens=view.max_completion_length)
    play(env, episodes, TrainerSampler(view), chat, sampling, limits, view.processes)
    return episodes


def episode_completions(inputs: Sequence[dict[str, Any]], completions: list[Any]) -> list[Any]:
    """What the rewards score: each row's `COMPLETION` (set by its episode's rollout) in place of the transcript TRL
    decoded; rows without one, their completions as they are."""
    if not inputs or COMPLETION not in inputs[0]:
        return completions
    return [row[COMPLETION] for row in inputs]


def assistant(text: str) -> list[Message]:
    """`text` as a completion of one assistant message (what a reward reads as an answer)."""
    return [{"role": "assistant", "content": text}]


def ahead_playbook(
    env: Environment,
    view: TrainerBatches,
    tasks: Mapping[str, Task],
    limits: Limits = Limits(),
    columns: Columns | None = None,
    grader: CodeGrader | None = None,
) -> Playbook:
    """What the asynchronous pipeline plays for each row, as `EpisodeRollouts` plays it in the round: an episode
    of `env` from the row's conversation and its task, observations rendered with the trainer's chat template, the
    same `limits`, turn budget and `columns`. With `grader` (the one the trained rewards grade with), each played
    batch's programs run ahead of the trainer (`ahead_grading`)."""
    by_id = dict(tasks)

    def task(row: Row) -> TaskPrompt:
        task_id = str(row.get("task_id", ""))
        return TaskPrompt(task_id, row["prompt"], by_id.get(task_id))  # type: ignore[arg-type]

    grade = ahead_grading(grader, view.tokenizer) if grader is not None else None
    per_turn = view.max_completion_length  # each turn at most what the round's turns sample to
    return Playbook(env, task, view.tokenizer, view.template_kwargs, per_turn, limits, columns, grade)


def ahead_grading(grader: CodeGrader, tokenizer: PreTrainedTokenizerBase) -> Grade:
    """A played batch graded as the round's rewards will grade it, ahead of the round: the same completions (a
    multi-turn episode's `COMPLETION`, else the completion ids decoded as TRL decodes them, one assistant message
    each) against the same rows, through `grader`, whose cache the round's reward call then reads. A failure here
    costs nothing but the head start: it is logged, and the round grades the batch itself."""

    def grade(episodes: Sequence[Episode], rows: Sequence[Row], columns: dict[str, list[object]]) -> None:
        if not rows:
            return
        if COMPLETION in columns:
            completions = list(columns[COMPLETION])
        else:
            texts = tokenizer.batch_decode(columns["completion_ids"], skip_special_tokens=True)
            completions = [assistant(text) for text in texts]
        read = {key: [row.get(key) for row in rows] for key in rows[0]}
        try:
            grader.grade_ahead(completions, read)
        except Exception as exc:  # the round's reward call grades what this could not
            log.warning("grading ahead failed (%s: %s); the step grades its batch itself", type(exc).__name__, exc)

    return grade
