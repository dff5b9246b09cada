"""GRPO with execution feedback (`rollouts.env: feedback`): TRL's `rollout_func` that plays each row's episode
(`azr.rollouts.run_episodes`) through the trainer's own generation (HF generate, or the vLLM backend in adapter
mode), checks every answer on the row's public tests in the run's sandbox, and hands TRL the whole transcript with
`env_mask` (feedback tokens out of the loss). Its metrics per turn and the public-overfit alarm are here too; the
episode's reward (the final answer on the hidden tests) is the rubric's, read by `AZRGRPOTrainer`.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from azr.alarms import Alarm
from azr.config import FeedbackConfig
from azr.data import Task
from azr.prompts import Answer, chat_messages, parse_answer
from azr.rewards import EPISODE_TURNS, PUBLIC_FIRST, PUBLIC_LAST, CodeGrader, Grade, grade_many
from azr.rollouts import Check, Episode, FeedbackTokens, ScoredBatch, run_episodes
from azr.training.trl_private import TrainerBatches

log = logging.getLogger(__name__)
PUBLIC_OVERFIT = "public_overfit"
# The columns an episode adds to its row (TRL merges a rollout's extra fields into the rows the rewards read).
ANSWER, PUBLIC_PASSED, EPISODE = "feedback_answer", "feedback_public_passed", "feedback_episode"


class TrainerTurns:
    """`azr.rollouts.TurnSampler` over the trainer's own generation at GRPO's settings (token ids in, token ids and
    sampler log-probabilities out), timed for the cost benchmark."""

    def __init__(self, trl: TrainerBatches):
        self.trl, self.seconds = trl, 0.0

    def sample(self, contexts: list[list[int]], n: int) -> tuple[list[list[int]], list[list[float]] | None]:
        started = time.perf_counter()
        try:
            return self.trl.generate_ids(contexts, n)
        finally:
            self.seconds += time.perf_counter() - started


class PublicTests:
    """`azr.rollouts.PublicCheck` for one round's rows: each answer parsed as the rubric parses it and run on its
    row's public tests (column `public_tests`) in the sandbox; the feedback is rendered from the verdicts by
    `azr.rewards.public_feedback`. Hidden tests are never read here."""

    def __init__(self, rows: Sequence[dict[str, Any]], grader: CodeGrader, max_failures: int, max_chars: int):
        self.rows, self.grader = rows, grader
        self.max_failures, self.max_chars = max_failures, max_chars
        self.seconds = 0.0

    def __call__(self, indices: list[int], texts: list[str]) -> list[Check]:
        started = time.perf_counter()
        answers = [parse_answer(text, self.grader.answer_format) for text in texts]
        tasks = [_public_task(self.rows[i]) for i in indices]
        runnable = [(t, a.code) for t, a in zip(tasks, answers, strict=True) if a.code is not None]
        grades = iter(grade_many(runnable, self.grader.pool, self.grader.limits) if runnable else [])
        checks = []
        for task, answer in zip(tasks, answers, strict=True):
            grade = next(grades) if answer.code is not None else None
            passed, text = render(task, answer, grade, self.max_failures, self.max_chars)
            fraction = grade.tests_passed / grade.tests_total if grade is not None and grade.tests_total else 0.0
            checks.append(Check(passed, fraction, text))
        self.seconds += time.perf_counter() - started
        return checks


def _public_task(row: dict[str, Any]) -> Task:
    return Task(
        id=str(row.get("task_id") or ""),
        prompt="",
        tests=list(row["public_tests"]),
        setup=row.get("setup") or None,
        timeout_s=row.get("timeout_s"),
        memory_mb=row.get("memory_mb"),
    )


class FeedbackRollout:
    """TRL's `rollout_func` for `rollouts.env: feedback`, and an observer of each scored batch. Reads the round's
    rows from the trainer (`AZRGRPOTrainer.round_rows`: TRL hands a rollout function the prompts only).

    `metrics()` gives, since the last log: turns per episode, the pass rate (hidden tests) of the program standing
    after each turn, the share of turn-1 failures repaired by turn k, public pass rate by turn, feedback tokens per
    episode, the public-overfit count (`alarms/public_overfit`: a final program that passes every public test and
    fails a hidden one), and where the round's time went (generation, sandbox)."""

    def __init__(
        self,
        grader: CodeGrader,
        feedback: FeedbackConfig,
        template_kwargs: dict[str, Any] | None = None,
        metrics: Any = None,
    ):
        self.grader, self.max_turns, self.stop_on_pass = grader, feedback.max_turns, feedback.stop_on_pass
        self.max_failures, self.max_chars = feedback.max_failures, feedback.max_chars
        self.template_kwargs = dict(template_kwargs or {})
        self.metrics_writer = metrics
        self.stats: dict[str, list[float]] = defaultdict(list)
        self.seconds = defaultdict(float)
        self.last: list[Episode] = []  # the last round's episodes (tests read them)

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        trl = TrainerBatches(trainer)
        rows = list(trainer.round_rows)
        if len(rows) != len(prompts):
            raise RuntimeError(f"feedback rollout: {len(prompts)} prompts but {len(rows)} rows in the round")
        n = trl.group_size if trainer.model.training else trainer.num_generations_eval
        tokenizer = trl.tokenizer
        sampler, check = TrainerTurns(trl), PublicTests(rows, self.grader, self.max_failures, self.max_chars)
        episodes = run_episodes(
            trl.tokenize(prompts),
            n,
            sampler,
            lambda ids: tokenizer.decode(ids, skip_special_tokens=True),
            check,
            FeedbackTokens(tokenizer, **self.template_kwargs),
            self.max_turns,
            self.stop_on_pass,
        )
        self.seconds["generation"] += sampler.seconds
        self.seconds["sandbox"] += check.seconds
        self.last = episodes
        logprobs = [e.logprobs for e in episodes]
        return {
            "prompt_ids": [e.prompt_ids for e in episodes],
            "completion_ids": [e.completion_ids for e in episodes],
            "logprobs": None if any(lp is None for lp in logprobs) else logprobs,
            "env_mask": [e.env_mask for e in episodes],
            ANSWER: [e.answer for e in episodes],
            EPISODE_TURNS: [e.turns for e in episodes],
            PUBLIC_FIRST: [e.checks[0].fraction for e in episodes],
            PUBLIC_LAST: [e.checks[-1].fraction for e in episodes],
            PUBLIC_PASSED: [e.checks[-1].passed for e in episodes],
            EPISODE: [transcript(e) for e in episodes],
        }

    # ---------------------------------------------------------------------------------------- the observer
    def observe(self, batch: ScoredBatch) -> None:
        """Per-turn pass rates on the hidden tests (the final answer's verdict came with the batch; earlier turns'
        programs are graded here, in the run's pool), repairs, and the public-overfit alarm."""
        started = time.perf_counter()
        rows = batch.inputs
        if not rows or EPISODE not in rows[0] or len(batch.details) != len(rows):
            return
        earlier: list[tuple[int, int, Task, str]] = []  # (row, turn, hidden task, code) of answers before the last
        passed: list[list[bool | None]] = []
        for i, row in enumerate(rows):
            turns = row[EPISODE]
            final = batch.details[i].get("status") == "passed"
            passed.append([None] * (len(turns) - 1) + [final])
            for k, turn in enumerate(turns[:-1]):
                code = parse_answer(turn["answer"], self.grader.answer_format).code
                if code is None:
                    passed[i][k] = False
                else:
                    earlier.append((i, k, _hidden_task(row), code))
        grades = grade_many([(task, code) for _, _, task, code in earlier], self.grader.pool, self.grader.limits)
        for (i, k, _, _), grade in zip(earlier, grades, strict=True):
            passed[i][k] = grade.status == "passed"
        self.seconds["sandbox"] += time.perf_counter() - started
        for i, row in enumerate(rows):
            turns, verdicts = row[EPISODE], passed[i]
            self.stats["turns"].append(len(turns))
            self.stats["feedback_tokens"].append(sum(t.get("feedback_tokens", 0) for t in turns))
            for k in range(1, self.max_turns + 1):
                standing = verdicts[min(k, len(verdicts)) - 1]  # an episode that stopped keeps its last program
                self.stats[f"pass_turn{k}"].append(float(bool(standing)))
                public = turns[min(k, len(turns)) - 1]["public_passed"]
                self.stats[f"public_pass_turn{k}"].append(float(bool(public)))
                if k > 1 and not verdicts[0]:
                    self.stats[f"repaired_turn{k}"].append(float(bool(standing)))
            if turns[-1]["public_passed"] and not verdicts[-1] and batch.details[i].get("status") != "error":
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
        out: dict[str, float] = {"alarms/public_overfit": float(len(stats.pop("public_overfit", [])))}
        for key, values in stats.items():
            if values:
                out[f"feedback/{key}"] = round(sum(values) / len(values), 4)
        for key, value in seconds.items():
            out[f"feedback/{key}_s"] = round(value, 4)
        return out


