"""Self-play bookkeeping: per-problem and per-completion outcomes against the opponent, the win rate with its Wilson
interval, and the frontier (tasks the policy could not solve), each written atomically as JSON.

Owns counting only; it never calls a model, runs code or changes rewards. An opponent that was unavailable is its
own outcome, never a loss; rows of hint-augmented prompts are counted apart (a hinted attempt is no fair match).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from azr.logs import atomic_write_json

PROBLEM_OUTCOMES = ("policy_only", "opponent_only", "both", "neither", "unavailable", "ungraded")
COMPLETION_OUTCOMES = ("win", "loss", "both_pass", "both_fail", "unavailable", "ungraded")
FRONTIER_OUTCOMES = ("neither", "opponent_only")


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95% for z=1.96); (0, 1) when n is 0."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


class ScoredRows(Protocol):
    """What the scoreboard reads of one scored batch (the trainer's `ScoredBatch`): each row's task columns and the
    grader's verdict of it."""

    step: int
    inputs: list[dict[str, Any]]
    details: list[dict[str, Any]]


@dataclass
class ProblemResult:
    """One problem in one batch: its outcome and a row of it (the dataset row the teacher can build a hint on)."""

    task_id: str
    outcome: str  # one of PROBLEM_OUTCOMES
    step: int
    completions: int  # graded completions of the policy
    passed: int  # of which passed every test
    row: dict[str, Any] = field(repr=False, default_factory=dict)


class Frontier:
    """Tasks the policy failed (`neither` / `opponent_only`), deduplicated: counts, first and last step, and the last
    step the policy solved the task afterwards (None while it never did)."""

    def __init__(self, entries: dict[str, dict[str, Any]] | None = None):
        self.entries: dict[str, dict[str, Any]] = entries or {}

    def add(self, result: ProblemResult) -> None:
        entry = self.entries.get(result.task_id)
        if result.outcome in FRONTIER_OUTCOMES:
            if entry is None:
                entry = self.entries[result.task_id] = {"count": 0, "first_step": result.step, "outcomes": {}}
                entry["last_solved_step"] = None
            entry["count"] += 1
            entry["last_step"] = result.step
            entry["outcomes"][result.outcome] = entry["outcomes"].get(result.outcome, 0) + 1
        elif entry is not None and result.passed:
            entry["last_solved_step"] = result.step

    def task_ids(self, unsolved_only: bool = False) -> list[str]:
        """Frontier task ids in the order first seen; `unsolved_only` leaves out those solved since their last miss."""
        return [
            t
            for t, e in self.entries.items()
            if not unsolved_only or e["last_solved_step"] is None or e["last_solved_step"] < e["last_step"]
        ]

    def __len__(self) -> int:
        return len(self.entries)

    def to_json(self) -> dict[str, Any]:
        return {"tasks": len(self.entries), "entries": self.entries}

    def write(self, path: Path) -> Path:
        return atomic_write_json(Path(path), self.to_json())

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Frontier:
        return cls({str(k): dict(v) for k, v in (data.get("entries") or {}).items()})


class Scoreboard:
    """Counts self-play outcomes as batches are scored; call `record` per batch (or use it as a trainer observer)."""

    def __init__(self) -> None:
        self.problems: Counter[str] = Counter({k: 0 for k in PROBLEM_OUTCOMES})
        self.completions: Counter[str] = Counter({k: 0 for k in COMPLETION_OUTCOMES})
        self.hinted: Counter[str] = Counter({"problems": 0, "completions": 0, "passed": 0})
        self.frontier = Frontier()
        self.history: list[dict[str, Any]] = []  # one entry per recorded batch: step and its problem outcomes
        self.last_step = 0

    def record(self, step: int, rows: list[dict[str, Any]], policy_passed: list[bool | None]) -> list[ProblemResult]:
        """One batch: `rows` are the dataset rows (with `task_id`, `opponent_passed`, optionally `hint`), one per
        completion; `policy_passed[i]` is whether completion i passed every test (None: it could not be graded)."""
        groups: dict[str, list[int]] = {}
        hinted: set[str] = set()
        for i, row in enumerate(rows):
            task_id = str(row.get("task_id", i))
            if row.get("hint"):
                hinted.add(task_id)
                self.hinted["completions"] += 1
                self.hinted["passed"] += bool(policy_passed[i])
            else:
                groups.setdefault(task_id, []).append(i)
        self.hinted["problems"] += len(hinted)
        results = [self._problem(step, task_id, idx, rows, policy_passed) for task_id, idx in groups.items()]
        for result in results:
            self.problems[result.outcome] += 1
            self.frontier.add(result)
        self.history.append({"step": step, **Counter(r.outcome for r in results)})
        self.last_step = max(self.last_step, step)
        return results

    def __call__(self, batch: ScoredRows) -> list[ProblemResult]:
        """Observer of `azr.training.trl.trainer.ScoredBatch`: policy verdicts from the grader's per-row details."""
        if len(batch.details) != len(batch.inputs):  # no verdicts for this batch: nothing to count
            return []
        status = [d.get("status") for d in batch.details]
        passed = [None if s == "error" else s == "passed" for s in status]
        return self.record(batch.step, batch.inputs, passed)

    def _problem(self, step, task_id, idx, rows, policy_passed) -> ProblemResult:
        opponent = rows[idx[0]].get("opponent_passed")  # the opponent answered the prompt once, for the whole group
        graded = [policy_passed[i] for i in idx if policy_passed[i] is not None]
        for verdict in (policy_passed[i] for i in idx):
            self.completions[_completion_outcome(verdict, opponent)] += 1
        policy = any(graded)
        if opponent is None:
            outcome = "unavailable"
        elif not graded:
            outcome = "ungraded"
        else:
            outcome = {(True, True): "both", (True, False): "policy_only"}.get((policy, bool(opponent)))
            outcome = outcome or ("opponent_only" if opponent else "neither")
        return ProblemResult(task_id, outcome, step, len(graded), sum(graded), dict(rows[idx[0]]))

    def win_rate(self, per: str = "problem") -> dict[str, Any]:
        """Wins over decisive matches (a win or a loss; ties and unavailable left out), with the 95% Wilson interval;
        per problem (policy_only vs opponent_only) or per completion (win vs loss)."""
        counts = self.problems if per == "problem" else self.completions
        wins, losses = (
            (counts["policy_only"], counts["opponent_only"]) if per == "problem" else (counts["win"], counts["loss"])
        )
        n = wins + losses
        low, high = wilson_interval(wins, n)
        return {"wins": wins, "decisive": n, "rate": wins / n if n else None, "low": low, "high": high}

    def to_json(self) -> dict[str, Any]:
        return {
            "last_step": self.last_step,
            "problems": dict(self.problems),
            "completions": dict(self.completions),
            "hinted": dict(self.hinted),
            "win_rate": {"problem": self.win_rate("problem"), "completion": self.win_rate("completion")},
            "frontier_tasks": len(self.frontier),
            "history": self.history,
        }

    def write(self, path: Path) -> Path:
        """The scoreboard as JSON, atomically: call every N steps and once more in a `finally`."""
        return atomic_write_json(Path(path), self.to_json())

    @classmethod
    def from_json(cls, data: dict[str, Any], frontier: dict[str, Any] | None = None) -> Scoreboard:
        """A scoreboard to continue from (a resumed run): its counts and history, and the frontier file's entries."""
        board = cls()
        board.problems.update(data.get("problems") or {})
        board.completions.update(data.get("completions") or {})
        board.hinted.update(data.get("hinted") or {})
        board.history = list(data.get("history") or [])
        board.last_step = int(data.get("last_step") or 0)
        board.frontier = Frontier.from_json(frontier or {})
        return board


def _completion_outcome(policy: bool | None, opponent: bool | None) -> str:
    if opponent is None:
        return "unavailable"
    if policy is None:
        return "ungraded"
    if policy:
        return "both_pass" if opponent else "win"
    return "loss" if opponent else "both_fail"
