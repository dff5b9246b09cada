"""Self-play: a remote opponent answers each batch's tasks while the policy's completions are scored.

Owns the opponent's requests (the original question in azr's own system prompt, never a chat-templated string, and
no stop sequence), grading its answers with the policy's pool, limits and answer format, the `opponent_passed`
column the `selfplay` reward reads, and the blend `(1 - w)·base + w·selfplay` as reward weights. An opponent failure
is `unavailable`: the self-play part is then None (masked), never a loss. It does not touch completions or rewards.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from azr.config import AzrConfig
from azr.data import GRADING_COLUMNS, Task
from azr.logs import JsonlWriter
from azr.prompts import chat_messages, last_user_message
from azr.remote import ChatClient, Reply, Usage, build_client
from azr.rewards import CodeGrader

log = logging.getLogger(__name__)
# Markers of a prompt already rendered by a chat template (ChatML, Llama 3, Mistral, Gemma, Phi): such a string sent
# as the user message would be templated a second time by the opponent's server.
_TEMPLATED = re.compile(r"<\|im_start\|>|<\|start_header_id\|>|<\|begin_of_text\|>|\[INST\]|<start_of_turn>|<\|user\|>")


@dataclass
class OpponentResult:
    """The opponent's answer to one task, graded like the policy's completions."""

    task_id: str
    status: Literal["passed", "failed", "unavailable"]
    reward: float | None  # fraction of tests passed, as the `tests` reward scores it; None when unavailable
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    attempts: int = 0
    grade_status: str = ""  # the sandbox's verdict: passed / failed / timeout / no_code / ...
    error: str = ""  # why unavailable: the client's one-line error (never holding the key) or the sandbox's

    @property
    def passed(self) -> bool | None:
        """The `opponent_passed` column value: True, False, or None when unavailable (masked, never a loss)."""
        return None if self.status == "unavailable" else self.status == "passed"


@dataclass
class OpponentHandle:
    """A batch's opponent requests in flight; pass it to `SelfPlayManager.collect`."""

    step: int
    task_ids: list[str]
    future: Future = field(repr=False)
    # Who counted the batch: its thread when it finished in time ("accounted"), or collect when it gave up waiting
    # ("abandoned": every task unavailable, whatever arrives later). Read and set under the manager's lock.
    claim: dict[str, bool] = field(repr=False)
    submitted_at: float = field(default_factory=time.monotonic)

    def done(self) -> bool:
        return self.future.done()


def opponent_messages(question: str) -> list[dict[str, str]]:
    """The opponent's conversation: azr's system prompt and the original task, exactly what the policy is shown."""
    if _TEMPLATED.search(question):
        raise ValueError("the opponent's question is a chat-templated string; pass the raw task prompt")
    return chat_messages(question)


def opponent_params(cfg: AzrConfig) -> dict[str, Any]:
    """Sampling for the opponent's requests. No `stop`: any stop sequence risks cutting the 'Final answer:' line the
    strict format needs. The budget adds `thinking.opponent_budget_tokens` for a reasoning model's thoughts."""
    play = cfg.self_play
    max_tokens = play.max_tokens + cfg.thinking.opponent_budget_tokens
    return {"max_tokens": max_tokens, "temperature": play.temperature, "top_p": play.top_p}


def question_of(item: Task | dict[str, Any]) -> tuple[str, str]:
    """(task id, original question) of a Task or a dataset row: its `question` column, else the last user message of
    a conversational prompt, else a plain-string prompt."""
    if isinstance(item, Task):
        return item.id, item.prompt
    prompt = item.get("question") or last_user_message(item.get("prompt"))
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(f"row {item.get('task_id')!r}: no question to ask the opponent")
    return str(item.get("task_id", prompt)), prompt


def blend(base: float, selfplay: float | None, weight: float) -> float:
    """`(1 - w)·base + w·selfplay`; with no self-play score (opponent unavailable) `(1 - w)·base`, which is what
    TRL's nan-sum of the weighted rewards gives, the same for the whole group of that prompt."""
    return (1 - weight) * base + (weight * selfplay if selfplay is not None else 0.0)