def _hidden_task(row: dict[str, Any]) -> Task:
    return Task(
        id=str(row.get("task_id") or ""),
        prompt="",
        tests=list(row["tests"]),
        setup=row.get("setup") or None,
        timeout_s=row.get("timeout_s"),
        memory_mb=row.get("memory_mb"),
    )


def transcript(episode: Episode) -> list[dict[str, Any]]:
    """The episode's turns as the generation log records them: each answer, whether it passed the public tests, and
    the feedback shown after it ('' after the last)."""
    turns = []
    for k, (text, check) in enumerate(zip(episode.texts, episode.checks, strict=True)):
        shown = k + 1 < episode.turns
        turns.append({"answer": text, "public_passed": check.passed, "feedback": check.feedback if shown else ""})
    if turns:
        turns[0]["feedback_tokens"] = episode.feedback_tokens
    return turns


def final_answers(inputs: Sequence[dict[str, Any]], completions: list[Any]) -> list[Any]:
    """What the rewards score: an episode's final answer (its row's `feedback_answer`) in place of the whole
    transcript TRL decoded; other rows' completions as they are."""
    if not inputs or ANSWER not in inputs[0]:
        return completions
    return [[{"role": "assistant", "content": row[ANSWER]}] for row in inputs]


def render(task: Task, answer: Answer, grade: Grade | None, max_failures: int, max_chars: int) -> tuple[bool, str]:
    """(all public tests passed, the feedback shown): the first `max_failures` failing tests, each with its reason,
    every field cut to `max_chars`."""
    if grade is None:
        return False, f"No program was run: {answer.problem or 'no code block'}."[: max_chars + 40]
    if grade.status == "passed":
        return True, ""
    failed = [i for i, ok in enumerate(grade.per_test) if not ok] or list(range(len(task.tests)))
    lines = [f"Your program failed {len(failed)} of {len(task.tests)} public tests."]
    reasons = {int(m.group(1)): m.group(2) for f in grade.failures if (m := _FAILURE.match(f))}
    for i in failed[:max_failures]:
        lines.append(f"Test: {task.tests[i][:max_chars]}")
        lines.append(f"Error: {reasons.get(i, grade.status)[:max_chars]}")
    return False, "\n".join(lines)


