"""Scoring episodes through the run's one `Rubric`: each episode's answer graded against its task's tests, every
reward function's value, the weighted total, and the grader's verdict (status, tests passed, reason) in
`episode.info["grade"]`. An episode the policy failed (`finish_reason` error) is not graded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from azr.data import GRADING_COLUMNS, Task
from azr.rewards import Rubric
from azr.rollouts import Episode

NOT_GRADED = {"status": "not_graded", "passed": False, "reason": "the episode failed"}


def task_columns(tasks: Sequence[Task]) -> dict[str, list[object]]:
    """The columns the reward functions read, one row per task (what TRL passes from a GRPO row)."""
    rows = [t.grading_columns() for t in tasks]
    return {key: [row[key] for row in rows] for key in GRADING_COLUMNS} | {"task_id": [t.id for t in tasks]}


def score_answers(
    rubric: Rubric,
    episodes: Sequence[Episode],
    answers: Sequence[str],
    tasks: Sequence[Task],
    columns: Mapping[str, Sequence[object]] | None = None,
) -> None:
    """Grade `answers` (one per episode) against `tasks` in one batch (`Rubric.score`) and set each episode's
    `rewards` (with `total`), `reward` and `info["grade"]`. `columns` (one value per episode) are read by the
    rewards beside the tasks' own (an environment's, such as feedback's shaping)."""
    if rubric.grader is None:
        raise ValueError("score_answers: the rubric was only checked; build it with a sandbox to score")
    todo = [i for i, e in enumerate(episodes) if e.finish_reason != "error"]
    for i, episode in enumerate(episodes):
        if i not in todo:
            episode.info["grade"], episode.rewards, episode.reward = dict(NOT_GRADED), {}, None
    if not todo:
        return
    read = task_columns([tasks[i] for i in todo]) | {k: [v[i] for i in todo] for k, v in (columns or {}).items()}
    scored = rubric.score([answers[i] for i in todo], read)
    for i, one in zip(todo, scored, strict=True):
        details = {k: v for k, v in one.outcome.details().items() if k != "per_test"}
        episode = episodes[i]
        episode.rewards = {**one.values, "total": _rounded(one.total)}
        episode.reward = one.total
        episode.info["grade"] = {"status": details["status"], "passed": details["status"] == "passed", **details}


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
