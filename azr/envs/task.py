"""A task as an environment is asked to play it: its id, the conversation the policy first sees (the data set's
prompt, or a training row's: a hinted retry's, say) and the task itself, whose tests score the episode.
"""

from __future__ import annotations

from dataclasses import dataclass

from azr.data import Task
from azr.prompts import chat_messages
from azr.rollouts import Message


@dataclass(frozen=True)
class TaskPrompt:
    """`messages`: the first messages; `task`: the task graded (None where only the prompt is known, e.g. a GRPO
    row that TRL's reward functions grade from its own columns)."""

    id: str
    messages: list[Message]
    task: Task | None = None

    @classmethod
    def of(cls, task: Task) -> TaskPrompt:
        """A data set's task, asked as training asks it (the system prompt and the task's prompt)."""
        return cls(task.id, chat_messages(task.prompt), task)
