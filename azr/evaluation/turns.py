"""Evaluation with execution feedback (`azr eval --turns N`, `eval.turns`): LiveCodeBench's self-repair scenario.

Each sample is an episode of the feedback environment (`azr.envs.FeedbackEnvironment`), played by the episode runner
(`azr.rollouts.play_replies`) with the evaluation's sampler: turn 1 is the plain attempt; while its program fails a
public test and turns remain, the failures come back as a new user message and the model answers again; with
`feedback.stop_on_pass` a sample whose program passes every public test stops there and keeps that program for the
later turns. Once every episode has ended, each turn's program is graded on the task's hidden tests alone (so no
program runs its hidden tests before a later turn is asked, and nothing it leaves behind can reach a prompt), and
pass@1 after each turn and the share of turn-1 failures repaired by turn k (`turn_summary`, through
`azr.envs.turn_rates`) are measured on tests the model never saw. A sample that could not be generated or graded
at any turn is not graded as a whole (a re-run retries it).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Sequence
from typing import Any

from azr.config import FeedbackConfig, SandboxConfig
from azr.data import Problem
from azr.envs import PUBLIC, FeedbackEnvironment, TaskPrompt, turn_rates
from azr.evaluation.records import graded
from azr.evaluation.samplers import Draws, Generated
from azr.evaluation.samples import RETRIED
from azr.prompts import AnswerFormat
from azr.rewards import CodeGrader, hidden_task, limits_from_config, pool_from_config
from azr.rollouts import ENV, Episode, Limits, OneProcess, Processes, Reply, play_replies, start_groups
from azr.sandbox import ExecutionProvider


def scored_problems(problems: Sequence[Problem]) -> tuple[list[Problem], list[str]]:
    """(the problems with hidden tests, the ids of those without): only the first can be scored with feedback."""
    kept = [p for p in problems if hidden_task(p.task) is not None]
    return kept, [p.id for p in problems if hidden_task(p.task) is None]


def run_turns(
    items: Sequence[tuple[Problem, int]],
    draws: Draws,
    turns: int,
    feedback: FeedbackConfig,
    sandbox: SandboxConfig,
    answer_format: AnswerFormat,
    timings: dict[str, float],
    pool: ExecutionProvider | None = None,
    processes: Processes = OneProcess(),
    versions: set[int] | None = None,
) -> list[dict[str, Any]]:
    """One record per (problem, index) item (as `azr.evaluation.records.graded` writes, its figures the final
    turn's, on the hidden tests) with `turns`: each turn's completion, hidden-test verdict, public-test verdict and
    the feedback it got. With several `processes` (a run's ranks), each plays its own items and samples in step with
    the others. `versions`, where given, collects the policy versions that drew a turn (where the sampler says)."""
    pool = pool or pool_from_config(sandbox)
    grader = CodeGrader(pool, limits_from_config(sandbox), answer_format)
    env = FeedbackEnvironment(grader, dataclasses.replace(feedback, max_turns=turns))
    episodes = [group[0] for group in start_groups(env, [TaskPrompt.of(p.task) for p, _ in items], None, 1)]
    for episode, (_, index) in zip(episodes, items, strict=True):
        episode.sample = index
    item_of = {id(e): k for k, e in enumerate(episodes)}

    def reply(batch: list[Episode]) -> list[Reply]:
        started, drawn = time.monotonic(), list[Generated]()
        for start in range(0, len(batch), draws.chunk):
            part = batch[start : start + draws.chunk]
            drawn += draws.sample([items[item_of[id(e)]] for e in part], [list(e.messages) for e in part])
        timings["generation_s"] += time.monotonic() - started
        if versions is not None:
            versions.update(g.version for g in drawn if g.version is not None)
        return [_reply(g) for g in drawn]

    started, generated_before = time.monotonic(), timings["generation_s"]
    play_replies(env, episodes, reply, Limits(max_turns=turns), processes)
    timings["grading_s"] += (time.monotonic() - started) - (timings["generation_s"] - generated_before)
    return _grade_turns(items, episodes, draws.mode, sandbox, answer_format, timings, pool)


def _reply(generated: Generated) -> Reply:
    if generated.text is None:
        return Reply({"role": "assistant", "content": ""}, "error", error=generated.error or "no reply")
    return Reply({"role": "assistant", "content": generated.text}, completion_tokens=generated.tokens or 0)


def _grade_turns(
    items: Sequence[tuple[Problem, int]],
    episodes: Sequence[Episode],
    mode: str,
    sandbox: SandboxConfig,
    answer_format: AnswerFormat,
    timings: dict[str, float],
    pool: ExecutionProvider,
) -> list[dict[str, Any]]:
    """Every turn's program of every episode graded on its task's hidden tests, in one batch after all have ended."""
    hidden = {p.id: dataclasses.replace(p, task=hidden_task(p.task)) for p, _ in items}
    rows, where = [], []
    for k, ((problem, index), episode) in enumerate(zip(items, episodes, strict=True)):
        answers = [t.text for t in episode.policy_turns]
        for turn, text in enumerate(answers):
            rows.append((hidden[problem.id], index, text, mode, None))
            where.append((k, turn))
        if episode.finish_reason == "error":  # the request of its next turn failed: retried on a re-run
            rows.append((hidden[problem.id], index, None, mode, episode.error))
            where.append((k, len(answers)))
    history: list[list[dict[str, Any]]] = [[] for _ in items]
    final: list[dict[str, Any] | None] = [None] * len(items)
    for (k, turn), record in zip(where, graded(rows, sandbox, answer_format, timings, pool), strict=True):
        entry = {"turn": turn + 1, "completion": record["completion"], "passed": record["passed"]}
        entry |= {"status": record["status"], "tests_passed": record["tests_passed"]}
        entry |= {"tests_total": record["tests_total"], **_public(episodes[k], turn)}
        history[k].append(entry)
        if final[k] is None or final[k]["status"] not in RETRIED:  # type: ignore[index]
            final[k] = record  # the last turn's, or the first that could not be graded
    out = []
    for k, record in enumerate(final):
        assert record is not None  # every episode has a turn: an answer, or the request that failed
        out.append({**record, "turns": history[k]})
    return out


def _public(episode: Episode, turn: int) -> dict[str, Any]:
    """A policy turn's verdict on the public tests and the feedback shown after it (None when no turn followed)."""
    policy = [i for i, t in enumerate(episode.turns) if t.kind != ENV]
    if turn >= len(policy):  # the request that failed
        return {"public_passed": None, "feedback": None}
    at = policy[turn]
    check = episode.turns[at].info.get(PUBLIC) or {}
    shown = None
    if turn + 1 < len(policy) and episode.turns[at + 1].kind == ENV:
        shown = str(episode.turns[at + 1].messages[0]["content"])
    return {"public_passed": check.get("passed"), "feedback": shown}  # type: ignore[union-attr]


def turn_summary(records: Sequence[dict[str, Any]], turns: int) -> dict[str, Any]:
    """Per turn k: pass@1 on the hidden tests (`azr.envs.turn_rates`: the mean over problems of each problem's share
    of samples whose program at turn k passes; a sample that stopped keeps its last program), the samples still
    going, and the share of turn-1 failures whose program passes by turn k (`repaired`). Samples not graded are
    left out."""
    scored = [r for r in records if r.get("status") not in RETRIED and r.get("turns")]
    verdicts = [[bool(e["passed"]) for e in r["turns"]] for r in scored]
    rates = turn_rates(verdicts, [r["task_id"] for r in scored], turns)
    by_turn: list[dict[str, Any]] = []
    for k, rate in enumerate(rates, 1):
        feedback = [len(e["feedback"]) for r in scored for e in r["turns"][k - 1 : k] if e.get("feedback")]
        by_turn.append(
            {
                "turn": k,
                "pass@1": None if rate["pass_rate"] is None else round(rate["pass_rate"], 4),
                "samples_attempted": sum(len(r["turns"]) >= k for r in scored),
                "repaired": None if rate["repaired"] is None else round(rate["repaired"], 4),
                "feedback_chars_mean": round(statistics.fmean(feedback), 1) if feedback else None,
            }
        )
    failures = sum(not v[0] for v in verdicts)
    return {"turns": turns, "samples": len(scored), "turn_1_failures": failures, "by_turn": by_turn}
