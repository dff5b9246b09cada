"""Execution feedback as an environment: the policy answers, the program runs on the task's public tests in the
sandbox, and while any fails the verdicts come back as the next user turn; the final answer is scored on the hidden
tests only (`Task.split_tests`). Hidden tests are never read before scoring, so no observation can show them.
The runner (`azr.rollouts.play`) samples and tokenizes; GRPO reads the episodes through
`azr.training.episodes.feedback`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from azr.config import FeedbackConfig
from azr.data import Task
from azr.envs.scoring import score_answers
from azr.envs.task import TaskPrompt
from azr.prompts import parse_answer
from azr.rewards import (
    EPISODE_TURNS,
    NO_CODE,
    PUBLIC_FIRST,
    PUBLIC_LAST,
    CodeGrader,
    Rubric,
    grade_many,
    hidden_task,
    public_task,
    render_feedback,
)
from azr.rollouts import Episode, Message

PUBLIC = "public"  # a policy turn's info: {"passed", "fraction", "feedback"} on the public tests


class FeedbackEnvironment:
    """Up to `feedback.max_turns` answers an episode (the runner's `Limits.max_turns`); `respond` checks each answer
    on the public tests (`turn.info["public"]`) and answers with the feedback (`azr.rewards.render_feedback`) while
    any fails, or ends the episode once all pass (`feedback.stop_on_pass`). `score` grades the final answer on the
    hidden tests with `rubric`."""

    tools = None

    def __init__(self, grader: CodeGrader, feedback: FeedbackConfig, rubric: Rubric | None = None):
        self.grader, self.feedback, self.rubric = grader, feedback, rubric

    def start(self, task: TaskPrompt) -> list[Message]:
        return [dict(m) for m in task.messages]

    def respond(self, episode: Episode, text: str) -> list[Message] | None:
        public = public_task(_task(episode))
        code = parse_answer(text, self.grader.answer_format).code
        if code is None:
            passed, fraction, shown = False, 0.0, NO_CODE
        elif not public.tests:  # nothing to show: the episode is its one answer
            passed, fraction, shown = True, 1.0, ""
        else:
            (grade,) = grade_many([(public, code)], self.grader.pool, self.grader.limits, detail=True)
            passed, fraction = grade.passed, grade.tests_passed / max(grade.tests_total, 1)
            shown = "" if passed else render_feedback(grade, self.feedback)
        episode.turns[-1].info[PUBLIC] = {"passed": passed, "fraction": fraction, "feedback": shown}
        if passed and self.feedback.stop_on_pass:
            return None
        return [{"role": "user", "content": shown or "Your program passed every public test. Give it again."}]

    def score(self, episodes: Sequence[Episode]) -> None:
        if self.rubric is None:
            raise ValueError("FeedbackEnvironment: built without a rubric, it cannot score")
        answers, tasks = [e.answer for e in episodes], [hidden(_task(e)) for e in episodes]
        score_answers(self.rubric, episodes, answers, tasks, shaping_columns(episodes))


def public_checks(episode: Episode) -> list[dict[str, Any]]:
    """Each policy turn's verdict on the public tests, in order (`FeedbackEnvironment.respond`'s)."""
    return [dict(t.info[PUBLIC]) for t in episode.policy_turns if PUBLIC in t.info]  # type: ignore[arg-type]


def shaping_columns(episodes: Sequence[Episode]) -> dict[str, list[Any]]:
    """What feedback's shaping reward reads of each episode (`azr.rewards.EpisodeReward`): the answers it took and
    the public pass fraction of its first and last, wherever an episode is scored (GRPO's rows, `azr gen`'s records)."""
    publics = [public_checks(e) for e in episodes]
    return {
        EPISODE_TURNS: [len(e.policy_turns) for e in episodes],
        PUBLIC_FIRST: [p[0]["fraction"] if p else 0.0 for p in publics],
        PUBLIC_LAST: [p[-1]["fraction"] if p else 0.0 for p in publics],
    }


def hidden(task: Task) -> Task:
    """`task` with its hidden tests only (`azr.rewards.hidden_task`): what a feedback episode is scored on. A task
    without any is an error here: GRPO and the pass rate leave such tasks out before an episode starts."""
    found = hidden_task(task)
    if found is None:
        raise ValueError(f"{task.id}: no hidden test to score a feedback episode on")
    return found


def _task(episode: Episode) -> Task:
    task = episode.task.task if isinstance(episode.task, TaskPrompt) else None
    if task is None:
        raise ValueError(f"episode of {episode.task_id}: started without its task, its public tests are unknown")
    return task
