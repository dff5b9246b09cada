"""Self-play rounds in a batch: the arena (`azr.selfplay.Arena`) played once per generation round over every
process's rows, on the main process, with each process getting the opponent's column for its own slice.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Protocol

from azr.rollouts.processes import Processes
from azr.rollouts.seam import ScoredBatch


class RoundHooks(Protocol):
    """What the trainer calls around each generation round (`azr.selfplay.Arena`, or `MainRounds` over several
    processes): `start` before the policy generates, `finish` before the rewards, `observe` with each scored batch
    (the trainer's `ScoredBatch`), `metrics` for every log."""

    def start(self, rows: list[dict[str, Any]], step: int) -> list[dict[str, Any]]: ...

    def finish(self, rows: list[dict[str, Any]]) -> None: ...

    def observe(self, batch: ScoredBatch) -> None: ...

    def metrics(self) -> dict[str, float]: ...


class Arena(RoundHooks, Protocol):
    """Self-play's arena (`azr.selfplay.Arena`) as the rounds across processes use it: the hooks, and its files."""

    def save(self, folder: Path) -> None: ...

    def close(self) -> None: ...


class MainRounds:
    """The self-play round (`azr.selfplay.Arena`, on the main process only; None elsewhere) of each generation
    round, played once over the rows of every process: the main process sends the whole round's tasks to the
    opponent, and the opponent column comes back to each process for its own slice. One arena: one opponent request
    per task, one scoreboard, frontier, teacher and set of self-play files, and metrics over the whole batch,
    whatever the number of processes. Which groups a round holds (hinted retries and frontier replay among them)
    the group sampler has decided before, also on the main process (`azr.rollouts.groups`)."""

    def __init__(self, arena: Arena | None, ranks: Processes):
        self.arena, self.ranks = arena, ranks
        self._rows: list[dict[str, Any]] = []  # the whole batch, on the main process, from start to finish
        self._sizes: list[int] = []  # rows of each rank in this batch

    def start(self, rows: list[dict[str, Any]], step: int) -> list[dict[str, Any]]:
        parts = self.ranks.gather(rows)
        self._sizes = [len(p) for p in parts]

        def submit() -> None:
            self._rows = self.arena.start([r for p in parts for r in p], step)

        self.ranks.on_main(submit, "self-play round")
        return rows

    def finish(self, rows: list[dict[str, Any]]) -> None:
        def column() -> list[Any]:
            self.arena.finish(self._rows)
            return [r.get("opponent_passed") for r in self._rows]

        start, end = self._bounds()[self.ranks.rank]
        for row, passed in zip(rows, self.ranks.on_main(column, "self-play round")[start:end], strict=True):
            row["opponent_passed"] = passed

    def observe(self, batch: ScoredBatch) -> None:
        """Called on the main process only, with every process's scored rows (AZRGRPOTrainer's observers)."""
        self.arena.observe(batch)

    def metrics(self) -> dict[str, float]:
        return self.arena.metrics() if self.arena is not None else {}

    def save(self, folder: Path) -> None:
        if self.arena is not None:
            self.arena.save(folder)

    def close(self) -> None:
        if self.arena is not None:
            self.arena.close()

    def _bounds(self) -> list[tuple[int, int]]:
        ends = list(itertools.accumulate(self._sizes))
        return list(zip([0, *ends[:-1]], ends, strict=True))
