"""GRPO with execution feedback (`rollouts.env: feedback`): TRL's `rollout_func` that plays each row as an episode of
`azr.envs.FeedbackEnvironment` through the episode runner and the trainer's own generation (HF generate, or the vLLM
backend), and hands TRL the whole transcript with `env_mask` (feedback tokens out of the loss) plus the columns the
rewards read (the final answer; turns and public pass fractions for the shaping reward). Also: its metrics per turn
and the public-overfit alarm (an observer of scored batches), the train pass rate per turn, and the SFT warm start's
repair transcripts. The reward itself is the rubric's, on the final answer and the hidden tests.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from azr.alarms import Alarm
from azr.config import FeedbackConfig
from azr.data import Task
from azr.envs import PUBLIC, FeedbackEnvironment, TaskPrompt, hidden_verdicts, shaping_columns, turn_rates
from azr.prompts import reference_answer
from azr.rewards import CodeGrader, Rubric, hidden_task
from azr.rollouts import ENV, POLICY, Episode, Limits, ScoredBatch, Turn, start_groups
from azr.training.episodes.rounds import COMPLETION, EpisodeRollouts, assistant

if TYPE_CHECKING:
    from azr.training.context import RunContext
    from azr.training.trl.private import GRPOTrainer

log = logging.getLogger(__name__)
PUBLIC_OVERFIT = "public_overfit"
# The transcript column an episode adds to its row (TRL merges a rollout's extra fields into the rows).
EPISODE = "feedback_episode"


def feedback_rollouts(ctx: RunContext) -> FeedbackRollout:
    """The feedback environment's `rollout_func` for a run (`azr.config.environments`): each row an episode (answer, the
    public tests' feedback, answer again), graded in the run's pool; metrics written on the main process."""
    tasks = {t.id: t for t in ctx.tasks}
    return FeedbackRollout(ctx.rewards.grader, ctx.cfg.feedback, tasks, ctx.metrics if ctx.ranks.main else None)


class FeedbackRollout:
    """TRL's `rollout_func` for `rollouts.env: feedback` (the runner over `FeedbackEnvironment`, through
    `azr.training.episodes.EpisodeRollouts`), and an observer of each scored batch.

    `metrics()` gives, since the last log: turns per episode, the pass rate on the hidden tests of the program
    standing after each turn (`feedback/pass_turn{k}`), the share of turn-1 failures passing after turn k
    (`feedback/repaired_turn{k}`), the public pass rate by turn, feedback tokens per episode, the public-overfit
    count (`alarms/public_overfit`: a final program that passes every public test and fails a hidden one), and where
    the rounds' time went (`feedback/generation_s`, `feedback/sandbox_s`)."""

    def __init__(
        self,
        grader: CodeGrader,
        feedback: FeedbackConfig,
        tasks: Mapping[str, Task],
        metrics: Any = None,
    ):
        self.grader, self.feedback, self.tasks = grader, feedback, dict(tasks)
        self.env = _Timed(FeedbackEnvironment(grader, feedback))
        self.metrics_writer = metrics
        self.stats: dict[str, list[float]] = defaultdict(list)
        self.verdicts: list[list[bool | None]] = []  # hidden-test verdicts by turn, and their tasks, since the last log
        self.keys: list[str] = []
        self.seconds: dict[str, float] = defaultdict(float)
        self.last: list[Episode] = []  # the last round's episodes (tests read them)
        limits = Limits(max_turns=feedback.max_turns)
        self.rollouts = EpisodeRollouts(self.env, None, self.tasks, limits, columns=self.columns)

    def __call__(self, prompts: list[Any], trainer: GRPOTrainer) -> dict[str, Any]:
        started, sandbox = time.perf_counter(), self.env.seconds
        out = self.rollouts(prompts, trainer)
        self.seconds["sandbox"] += self.env.seconds - sandbox
        self.seconds["generation"] += time.perf_counter() - started - (self.env.seconds - sandbox)
        self.last = self.rollouts.last
        return out

    @staticmethod
    def columns(episodes: Sequence[Episode]) -> dict[str, list[Any]]:
        """The columns the rewards read besides TRL's: the final answer (what they score, `COMPLETION`), the turns
        taken, the public pass fraction of the first and the last answer (the shaping reward's), and the transcript
        (the generation log's)."""
        return {
            COMPLETION: [assistant(e.answer) for e in episodes],
            **shaping_columns(episodes),
            EPISODE: [transcript(e) for e in episodes],
        }

    # ---------------------------------------------------------------------------------------- the observer
    def observe(self, batch: ScoredBatch) -> None:
        """Turns, feedback tokens and the public pass rate by turn of every episode; with the hidden tests' verdicts
        (the `tests` reward's, which came with the batch, for the final answer; earlier turns' programs graded here,
        in the run's pool) the pass rate by turn, repairs and the public-overfit alarm."""
        rows = batch.inputs
        if not rows or EPISODE not in rows[0]:
            return
        for row in rows:
            turns = row[EPISODE]
            self.stats["turns"].append(len(turns))
            self.stats["feedback_tokens"].append(sum(t.get("feedback_tokens", 0) for t in turns))
            for k in range(1, self.feedback.max_turns + 1):
                self.stats[f"public_pass_turn{k}"].append(float(bool(turns[min(k, len(turns)) - 1]["public_passed"])))
        if len(batch.details) == len(rows):
            self._hidden(batch)

    def _hidden(self, batch: ScoredBatch) -> None:
        rows = batch.inputs
        started = time.perf_counter()
        keys = [str(row.get("task_id") or "") for row in rows]
        finals = [details.get("status") for details in batch.details]
        verdicts = hidden_verdicts(
            self.grader,
            [self.tasks[key] for key in keys],
            [[turn["answer"] for turn in row[EPISODE]] for row in rows],
            known=[None if status == "error" else status == "passed" for status in finals],
        )
        self.seconds["sandbox"] += time.perf_counter() - started
        self.verdicts += verdicts
        self.keys += keys
        for i, row in enumerate(rows):
            if row[EPISODE][-1]["public_passed"] and verdicts[i][-1] is False:
                self._overfit(batch.step, row, batch.details[i])

    def _overfit(self, step: int, row: dict[str, Any], details: dict[str, Any]) -> None:
        self.stats["public_overfit"].append(1.0)
        if self.metrics_writer is not None:
            message = (
                f"an episode's final program on {row.get('task_id')} passes every public test but "
                f"{details.get('tests_passed', 0)} of {details.get('tests_total', 0)} hidden ones"
            )
            self.metrics_writer.write(Alarm(step, PUBLIC_OVERFIT, message).record() | {"task_id": row.get("task_id")})

    def metrics(self) -> dict[str, float]:
        """The statistics since the last call, as `feedback/*` keys (and `alarms/public_overfit`, a count)."""
        stats, self.stats = self.stats, defaultdict(list)
        seconds, self.seconds = self.seconds, defaultdict(float)
        verdicts, keys, self.verdicts, self.keys = self.verdicts, self.keys, [], []
        out: dict[str, float] = {"alarms/public_overfit": float(len(stats.pop("public_overfit", [])))}
        for key, values in stats.items():
            if values:
                out[f"feedback/{key}"] = round(sum(values) / len(values), 4)
        for rates in turn_rates(verdicts, keys, self.feedback.max_turns) if verdicts else []:
            k = rates["turn"]
            if rates["pass_rate"] is not None:
                out[f"feedback/pass_turn{k}"] = round(rates["pass_rate"], 4)
            if rates["repaired"] is not None:
                out[f"feedback/repaired_turn{k}"] = round(rates["repaired"], 4)
        for key, value in seconds.items():
            out[f"feedback/{key}_s"] = round(value, 4)
        return out


