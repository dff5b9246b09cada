"""Sampling a local model on tasks and scoring what it wrote: the train-set pass rate `azr train` measures before
and after GRPO (with GRPO's own sampling settings), and the local sampler `azr eval` uses. The completions come
through the rollout seam (`azr.rollouts.sample_groups`: one group per task); `Sampling` is the seam's.

Samples whose code could not be graded (sandbox infrastructure errors) are left out of every rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from azr.data import GRADING_COLUMNS, Task
from azr.prompts import chat_messages
from azr.rewards import Rubric
from azr.rollouts import ChatTokens, GenerateSampler, Prompt, Sampling, ScoredGroup, TokenSampler, sample_groups

__all__ = ["Sampling", "generate_completions", "sampled_groups", "score_completions"]


def generate_completions(model, tokenizer, tasks: Sequence[Task], sampling: Sampling, template_kwargs: dict) -> list:
    """`sampling.n` completions per task (grouped by task), sampled with the model's own `generate` through the
    rollout seam (`azr.rollouts.GenerateSampler`: from `sampling.seed`, the torch generators restored after)."""
    chat = ChatTokens(tokenizer, template_kwargs)
    groups = sampled_groups(GenerateSampler(model, tokenizer), chat, tasks, sampling)
    return [text for group in groups for text in group.texts]


def sampled_groups(
    sampler: TokenSampler, chat: ChatTokens, tasks: Sequence[Task], sampling: Sampling
) -> list[ScoredGroup]:
    """One group of `sampling.n` completions per task from `sampler`, each task's prompt as the training sees it."""
    return sample_groups(sampler, chat, [Prompt(t.id, chat_messages(t.prompt)) for t in tasks], sampling)


def score_completions(rubric: Rubric, tasks: Sequence[Task], completions: list) -> dict[str, Any]:
    """Pass rate and weighted mean reward under `rubric` (built to score; `Rubric.score`, as GRPO's episodes are
    scored) over completions grouped `len(completions) // len(tasks)` per task, each completion's reward weighed as
    GRPO weighs it (`Rubric.total`). A completion the sandbox could not grade counts in neither; one a reward could
    not score (a custom reward's infrastructure failure) is left out of the mean reward."""
    if rubric.grader is None:
        raise ValueError("score_completions: the rubric was only checked; build it with a sandbox to score")
    n = len(completions) // max(len(tasks), 1)
    rows = [t.grading_columns() | {"task_id": t.id} for t in tasks for _ in range(n)]
    columns: dict[str, Any] = {key: [row[key] for row in rows] for key in (*GRADING_COLUMNS, "task_id")}
    scored = rubric.score(completions, columns)
    graded = [s for s in scored if s.status != "error"]  # not graded: neither a pass nor a failure
    totals = [s.total for s in graded if s.total is not None]
    return {
        "completions": len(completions),
        "graded": len(graded),
        "pass_rate": sum(s.status == "passed" for s in graded) / len(graded) if graded else None,  # None: JSON null
        "reward": sum(totals) / len(totals) if totals else None,
        "tasks_solved": len({tasks[i // n].id for i, s in enumerate(scored) if s.status == "passed"}) if n else 0,
    }
