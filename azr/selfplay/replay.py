"""Self-play's sources of extra prompt groups for the training batches: hinted retries (the teacher's hints) and
frontier replay (tasks the policy failed and has not solved since).

Each is a source for the one group sampler (`azr.rollouts.GroupSampler`), which decides where and how many of
their groups enter a batch, each whole; a source only says which rows it would give and counts what it gave. Neither
touches completions or rewards, calls a model or runs code.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection
from typing import Any


class HintSource:
    """Hinted retries from `take_hints(n)` (the teacher's `HintQueue.take`), up to `share` of a batch's groups. A
    hinted prompt is not the task's own, so it may join a batch that holds its task."""

    name = "hint"

    def __init__(self, take_hints: Callable[[int], list[dict[str, Any]]], share: float):
        self.take_hints, self.share = take_hints, share
        self.given = 0  # hinted groups handed to batches

    def take(self, n: int, exclude: Collection[str]) -> list[dict[str, Any]]:
        rows = self.take_hints(n) if n > 0 else []
        self.given += len(rows)
        return rows


class FrontierReplay:
    """Frontier tasks from `frontier_ids()`, up to `share` of a batch's groups: the least replayed first (then in
    frontier order), never a task the batch already holds."""

    name = "replay"

    def __init__(self, rows_by_task: dict[str, dict[str, Any]], frontier_ids: Callable[[], list[str]], share: float):
        self.rows_by_task, self.frontier_ids, self.share = rows_by_task, frontier_ids, share
        self.replayed: Counter[str] = Counter()  # times each frontier task was replayed
        self.given = 0

    def take(self, n: int, exclude: Collection[str]) -> list[dict[str, Any]]:
        if n <= 0:
            return []
        candidates = [t for t in dict.fromkeys(self.frontier_ids()) if t not in exclude and t in self.rows_by_task]
        order = {t: i for i, t in enumerate(candidates)}
        chosen = sorted(candidates, key=lambda t: (self.replayed[t], order[t]))[:n]
        self.replayed.update(chosen)
        self.given += len(chosen)
        return [self.rows_by_task[t] for t in chosen]