class _Timed:
    """The environment with the wall time of its answers (the public tests in the sandbox) summed."""

    def __init__(self, env: FeedbackEnvironment):
        self.env, self.seconds = env, 0.0
        self.tools = env.tools

    def start(self, task: TaskPrompt):
        return self.env.start(task)

    def respond(self, episode: Episode, text: str):
        return self.respond_many([episode], [text])[0]

    def respond_many(self, episodes: Sequence[Episode], texts: Sequence[str]):
        started = time.perf_counter()
        try:
            return self.env.respond_many(episodes, texts)
        finally:
            self.seconds += time.perf_counter() - started

    def score(self, episodes: Sequence[Episode]) -> None:
        self.env.score(episodes)


def transcript(episode: Episode) -> list[dict[str, Any]]:
    """The episode's turns as the generation log records them: each answer, whether it passed the public tests, and
    the feedback shown after it ('' after the last: an observation without ids was shown to no one)."""
    turns: list[dict[str, Any]] = []
    for k, turn in enumerate(episode.turns):
        if turn.kind == ENV:
            continue
        check = turn.info.get(PUBLIC, {})
        after = episode.turns[k + 1] if k + 1 < len(episode.turns) else None
        shown = after is not None and after.kind == ENV and bool(after.ids)
        turns.append(
            {
                "answer": turn.text,
                "public_passed": bool(check.get("passed")),  # type: ignore[union-attr]
                "feedback": str(after.messages[0]["content"]) if shown else "",  # type: ignore[union-attr]
            }
        )
    if turns:
        turns[0]["feedback_tokens"] = episode.env_tokens
    return turns


