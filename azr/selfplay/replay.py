"""What a generation batch trains on: the sampled tasks, with some whole prompt groups replaced by hinted retries
(teacher hints) and by frontier replay (the curriculum).

Owns group replacement only. A replaced group is all `num_generations` rows of one prompt, so GRPO's per-group
baseline still compares completions of one prompt; the policy then generates its own completions for it. It never
touches completions or rewards, calls no model and runs no code.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


def whole_groups(rows: list[dict[str, Any]], size: int) -> list[int]:
    """Start index of each aligned run of `size` rows of one prompt. Empty when the rows are not whole groups (a
    group split over processes): then nothing may be replaced, or a group would mix two prompts."""
    if size < 1 or not rows or len(rows) % size:
        return []
    starts = []
    for start in range(0, len(rows), size):
        first = rows[start]
        same = (first.get("task_id"), first.get("prompt"))
        if all((r.get("task_id"), r.get("prompt")) == same for r in rows[start : start + size]):
            starts.append(start)
    return starts


class GroupMixer:
    """Replaces up to `hint_share` of a batch's groups with hinted retries from `take_hints(n)` (the teacher's
    `HintQueue.take`), then up to `replay_rate` with frontier tasks from `frontier_ids()`, least replayed first and
    never a task already in the batch. Counts are rounded down; the last groups of the batch are the ones replaced
    (TRL shuffles the generated batch before splitting it into steps)."""

    def __init__(
        self,
        rows_by_task: dict[str, dict[str, Any]],
        *,
        take_hints: Callable[[int], list[dict[str, Any]]] | None = None,
        hint_share: float = 0.0,
        frontier_ids: Callable[[], list[str]] | None = None,
        replay_rate: float = 0.0,
    ):
        self.rows_by_task = rows_by_task
        self.take_hints, self.hint_share = take_hints, hint_share
        self.frontier_ids, self.replay_rate = frontier_ids, replay_rate
        self.replayed: Counter[str] = Counter()  # times each frontier task was replayed
        self.totals: Counter[str] = Counter({"hinted_groups": 0, "replayed_groups": 0, "unaligned_batches": 0})

    def mix(self, rows: list[dict[str, Any]], size: int) -> list[dict[str, Any]]:
        """The batch with whole groups replaced; `rows` itself is left as it was."""
        wants_hints = self.take_hints is not None and self.hint_share > 0
        wants_replay = self.frontier_ids is not None and self.replay_rate > 0
        if not (wants_hints or wants_replay):
            return rows
        starts = whole_groups(rows, size)
        if len(starts) * size != len(rows):
            self.totals["unaligned_batches"] += 1
            log.warning("replay: the batch is not whole groups of %d rows on this process; nothing replaced", size)
            return rows
        rows, keys, free = list(rows), list(rows[0]), list(reversed(starts))
        replacements: list[tuple[dict[str, Any], str]] = []
        if wants_hints:
            hints = self.take_hints(min(int(self.hint_share * len(starts)), len(free)))
            replacements += [(row, "hint") for row in hints]
        if wants_replay:
            in_batch = {str(r.get("task_id")) for r in rows if not r.get("hint")}
            todo = min(int(self.replay_rate * len(starts)), len(free) - len(replacements))
            for task_id in self._replay_choice(in_batch, todo):
                self.replayed[task_id] += 1
                replacements.append((self.rows_by_task[task_id], "replay"))
        for (row, source), start in zip(replacements, free, strict=False):
            self.totals[f"{'hinted' if source == 'hint' else 'replayed'}_groups"] += 1
            # Every row keeps the batch's own keys: TRL builds the reward columns from the first row's keys.
            shaped = {k: row.get(k, "" if k == "hint" else None) for k in keys}
            if "source" in shaped:
                shaped["source"] = source
            rows[start : start + size] = [dict(shaped) for _ in range(size)]
        return rows

    def _replay_choice(self, in_batch: set[str], n: int) -> list[str]:
        if n <= 0:
            return []
        candidates = [t for t in dict.fromkeys(self.frontier_ids()) if t not in in_batch and t in self.rows_by_task]
        order = {t: i for i, t in enumerate(candidates)}
        return sorted(candidates, key=lambda t: (self.replayed[t], order[t]))[:n]