class SelfPlayManager:
    """Sends each batch's unique tasks to the opponent in a background thread (concurrently, bounded by the client's
    `concurrency`) and grades the answers there, so the caller scores its own completions meanwhile."""

    def __init__(
        self, cfg: AzrConfig, grader: CodeGrader, client: ChatClient | None = None, *, log_path: Path | None = None
    ):
        """`cfg` is the run's `AzrConfig` (its `self_play` and `thinking` sections); `log_path` gets one JSONL
        record of outcomes and usage per batch."""
        play = cfg.self_play
        self.client = client or build_client(play)
        self.grader = grader
        self.weight = play.weight
        self.params = opponent_params(cfg)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="azr-opponent")
        self._lock = threading.Lock()  # settles, per batch, whether it finished in time or was abandoned
        self._log = JsonlWriter(log_path) if log_path else None
        self.totals = {"batches": 0, "passed": 0, "failed": 0, "unavailable": 0}

    def submit(self, items: Iterable[Task | dict[str, Any]], step: int) -> OpponentHandle:
        """Start the opponent on the unique tasks among `items` (Tasks or dataset rows; hint rows are skipped)."""
        jobs: dict[str, tuple[str, dict[str, Any]]] = {}
        for item in items:
            if isinstance(item, dict) and item.get("hint"):
                continue  # a hinted retry is the policy's; the opponent already answered the original task
            task_id, question = question_of(item)
            if task_id not in jobs:
                opponent_messages(question)  # refuse a templated prompt here, in the caller, not in the thread
                jobs[task_id] = (question, grading_columns(item))
        claim = {"accounted": False, "abandoned": False}
        future = self._executor.submit(self._play, step, jobs, claim)
        return OpponentHandle(step, list(jobs), future, claim)

    def collect(self, handle: OpponentHandle, timeout_s: float | None = None) -> dict[str, OpponentResult]:
        """Per task id, the opponent's result; every task `unavailable` if the batch is not done within
        `timeout_s` (None: wait; the client's own timeouts and retry cap bound the wait). An abandoned batch is
        unavailable in the totals and the log as well; one that has not started yet sends no request."""
        try:
            return handle.future.result(timeout_s)
        except FutureTimeout:
            with self._lock:
                if not handle.claim["accounted"]:
                    handle.claim["abandoned"] = True
                    late = _unavailable(handle.task_ids)
                    self._account(handle.step, late, time.monotonic() - handle.submitted_at, late=True)
            if not handle.claim["abandoned"]:  # it finished just as the wait ran out
                return handle.future.result()
            handle.future.cancel()
            log.warning("self-play: the opponent's batch for step %d is not done; counted unavailable", handle.step)
            return late

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
        if self._log is not None:
            self._log.close()

    def _play(self, step: int, jobs: dict[str, tuple[str, dict[str, Any]]], claim: dict[str, bool]):
        started = time.monotonic()
        if claim["abandoned"]:  # given up on before it started: no request is sent
            return _unavailable(list(jobs))
        try:
            conversations = [opponent_messages(question) for question, _ in jobs.values()]
            replies = self.client.chat_many(conversations, **self.params)
            results = self._grade(list(jobs), [cols for _, cols in jobs.values()], replies)
        except Exception as exc:  # a bug or a broken pool must not end the run: the batch is unavailable
            log.error("self-play: step %d failed: %s: %s", step, type(exc).__name__, exc)
            results = _unavailable(list(jobs), type(exc).__name__)
        with self._lock:
            if claim["abandoned"]:  # answered after collect gave up: already counted unavailable
                return _unavailable(list(jobs))
            claim["accounted"] = True
            self._account(step, results, time.monotonic() - started)
        return results

    def _grade(self, task_ids: list[str], columns: list[dict], replies: list[Reply]) -> dict[str, OpponentResult]:
        results = {}
        answered = [(t, c, r) for t, c, r in zip(task_ids, columns, replies, strict=True) if r.ok]
        for task_id, reply in zip(task_ids, replies, strict=True):
            if not reply.ok:
                results[task_id] = OpponentResult(task_id, "unavailable", None, error=reply.error or "", **_base(reply))
        tasks = [Task(t, "", **cols) for t, cols, _ in answered]  # cols: tests, timeout_s, memory_mb
        graded = self.grader.grade_answers([(task, r.text) for task, (_, _, r) in zip(tasks, answered, strict=True)])
        for task, (_, _, reply), (code, grade) in zip(tasks, answered, graded, strict=True):
            base = _base(reply)
            if code is None:
                results[task.id] = OpponentResult(task.id, "failed", 0.0, grade_status="no_code", **base)
            elif grade.status == "error":  # the sandbox failed, not the opponent
                why = grade.failures[-1] if grade.failures else "sandbox error"
                results[task.id] = OpponentResult(task.id, "unavailable", None, grade_status="error", error=why, **base)
            else:
                status = "passed" if grade.passed else "failed"
                results[task.id] = OpponentResult(task.id, status, grade.fraction, grade_status=grade.status, **base)
        return {t: results[t] for t in task_ids}

    def _account(self, step: int, results: dict[str, OpponentResult], wall_s: float, late: bool = False) -> None:
        counts = {s: sum(r.status == s for r in results.values()) for s in ("passed", "failed", "unavailable")}
        self.totals["batches"] += 1
        for status, n in counts.items():
            self.totals[status] += n
        usage = {k: sum(asdict(r.usage)[k] for r in results.values()) for k in asdict(Usage())}
        record = {
            "step": step,
            "tasks": len(results),
            **counts,
            **usage,
            "latency_s": round(sum(r.latency_s for r in results.values()), 3),
            "wall_s": round(wall_s, 3),
            "late": late,  # collect stopped waiting for it (self_play.max_wait_s): every task counted unavailable
            "client": self.client.usage.snapshot(),  # cumulative: retries, failures, max_in_flight, cost
        }
        log.info("self-play step %d: %s", step, {k: record[k] for k in ("tasks", *counts, "wall_s")})
        if self._log is not None:
            self._log.write(record)


def _base(reply: Reply) -> dict[str, Any]:
    return {"usage": reply.usage, "latency_s": reply.latency_s, "attempts": reply.attempts}


def _unavailable(task_ids: list[str], error: str = "not done in time") -> dict[str, OpponentResult]:
    return {t: OpponentResult(t, "unavailable", None, error=error) for t in task_ids}


def opponent_column(rows: Sequence[dict[str, Any]], results: dict[str, OpponentResult]) -> list[bool | None]:
    """The `opponent_passed` value of each row (one per completion): None for hint rows and tasks not answered."""
    column: list[bool | None] = []
    for row in rows:
        result = None if row.get("hint") else results.get(question_of(row)[0])
        column.append(result.passed if result is not None else None)
    return column


def grading_columns(item: Task | dict[str, Any]) -> dict[str, Any]:
    """What grading needs of a task or a dataset row: its tests, setup, limits and options (`GRADING_COLUMNS`,
    Task's own field names)."""
    if isinstance(item, Task):
        return item.grading_columns()
    found = {name: item.get(name) for name in GRADING_COLUMNS}
    return found | {"tests": list(item.get("tests") or []), "setup": item.get("setup") or None}