def measure_episodes(
    model: Any,
    tokenizer: Any,
    tasks: Sequence[Task],
    sampling: Any,
    rubric: Rubric,
    feedback: FeedbackConfig,
    template_kwargs: dict[str, Any],
) -> dict[str, Any]:
    """`sampling.n` feedback episodes per task from `model`'s own `generate` (seeded by `sampling.seed`): the pass
    rate on the hidden tests of the program standing after each turn (`pass_rate_turn{k}`), the share of turn-1
    failures passing after turn k (`repaired_turn{k}`), mean turns, and `pass_rate` / `reward` (the rubric's) of
    the final answers, as GRPO scores them. Tasks without a hidden test are left out."""
    from azr.rollouts import ChatTokens, GenerateSampler, run_groups

    grader = rubric.grader
    if grader is None:
        raise ValueError("measure_episodes: the rubric was only checked; build it with a sandbox to score")
    kept = [t for t in tasks if hidden_task(t) is not None]
    by_id = {t.id: t for t in kept}
    env = FeedbackEnvironment(grader, feedback, rubric)
    groups = run_groups(
        env,
        [TaskPrompt.of(t) for t in kept],
        GenerateSampler(model, tokenizer),
        ChatTokens(tokenizer, template_kwargs),
        sampling,
        Limits(max_turns=feedback.max_turns),
    )
    episodes = [e for group in groups for e in group]
    graded = [e for e in episodes if e.reward is not None]
    statuses = [str(e.info.get("grade", {}).get("status")) for e in episodes]  # type: ignore[union-attr]
    result: dict[str, Any] = {
        "completions": len(episodes),
        "graded": len(graded),
        "pass_rate": sum(s == "passed" for s in statuses) / len(graded) if graded else None,
        "reward": sum(e.reward for e in graded) / len(graded) if graded else None,  # type: ignore[misc]
        "tasks_solved": len({e.task_id for e, s in zip(episodes, statuses, strict=True) if s == "passed"}),
    }
    answers = [[turn.text for turn in e.policy_turns] or [None] for e in episodes]
    known = [None if status in ("error", "None") else status == "passed" for status in statuses]  # the final answer's
    verdicts = hidden_verdicts(grader, [by_id[e.task_id] for e in episodes], answers, known)
    for rates in turn_rates(verdicts, [e.task_id for e in episodes], feedback.max_turns):
        k = rates["turn"]
        result[f"pass_rate_turn{k}"] = rates["pass_rate"]
        if k > 1:
            result[f"repaired_turn{k}"] = rates["repaired"]
    result["turns"] = sum(len(e.policy_turns) for e in episodes) / len(episodes) if episodes else None
    return result


def repair_transcripts(
    tasks: Sequence[Task], near_misses: dict[str, list[str]], grader: CodeGrader, feedback: FeedbackConfig
) -> list[tuple[Task, str, str]]:
    """(task, near miss, feedback) for every near miss that fails its task's public tests, the feedback being what
    `FeedbackEnvironment` shows after it: the SFT warm start's repair transcripts. Near misses that pass the public
    tests (and fail only hidden ones) get no feedback in an episode, so none here either."""
    env = FeedbackEnvironment(grader, dataclasses.replace(feedback, stop_on_pass=True))
    out = []
    for task in tasks:
        if not task.solution or not task.split_tests()[1]:
            continue
        for miss in near_misses.get(task.id, []):
            (episode,) = start_groups(env, [TaskPrompt.of(task)], None, 1)[0]
            answer = reference_answer(miss, task.entry_point)
            episode.turns.append(Turn(POLICY, [{"role": "assistant", "content": answer}], text=answer))
            observation = env.respond(episode, answer)
            if observation is not None:
                out.append((task, miss, str(observation[0]["content"])))
    return out
