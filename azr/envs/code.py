"""Today's code task as an environment: one policy turn, the answer graded on the task's tests through the run's
`Rubric`. GRPO plays it through TRL's `rollout_func` (TRL's reward functions, the same rubric, score the rows);
`azr gen` and evaluation score it here.
"""

from __future__ import annotations

from collections.abc import Sequence

from azr.envs.scoring import score_answers
from azr.envs.task import TaskPrompt
from azr.rewards import Rubric
from azr.rollouts import Episode, Message


class CodeEnvironment:
    """One turn: the task's prompt in, the answer out, no observation. `rubric` None: the episodes are scored
    elsewhere (GRPO's reward functions)."""

    tools = None

    def __init__(self, rubric: Rubric | None = None):
        self.rubric = rubric

    def start(self, task: TaskPrompt) -> list[Message]:
        return [dict(m) for m in task.messages]

    def respond(self, episode: Episode, text: str) -> list[Message] | None:
        return None

    def score(self, episodes: Sequence[Episode]) -> None:
        if self.rubric is None:
            raise ValueError("CodeEnvironment: built without a rubric, it cannot score")
        tasks = [_task(e) for e in episodes]
        score_answers(self.rubric, episodes, [e.answer for e in episodes], tasks)


def _task(episode: Episode):
    task = episode.task.task if isinstance(episode.task, TaskPrompt) else None
    if task is None:
        raise ValueError(f"episode of {episode.task_id}: started without its task, it cannot be graded")
    return task
