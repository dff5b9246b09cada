"""Evaluation with execution feedback (`azr eval --turns N`, `eval.turns`): LiveCodeBench's self-repair scenario.

Turn 1 is the plain attempt. When its program fails a public test and turns remain, the failures
(`azr.rewards.public_feedback`) come back as a new user message after the answer, and the model answers again;
with `feedback.stop_on_pass` a sample whose program passes every public test stops there and keeps that program
for the later turns. Every turn's program is scored on the task's hidden tests alone, so pass@1 after each turn
and the share of turn-1 failures repaired by turn k (`turn_summary`) are measured on tests the model never saw.
A sample that could not be generated or graded at any turn is not graded as a whole (a re-run retries it).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from azr.config import FeedbackConfig, SandboxConfig
from azr.data import Problem
from azr.envs import turn_rates
from azr.evaluation.records import graded, program_for
from azr.evaluation.samplers import Conversation, Generated, ItemSampler
from azr.evaluation.samples import RETRIED
from azr.prompts import AnswerFormat, chat_messages
from azr.rewards import hidden_task, limits_from_config, pool_from_config, public_feedback_many
from azr.sandbox import ExecutionProvider


def scored_problems(problems: Sequence[Problem]) -> tuple[list[Problem], list[str]]:
    """(the problems with hidden tests, the ids of those without): only the first can be scored with feedback."""
    kept = [p for p in problems if hidden_task(p.task) is not None]
    return kept, [p.id for p in problems if hidden_task(p.task) is None]


def run_turns(
    items: Sequence[tuple[Problem, int]],
    first: Sequence[Generated],
    sampler: ItemSampler,
    turns: int,
    feedback: FeedbackConfig,
    sandbox: SandboxConfig,
    answer_format: AnswerFormat,
    timings: dict[str, float],
    pool: ExecutionProvider | None = None,
    widest: Callable[[int], int] = lambda count: count,
) -> list[dict[str, Any]]:
    """One record per (problem, index) item (as `azr.evaluation.records.graded` writes, its figures the final
    turn's, on the hidden tests) with `turns`: each turn's completion, hidden-test verdict, public-test verdict and
    the feedback it got. `first` is each item's turn-1 sample; later turns are drawn from `sampler`. `widest` gives,
    for this process's count of samples going on, the largest over the run's ranks: each rank then samples as many
    (padding with a repeat it throws away), as a model sharded over the ranks needs every rank in every forward."""
    pool = pool or pool_from_config(sandbox)
    limits = limits_from_config(sandbox)
    hidden = {p.id: dataclasses.replace(p, task=hidden_task(p.task)) for p, _ in items}
    chats: list[Conversation] = [chat_messages(p.task.prompt) for p, _ in items]
    history: list[list[dict[str, Any]]] = [[] for _ in items]
    final: list[dict[str, Any] | None] = [None] * len(items)
    active = list(range(len(items)))
    texts: dict[int, Generated] = dict(enumerate(first))
    for turn in range(1, turns + 1):
        rows = [(hidden[items[i][0].id], items[i][1], texts[i].text, sampler.mode, texts[i].error) for i in active]
        records = list(graded(rows, sandbox, answer_format, timings, pool))
        last = turn == turns
        codes = [program_for(items[i][0], texts[i].text or "", sampler.mode, answer_format) for i in active]
        t0 = time.monotonic()
        pairs = [(items[i][0].task, code) for i, code in zip(active, codes, strict=True)]
        shown = public_feedback_many(pairs, feedback, pool, limits)
        timings["grading_s"] += time.monotonic() - t0
        going = []
        for i, record, (public_passed, text) in zip(active, records, shown, strict=True):
            entry = {"turn": turn, "completion": texts[i].text, "passed": record["passed"], "status": record["status"]}
            entry |= {"tests_passed": record["tests_passed"], "tests_total": record["tests_total"]}
            entry |= {"public_passed": public_passed, "feedback": None}
            history[i].append(entry)
            final[i] = record
            if record["status"] in RETRIED or last or (public_passed and feedback.stop_on_pass):
                continue
            message = text or "Your program passed every public test. Give your final program again."
            entry["feedback"] = message
            answer = {"role": "assistant", "content": texts[i].text or ""}
            chats[i] = [*chats[i], answer, {"role": "user", "content": message}]
            going.append(i)
        active = going
        width = widest(len(active)) if not last else 0
        if not width:
            break
        padded = active + [active[0] if active else 0] * (width - len(active))
        t0 = time.monotonic()
        for start in range(0, len(padded), sampler.chunk):
            part = padded[start : start + sampler.chunk]
            drawn = sampler.sample([items[i] for i in part], [chats[i] for i in part])
            for offset, (i, generated) in enumerate(zip(part, drawn, strict=True)):
                if start + offset < len(active):
                    texts[i] = generated
        timings["generation_s"] += time.monotonic() - t0
    out = []
    for i, record in enumerate(final):
        assert record is not None  # every item was graded at turn 1
        out.append({**record, "turns": history[i]})
    return out


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
