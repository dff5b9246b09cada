"""Which prompt groups enter a generation batch: one sampler over every source.

A batch's groups come from the data, then from the extra sources (self-play's frontier replay and hinted retries,
`azr.selfplay.replay`), each up to its share of the groups, rounded down. The data is TRL's shuffled order (the
dataloader's batch), with further tasks drawn at random when more groups are asked for than the batch holds
(dynamic sampling over-samples); or, with the curriculum on, tasks drawn by its weights. Every random draw is seeded
by (seed, step, attempt), so a resumed run draws what the uninterrupted one would have. With several processes it
composes every process's rows at once, on the main process (`azr.rollouts.dynamic`).

A group is `size` rows of one prompt, so GRPO's per-group baseline compares completions of one prompt, and every row
takes the batch's own keys (TRL builds the reward columns from the first row's keys). Owns choosing and shaping
rows only; it never touches completions or rewards.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Collection, Sequence
from typing import Any, Protocol

from azr.rollouts.curriculum import Curriculum

log = logging.getLogger(__name__)


class GroupSource(Protocol):
    """Where extra groups come from: `take(n, exclude)` gives up to `n` dataset rows, one per group, never a task in
    `exclude` unless its rows differ from the task's own (a hinted retry); `name` becomes their `source` column."""

    name: str
    share: float

    def take(self, n: int, exclude: Collection[str]) -> list[dict[str, Any]]: ...


def whole_groups(rows: Sequence[dict[str, Any]], size: int) -> list[int]:
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


class GroupSampler:
    """Composes generation batches from `rows_by_task` (the training dataset's rows by task id), an optional
    curriculum, and `sources` in priority order (the first source's groups come last in the batch)."""

    def __init__(
        self,
        rows_by_task: dict[str, dict[str, Any]],
        *,
        curriculum: Curriculum | None = None,
        sources: Sequence[GroupSource] = (),
        seed: int = 0,
    ):
        self.rows_by_task = rows_by_task
        self.curriculum = curriculum
        self.sources = [s for s in sources if s.share > 0]
        self.seed = seed
        self.totals: Counter[str] = Counter({"unaligned_batches": 0})

    def compose(
        self,
        rows: list[dict[str, Any]],
        size: int,
        step: int,
        *,
        attempt: int = 0,
        groups: int | None = None,
        exclude: Collection[str] = (),
    ) -> list[dict[str, Any]]:
        """`groups` prompt groups of `size` rows (default: as many as `rows`, the dataloader's batch, holds) for the
        batch of `step`. Attempt 0 takes the data from `rows` first; later attempts of the same step (dynamic
        sampling) draw it afresh, avoiding the tasks in `exclude` while others are left. `rows` itself is left as
        it was, and returned unchanged when it is not whole groups or nothing asks for a change."""
        n = len(rows) // size if groups is None else groups
        if self.curriculum is None and not self.sources and groups is None:
            return rows
        starts = whole_groups(rows, size)
        if not starts or len(starts) * size != len(rows):
            self.totals["unaligned_batches"] += 1
            log.warning("sampling: the batch is not whole groups of %d rows on this process; it is used as it is", size)
            return rows
        rng = random.Random(f"{self.seed}:{step}:{attempt}")
        targets = self._targets(n)
        # The data first, leaving room for every source's share; then the sources, never repeating a data task;
        # then more data for what a source could not give.
        data = self._data(rows, starts, n - sum(targets), rng, step, attempt, exclude)
        taken: list[list[tuple[dict[str, Any], str]]] = []
        in_batch = {str(r.get("task_id")) for r in data}
        for source, target in zip(self.sources, targets, strict=True):
            picked = source.take(target, in_batch) if target else []
            in_batch |= {str(r.get("task_id")) for r in picked}
            taken.append([(r, source.name) for r in picked])
        missing = n - len(data) - sum(map(len, taken))
        if missing:
            data += self._data(rows, starts, missing, rng, step, attempt, set(exclude) | in_batch, skip=len(data))
        keys = list(rows[0])
        chosen = [(r, str(r.get("source") or "data")) for r in data] + [g for t in reversed(taken) for g in t]
        # Every row keeps the batch's own keys: TRL builds the reward columns from the first row's keys.
        out = []
        for row, source in chosen:
            shaped = {k: row.get(k, "" if k == "hint" else None) for k in keys}
            if "source" in shaped:
                shaped["source"] = source
            out += [dict(shaped) for _ in range(size)]
        return out

    def _targets(self, n: int) -> list[int]:
        """Groups each source may fill, in priority order, rounded down and together at most `n`."""
        targets, left = [], n
        for source in self.sources:
            targets.append(min(int(source.share * n), left))
            left -= targets[-1]
        return targets

    def _data(self, rows, starts, n, rng, step, attempt, exclude, skip=0) -> list[dict[str, Any]]:
        """`n` data rows (one per group): the curriculum's draw; or, without one, the dataloader's groups from the
        `skip`th on (attempt 0), then tasks drawn uniformly."""
        if n <= 0:
            return []
        if self.curriculum is not None:
            ids = self.curriculum.draw(n, rng, step, exclude)
            return [self.rows_by_task[t] for t in ids if t in self.rows_by_task]
        out = [rows[s] for s in starts[skip : skip + n]] if attempt == 0 else []
        if len(out) < n:
            avoid = set(exclude) | {str(r.get("task_id")) for r in rows} | {str(r.get("task_id")) for r in out}
            fresh = [t for t in self.rows_by_task if t not in avoid]
            rng.shuffle(fresh)
            others = [t for t in self.rows_by_task if t in avoid]
            rng.shuffle(others)
            ids = (fresh + others)[: n - len(out)]
            while len(out) + len(ids) < n:  # more groups than tasks: round again
                ids.append(rng.choice(list(self.rows_by_task)))
            out += [self.rows_by_task[t] for t in ids]
        return out

    def to_json(self) -> dict[str, Any]:
        state: dict[str, Any] = {"totals": dict(self.totals)}
        if self.curriculum is not None:
            state["curriculum"] = self.curriculum.to_json()
        return state

    def restore(self, state: dict[str, Any]) -> None:
        self.totals.update(state.get("totals") or {})
        if self.curriculum is not None and "curriculum" in state:
            self.curriculum.restore(state["curriculum"])