_FAILURE = re.compile(r"test (\d+): (.*)", re.DOTALL)


def measure_episodes(
    model: Any,
    tokenizer: Any,
    tasks: Sequence[Task],
    sampling: Any,
    rubric: Any,
    feedback: FeedbackConfig,
    template_kwargs: dict[str, Any],
) -> dict[str, Any]:
    """`sampling.n` feedback episodes per task from `model`'s own `generate` (seeded by `sampling.seed`, the torch
    generators restored after): the pass rate on the hidden tests of the program standing after each turn
    (`pass_rate_turn{k}`), the share of turn-1 failures passing after turn k (`repaired_turn{k}`), mean turns, and
    `pass_rate` / `reward` (the rubric's) of the final answers, as GRPO scores them."""
    import torch

    from azr.evaluation import score_completions
    from azr.rollouts import GenerateTurns, restore_rng, save_rng

    grader = rubric.grader
    split = [(t, *t.split_tests()) for t in tasks]
    kept = [(t, shown, hidden) for t, shown, hidden in split if hidden]
    n = sampling.n
    rows = [
        {
            "task_id": t.id,
            "public_tests": shown,
            "setup": t.setup or "",
            "timeout_s": t.timeout_s,
            "memory_mb": t.memory_mb,
        }
        for t, shown, _ in kept
        for _ in range(n)
    ]
    prompts = [
        list(
            tokenizer.apply_chat_template(
                chat_messages(t.prompt), add_generation_prompt=True, tokenize=True, return_dict=False, **template_kwargs
            )
        )
        for t, _, _ in kept
        for _ in range(n)
    ]
    state = save_rng(torch)
    torch.manual_seed(sampling.seed)
    try:
        episodes = run_episodes(
            prompts,
            n,
            GenerateTurns(model, tokenizer, sampling),
            lambda ids: tokenizer.decode(ids, skip_special_tokens=True),
            PublicTests(rows, grader, feedback.max_failures, feedback.max_chars),
            FeedbackTokens(tokenizer, **template_kwargs),
            feedback.max_turns,
            feedback.stop_on_pass,
        )
    finally:
        restore_rng(torch, state)
    hidden = [dataclasses.replace(t, tests=h) for t, _, h in kept]
    result = score_completions(rubric, hidden, [e.answer for e in episodes])
    passed: list[list[bool | None]] = [[] for _ in episodes]
    for k in range(feedback.max_turns):
        texts = [e.texts[min(k, e.turns - 1)] for e in episodes]
        statuses = _statuses(grader, hidden, texts, n)
        for i, status in enumerate(statuses):
            passed[i].append(None if status == "error" else status == "passed")
    for k in range(feedback.max_turns):
        graded = [p[k] for p in passed if p[k] is not None]
        result[f"pass_rate_turn{k + 1}"] = sum(graded) / len(graded) if graded else None
        if k:
            failed = [p[k] for p in passed if p[0] is False and p[k] is not None]
            result[f"repaired_turn{k + 1}"] = sum(failed) / len(failed) if failed else None
    result["turns"] = sum(e.turns for e in episodes) / len(episodes) if episodes else None
    return result


