"""Teacher assistance, on-policy: hints for tasks the policy failed become new prompts in the training stream.

Owns asking the teacher (in a background thread; failures are counted and skipped), sanitising hints (no code, no
answer line, a length cap), the hint-augmented rows of the `HintQueue` the sampler draws from, and the SFT buffer of
full teacher solutions with their provenance. It never touches a completion or a reward: the policy's own
completions for a hinted prompt are what get scored.
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import asdict
from pathlib import Path
from typing import Any

from azr.config import AzrConfig
from azr.data import Task
from azr.logs import JsonlWriter
from azr.prompts import chat_messages, hint_request_messages, hinted_messages, strip_thinking
from azr.remote import ChatClient, Reply, build_client
from azr.rewards import CodeGrader
from azr.selfplay.opponent import grading_columns, question_of

log = logging.getLogger(__name__)
RUNTIME_COLUMNS = ("opponent_passed",)  # set per batch by the trainer; a hint row must not carry a stale value

_FENCE = re.compile(r"(```|~~~).*?(\1|\Z)", re.DOTALL)  # an unterminated fence takes the rest of the text with it
_CODE_LINE = re.compile(
    r"^\s*(?:async\s+def\s|def\s|class\s|import\s|from\s+\S+\s+import\s|return\b|@\w|lambda\b|print\()"
    r"|^(?: {4}|\t)(?!\s*(?:[-*+]|\d+[.)])\s)"  # indented code (a markdown code block), not a nested list item
)
_ANSWER_LINE = re.compile(r"^\W*(?:final\s+)?(?:answer|solution)\W*:", re.IGNORECASE)
_INLINE = re.compile(r"`([^`\n]*)`")
_DEFINES = re.compile(r"\bdef\s|\bclass\s|\blambda\b|\bimport\s|\breturn\b|;|(?<![=!<>])=(?!=)")


def sanitise_hint(text: str, max_chars: int) -> tuple[str, dict[str, int]]:
    """The hint without code blocks, code lines, inline code that defines things or an answer line, cut to
    `max_chars` at a word boundary; and how many of each were removed."""
    removed = Counter()
    visible = strip_thinking(text)
    text = visible if visible is not None else text.split("<think>", 1)[0]
    text, removed["code_blocks"] = _FENCE.subn("", text)

    def inline(match: re.Match) -> str:
        if _DEFINES.search(match.group(1)) or len(match.group(1)) > 40:
            removed["inline_code"] += 1
            return ""
        return match.group(0)

    lines = []
    for line in text.splitlines():
        if _ANSWER_LINE.match(line):
            removed["answer_lines"] += 1
        elif _CODE_LINE.match(line):
            removed["code_lines"] += 1
        else:
            lines.append(_INLINE.sub(inline, line).rstrip())
    hint = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    if len(hint) > max_chars:
        cut = hint[: max_chars - 1]
        hint = (cut.rsplit(None, 1)[0] if " " in cut else cut).rstrip() + "…"
        removed["truncated"] = 1
    return hint, dict(removed)


def teacher_params(cfg: AzrConfig) -> dict[str, Any]:
    """Sampling for the teacher's requests: its budget plus `thinking.teacher_budget_tokens`, and no stop sequence."""
    t = cfg.teacher
    return {
        "max_tokens": t.max_tokens + cfg.thinking.teacher_budget_tokens,
        "temperature": t.temperature,
        "top_p": t.top_p,
    }


class HintQueue:
    """Hint-augmented rows waiting to re-enter training; thread-safe and bounded (the oldest row is dropped)."""

    def __init__(self, maxlen: int = 256):
        self._rows: deque[dict[str, Any]] = deque()
        self.maxlen = maxlen
        self._lock = threading.Lock()
        self.stats = Counter({"added": 0, "taken": 0, "dropped": 0})

    def put(self, row: dict[str, Any]) -> None:
        with self._lock:
            if len(self._rows) >= self.maxlen:
                self._rows.popleft()
                self.stats["dropped"] += 1
            self._rows.append(row)
            self.stats["added"] += 1

    def take(self, n: int) -> list[dict[str, Any]]:
        """Up to `n` rows, oldest first; each is handed out once."""
        with self._lock:
            rows = [self._rows.popleft() for _ in range(min(n, len(self._rows)))]
            self.stats["taken"] += len(rows)
        return rows

    def rows(self) -> list[dict[str, Any]]:
        """The waiting rows, oldest first, left in the queue."""
        with self._lock:
            return [dict(r) for r in self._rows]

    def pending(self, task_id: str) -> bool:
        with self._lock:
            return any(str(r.get("task_id")) == str(task_id) for r in self._rows)

    def __len__(self) -> int:
        with self._lock:
            return len(self._rows)


