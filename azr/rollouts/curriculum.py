"""The curriculum over tasks: per-task statistics from every scored batch, and the weights tasks are drawn by.

Owns counting each task's graded completions (attempts, passes, the pass rate over its last `window`, groups, the
run of groups that passed whole, the last step seen), and turning them into weights: learnability p(1 - p) of the
recent pass rate, or that plus an upper-confidence bonus for tasks drawn rarely; a fixed weight for a task never
graded; a floor for the rest; and a rest, at weight 0, for a task solved every time. It draws task ids with those
weights; the group sampler (`azr.rollouts.groups`) turns them into rows. Nothing here knows TRL or touches a reward.

A hinted retry is not counted: its prompt carries the teacher's hint, so its pass rate is not the task's own.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from azr.config import CurriculumConfig
from azr.rollouts.seam import ScoredBatch


@dataclass
class TaskStats:
    """One task's record. `recent` holds its last graded outcomes, oldest first ('1' passed, '0' failed)."""

    attempts: int = 0  # graded completions
    passes: int = 0
    recent: str = ""
    groups: int = 0  # scored batches the task was graded in
    streak: int = 0  # groups in a row in which every graded completion passed
    last_step: int = 0
    rest_until: int = 0  # not drawn at steps up to this one

    @property
    def pass_rate(self) -> float | None:
        """The pass rate over the recent window; None before the first graded completion."""
        return self.recent.count("1") / len(self.recent) if self.recent else None


class Curriculum:
    """Statistics for `task_ids` (others are added when seen) and the weights they give at a step."""

    def __init__(self, cfg: CurriculumConfig, task_ids: Sequence[str]):
        self.cfg = cfg
        self.stats: dict[str, TaskStats] = {str(t): TaskStats() for t in task_ids}

    # ------------------------------------------------------------------------------------------------- counting
    def observe(self, batch: ScoredBatch) -> None:
        """Trainer observer of each `ScoredBatch`: the grader's verdict per row (rows it could not grade, and batches
        without verdicts, count nothing)."""
        if len(batch.details) != len(batch.inputs):
            return
        passed = [{"passed": True, "error": None}.get(d.get("status"), False) for d in batch.details]
        self.record(batch.step, batch.inputs, passed)

    def record(self, step: int, rows: Sequence[dict[str, Any]], passed: Sequence[bool | None]) -> None:
        """One scored batch: `rows` are its dataset rows (one per completion), `passed[i]` whether completion i
        passed every test (None: not graded)."""
        by_task: dict[str, list[bool]] = {}
        for row, verdict in zip(rows, passed, strict=True):
            if not row.get("hint") and verdict is not None:
                by_task.setdefault(str(row.get("task_id")), []).append(bool(verdict))
        for task_id, verdicts in by_task.items():
            stats = self.stats.setdefault(task_id, TaskStats())
            stats.attempts += len(verdicts)
            stats.passes += sum(verdicts)
            stats.recent = (stats.recent + "".join("1" if v else "0" for v in verdicts))[-self.cfg.window :]
            stats.groups += 1
            stats.last_step = max(stats.last_step, step)
            stats.streak = stats.streak + 1 if all(verdicts) else 0
            if stats.streak >= self.cfg.rest_after and self.cfg.rest_steps:
                stats.rest_until = step + self.cfg.rest_steps

    # -------------------------------------------------------------------------------------------------- weights
    def weights(self, step: int) -> dict[str, float]:
        """Each task's weight for a batch of `step`: 0 while it rests, `unseen_weight` before its first graded
        completion, else its learnability (plus the exploration bonus under 'ucb'), at least `min_weight`."""
        total = sum(s.groups for s in self.stats.values())  # groups graded so far, every task
        return {t: self._weight(s, step, total) for t, s in self.stats.items()}

    def _weight(self, stats: TaskStats, step: int, total: int) -> float:
        if step <= stats.rest_until:
            return 0.0
        p = stats.pass_rate
        if p is None:
            return self.cfg.unseen_weight
        score = p * (1.0 - p)
        if self.cfg.weighting == "ucb":
            score += self.cfg.ucb_c * math.sqrt(math.log(max(total, 1)) / max(stats.groups, 1))
        return max(score, self.cfg.min_weight)

    def draw(self, n: int, rng: random.Random, step: int, exclude: Collection[str] = ()) -> list[str]:
        """`n` task ids for a batch of `step`, without repeats while there are tasks enough, each drawn with
        probability proportional to its weight (Efraimidis-Spirakis keys). Tasks in `exclude` and tasks at weight 0
        (resting) come only after every other task, in random order."""
        weights = self.weights(step)
        keyed = [(math.log(1.0 - rng.random()) / w, t) for t, w in weights.items() if w > 0 and t not in exclude]
        chosen = [t for _, t in heapq.nlargest(n, keyed)]
        resting = [t for t, w in weights.items() if w <= 0 and t not in exclude]
        for tier in (resting, [t for t in weights if t in exclude]):
            rng.shuffle(tier)
            chosen += tier[: n - len(chosen)]
        everything = list(weights)
        while len(chosen) < n:  # more groups than tasks: round again
            chosen.append(rng.choice(everything))
        return chosen

    # ----------------------------------------------------------------------------------------------- state
    def to_json(self) -> dict[str, Any]:
        return {t: asdict(s) for t, s in self.stats.items()}

    def restore(self, data: dict[str, Any]) -> None:
        """Statistics saved by `to_json` (a checkpoint's), replacing what is counted now."""
        self.stats = {str(t): TaskStats(**s) for t, s in data.items()}
