"""Execution feedback as an environment: the policy answers, the program runs on the task's public tests in the
sandbox, and while any fails the verdicts come back as the next user turn; the final answer is scored on the hidden
tests only (`Task.split_tests`). Hidden tests are never read before scoring, so no observation can show them.
The runner (`azr.rollouts.play`) samples and tokenizes; GRPO reads the episodes through `azr.training.feedback`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from azr.config import FeedbackConfig
from azr.data import Task
from azr.envs.scoring import score_answers
from azr.envs.task import TaskPrompt
from azr.prompts import Answer
from azr.rewards import CodeGrader, Grade, Rubric, grade_many
from azr.rollouts import Episode, Message

PUBLIC = "public"  # a policy turn's info: {"passed", "fraction", "feedback"} on the public tests


class FeedbackEnvironment:
    """Up to `feedback.max_turns` answers an episode (the runner's `Limits.max_turns`); `respond` checks each answer
    on the public tests (`turn.info["public"]`) and answers with the feedback while any fails, or ends the episode
    once all pass (`feedback.stop_on_pass`). `score` grades the final answer on the hidden tests with `rubric`."""

    tools = None

    def __init__(self, grader: CodeGrader, feedback: FeedbackConfig, rubric: Rubric | None = None):
        self.grader, self.feedback, self.rubric = grader, feedback, rubric

    def start(self, task: TaskPrompt) -> list[Message]:
        return [dict(m) for m in task.messages]

    def respond(self, episode: Episode, text: str) -> list[Message] | None:
        task = _task(episode)
        public, _ = task.split_tests()
        answer = self.grader_answer(text)
        grade = None
        if answer.code is not None and public:
            (grade,) = grade_many(
                [(dataclasses.replace(task, tests=public), answer.code)], self.grader.pool, self.grader.limits
            )
        passed, shown = render(public, answer, grade, self.feedback.max_failures, self.feedback.max_chars)
        fraction = grade.tests_passed / grade.tests_total if grade is not None and grade.tests_total else 0.0
        episode.turns[-1].info[PUBLIC] = {"passed": passed, "fraction": fraction, "feedback": shown}
        if passed and self.feedback.stop_on_pass:
            return None
        return [{"role": "user", "content": shown}]

    def grader_answer(self, text: str) -> Answer:
        from azr.prompts import parse_answer

        return parse_answer(text, self.grader.answer_format)

    def score(self, episodes: Sequence[Episode]) -> None:
        if self.rubric is None:
            raise ValueError("FeedbackEnvironment: built without a rubric, it cannot score")
        score_answers(self.rubric, episodes, [e.answer for e in episodes], [hidden_task(_task(e)) for e in episodes])


def hidden_task(task: Task) -> Task:
    """`task` with its hidden tests only: what a feedback episode is scored on."""
    return dataclasses.replace(task, tests=task.split_tests()[1])


def _task(episode: Episode) -> Task:
    task = episode.task.task if isinstance(episode.task, TaskPrompt) else None
    if task is None:
        raise ValueError(f"episode of {episode.task_id}: started without its task, its public tests are unknown")
    return task


def render(
    public: Sequence[str], answer: Answer, grade: Grade | None, max_failures: int, max_chars: int
) -> tuple[bool, str]:
    """(every public test passed, the feedback shown): the first `max_failures` failing tests, each with its
    reason, every field cut to `max_chars`."""
    if not public:
        return True, ""
    if grade is None:
        return False, f"No program was run: {(answer.problem or 'no code block')[:max_chars]}."
    if grade.status == "passed":
        return True, ""
    failed = [i for i, ok in enumerate(grade.per_test) if not ok] or list(range(len(public)))
    lines = [f"Your program failed {len(failed)} of {len(public)} public tests."]
    reasons = {int(m.group(1)): m.group(2) for f in grade.failures if (m := _FAILURE.match(f))}
    for i in failed[:max_failures]:
        lines.append(f"Test: {public[i][:max_chars]}")
        lines.append(f"Error: {reasons.get(i, grade.status)[:max_chars]}")
    return False, "\n".join(lines)


_FAILURE = re.compile(r"test (\d+): (.*)", re.DOTALL)
