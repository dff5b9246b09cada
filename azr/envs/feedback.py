"""Execution feedback as an environment: the policy answers, the program runs on the task's public tests in the
sandbox, and while any fails the verdicts come back as the next user turn; the final answer is scored on the hidden
tests only (`Task.split_tests`). Hidden tests are never read before scoring, so no observation can show them.
The runner (`azr.rollouts.play`) samples and tokenizes; GRPO reads the episodes through
`azr.training.episodes.feedback`.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from azr.config import FeedbackConfig
from azr.data import Task
from azr.envs.scoring import score_answers
from azr.envs.task import TaskPrompt
from azr.prompts import parse_answer
from azr.rewards import (
    EPISODE_TURNS,
    PUBLIC_FIRST,
    PUBLIC_LAST,
    CodeGrader,
    Rubric,
    grade_many,
    hidden_task,
    public_feedback_many,
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
        return self.respond_many([episode], [text])[0]

    def respond_many(self, episodes: Sequence[Episode], texts: Sequence[str]) -> list[list[Message] | None]:
        """`respond` for one turn of many episodes: their public tests in one batch, side by side in the pool."""
        grader = self.grader
        pairs = [(_task(e), parse_answer(t, grader.answer_format).code) for e, t in zip(episodes, texts, strict=True)]
        checks = public_feedback_many(pairs, self.feedback, grader.pool, grader.limits)
        out: list[list[Message] | None] = []
        for episode, (passed, shown, fraction) in zip(episodes, checks, strict=True):
            episode.turns[-1].info[PUBLIC] = {"passed": passed, "fraction": fraction, "feedback": shown}
            if passed and self.feedback.stop_on_pass:
                out.append(None)
            else:
                out.append(
                    [{"role": "user", "content": shown or "Your program passed every public test. Give it again."}]
                )
        return out

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


def hidden_verdicts(
    grader: CodeGrader,
    tasks: Sequence[Task],
    answers: Sequence[Sequence[str | None]],
    known: Sequence[bool | None] | None = None,
) -> list[list[bool | None]]:
    """Each sample's answers, one per policy turn, graded on its task's hidden tests (`tasks[i]` with all its tests:
    only the hidden ones are run), in one batch on `grader`'s pool: True passed, False failed (no code included),
    None not graded (the sandbox failed). `known[i]`, where given, is the last answer's verdict already at hand (GRPO's
    `tests` reward graded it), which is not graded again. Run after the episodes have ended, never between turns, so
    nothing a program leaves behind reaches an observation."""
    verdicts: list[list[bool | None]] = [[False] * len(texts) for texts in answers]
    asked: list[tuple[int, int, Task, str]] = []
    for i, (task, texts) in enumerate(zip(tasks, answers, strict=True)):
        for k, text in enumerate(texts):
            if known is not None and k == len(texts) - 1:
                verdicts[i][k] = known[i]
                continue
            code = parse_answer(text or "", grader.answer_format).code
            if code is not None:
                asked.append((i, k, hidden(task), code))
    grades = grade_many([(task, code) for _, _, task, code in asked], grader.pool, grader.limits)
    for (i, k, _, _), grade in zip(asked, grades, strict=True):
        verdicts[i][k] = None if grade.status == "error" else grade.status == "passed"
    return verdicts


def turn_rates(verdicts: Sequence[Sequence[bool | None]], keys: Sequence[str], turns: int) -> list[dict[str, Any]]:
    """The per-turn pass rate, computed here only (GRPO's `feedback/*` metrics, the train pass rate, `azr eval
    --turns`). `verdicts[i]` is sample i's hidden-test verdict after each of its turns (`hidden_verdicts`'s), `keys[i]`
    its task. Per turn k, 1 to `turns`: `pass_rate`, the mean over tasks of each task's share of samples whose
    standing program passes (a sample that stopped keeps its last program; one not graded at k is left out), and
    `repaired` (from turn 2), the share of turn-1 failures whose standing program passes by turn k."""
    out = []
    for k in range(1, turns + 1):
        by_task: dict[str, list[bool]] = {}
        fixed: list[bool] = []
        for key, seen in zip(keys, verdicts, strict=True):
            if not seen:
                continue
            standing = seen[min(k, len(seen)) - 1]
            if standing is None:
                continue
            by_task.setdefault(key, []).append(standing)
            if k > 1 and seen[0] is False:
                fixed.append(standing)
        rate = statistics.fmean(sum(v) / len(v) for v in by_task.values()) if by_task else None
        repaired = sum(fixed) / len(fixed) if fixed else None
        out.append({"turn": k, "pass_rate": rate, "repaired": repaired if k > 1 else None})
    return out


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