def _statuses(grader: CodeGrader, tasks: Sequence[Task], texts: list[str], n: int) -> list[str]:
    """Each text's grade status on its task's tests (tasks `n` texts each, in order)."""
    columns = {
        "tests": [t.tests for t in tasks for _ in range(n)],
        "setup": [t.setup for t in tasks for _ in range(n)],
        "task_id": [t.id for t in tasks for _ in range(n)],
        "timeout_s": [t.timeout_s for t in tasks for _ in range(n)],
        "memory_mb": [t.memory_mb for t in tasks for _ in range(n)],
    }
    return [o.status for o in grader.outcomes(texts, columns)]


def repair_transcripts(
    tasks: Sequence[Task], near_misses: dict[str, list[str]], grader: CodeGrader, feedback: FeedbackConfig
) -> list[tuple[Task, str, str]]:
    """(task, near miss, feedback) for every near miss that fails its task's public tests, the feedback rendered as
    an episode renders it: the SFT warm start's repair transcripts. Near misses that pass the public tests (and fail
    only hidden ones) get no feedback in an episode, so none here either."""
    from azr.prompts import reference_answer

    jobs = [(t, miss) for t in tasks for miss in near_misses.get(t.id, []) if t.solution and t.split_tests()[1]]
    rows = [
        {
            "task_id": t.id,
            "public_tests": t.split_tests()[0],
            "setup": t.setup or "",
            "timeout_s": t.timeout_s,
            "memory_mb": t.memory_mb,
        }
        for t, _ in jobs
    ]
    check = PublicTests(rows, grader, feedback.max_failures, feedback.max_chars)
    checks = check(list(range(len(jobs))), [reference_answer(miss, t.entry_point) for t, miss in jobs])
    return [(t, miss, c.feedback) for (t, miss), c in zip(jobs, checks, strict=True) if not c.passed]