class TeacherAssistant:
    """Asks the teacher for hints (and, optionally, full solutions) on the problems a batch's policy failed."""

    def __init__(
        self,
        cfg: AzrConfig,
        grader: CodeGrader,
        client: ChatClient | None = None,
        *,
        queue: HintQueue | None = None,
        log_path: Path | None = None,
        sft_path: Path | None = None,
        seed: int | None = None,
    ):
        """`cfg` is the run's `AzrConfig` (teacher, teacher_assist, thinking, output_dir, seed); `log_path` gets a
        JSONL record per teacher request; `sft_path` defaults to output_dir / teacher_assist.sft_buffer."""
        self.client = client or build_client(cfg.teacher)
        self.grader, self.assist, self.model = grader, cfg.teacher_assist, cfg.teacher.model
        self.params = teacher_params(cfg)
        self.queue = queue if queue is not None else HintQueue()
        self.sft_path = Path(sft_path) if sft_path else Path(cfg.output_dir) / self.assist.sft_buffer
        self._rng = random.Random(cfg.seed if seed is None else seed)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="azr-teacher")
        self._futures: list[Future] = []
        self._log = JsonlWriter(log_path) if log_path else None
        self._sft: JsonlWriter | None = None  # opened on the first solution: no empty file when none is asked for
        self.stats: Counter[str] = Counter()

    def submit(self, problems: Iterable[Any], step: int) -> Future | None:
        """Draw, for each failed problem (`.outcome` neither / opponent_only, `.row` its dataset row), whether to ask
        for a hint and a solution; ask in the background. None when nothing was drawn."""
        a = self.assist
        chances = {"neither": a.hint_prob_neither, "opponent_only": a.hint_prob_opponent_only}
        jobs: list[tuple[str, dict[str, Any], str]] = []  # (kind, row, question)
        for problem in problems:
            row = problem.row
            if problem.outcome not in chances or row.get("hint") or self.queue.pending(problem.task_id):
                continue
            question = question_of(row)[1]
            if self._rng.random() < chances[problem.outcome]:
                jobs.append(("hint", row, question))
            if a.solution_prob and self._rng.random() < a.solution_prob:
                jobs.append(("solution", row, question))
        if not jobs:
            return None
        future = self._executor.submit(self._assist, step, jobs)
        self._futures = [f for f in self._futures if not f.done()] + [future]
        return future

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for every request submitted so far; False if some are still running after `timeout_s`."""
        return not wait(list(self._futures), timeout_s).not_done

    def state(self) -> dict[str, Any]:
        """What a resume needs: the hints still waiting, the counters, usage and the random state. Hints still in
        flight are not kept; a resumed run does not ask for them again."""
        return {
            "hints": self.queue.rows(),
            "queue_stats": dict(self.queue.stats),
            "stats": dict(self.stats),
            "usage": self.client.usage.snapshot(),
            "rng": self._rng.getstate(),
        }

    def restore(self, state: dict[str, Any]) -> None:
        for row in state["hints"]:
            self.queue.put(row)
        self.queue.stats = Counter(state["queue_stats"])
        self.stats.update(state["stats"])
        self.client.usage.carry(state["usage"])
        version, internal, gauss = state["rng"]
        self._rng.setstate((version, tuple(internal), gauss))

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
        for writer in (self._log, self._sft):
            if writer is not None:
                writer.close()

    def _assist(self, step: int, jobs: list[tuple[str, dict[str, Any], str]]) -> None:
        try:
            conversations = [hint_request_messages(q) if kind == "hint" else chat_messages(q) for kind, _, q in jobs]
            replies = self.client.chat_many(conversations, **self.params)
            solutions = []
            for (kind, row, question), reply in zip(jobs, replies, strict=True):
                self.stats[f"{kind}_requests"] += 1
                if not reply.ok:
                    self.stats[f"{kind}_failures"] += 1
                    self._record(step, kind, row, reply, error=reply.error)
                elif kind == "hint":
                    self._hint(step, row, question, reply)
                else:
                    solutions.append((row, question, reply))
            if solutions:
                self._solutions(step, solutions)
        except Exception as exc:  # the teacher is optional: a failure is recorded and training goes on
            self.stats["errors"] += 1
            log.error("teacher: step %d failed: %s: %s", step, type(exc).__name__, exc)

    def _hint(self, step: int, row: dict[str, Any], question: str, reply: Reply) -> None:
        hint, removed = sanitise_hint(reply.text or "", self.assist.max_hint_chars)
        if not hint:
            self.stats["empty_hints"] += 1
            self._record(step, "hint", row, reply, error="nothing left after sanitising", removed=removed)
            return
        base = {k: v for k, v in row.items() if k not in RUNTIME_COLUMNS}
        self.queue.put({**base, "prompt": hinted_messages(question, hint), "hint": hint})
        self.stats["hints_queued"] += 1
        self._record(step, "hint", row, reply, hint=hint, removed=removed)

    def _solutions(self, step: int, solutions: list[tuple[dict[str, Any], str, Reply]]) -> None:
        tasks = [Task(question_of(row)[0], q, **grading_columns(row)) for row, q, _ in solutions]
        graded = self.grader.grade_answers(
            [(task, reply.text) for task, (_, _, reply) in zip(tasks, solutions, strict=True)]
        )
        if self._sft is None:
            self._sft = JsonlWriter(self.sft_path)
        for task, (_, grade), (row, question, reply) in zip(tasks, graded, solutions, strict=True):
            status = grade.status if grade else "no_code"
            self._sft.write(
                {
                    "prompt": chat_messages(question),
                    "completion": [{"role": "assistant", "content": reply.text}],
                    "task_id": task.id,
                    "step": step,
                    "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "teacher_model": self.model,
                    "passed": None if status == "error" else status == "passed",  # None: the sandbox failed
                    "status": status,
                    "tests_passed": grade.tests_passed if grade else 0,
                    "tests_total": grade.tests_total if grade else len(task.tests),
                }
            )
            self.stats["solutions_saved"] += 1
            self.stats["solutions_passed"] += status == "passed"
            self._record(step, "solution", row, reply, status=status)

    def _record(self, step: int, kind: str, row: dict[str, Any], reply: Reply, **extra: Any) -> None:
        if self._log is None:
            return
        self._log.write(
            {
                "step": step,
                "kind": kind,
                "task_id": row.get("task_id"),
                "ok": reply.ok and not extra.get("error"),
                "attempts": reply.attempts,
                "latency_s": round(reply.latency_s, 3),
                **asdict(reply.usage),
                **{k: v for k, v in extra.items() if v is not None},
            }
        )
