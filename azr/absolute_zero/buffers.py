"""Task buffers: the valid triplets of each task type that proposer prompts show and solver batches are filled from.

Each buffer holds at most `cap` triplets and keeps the newest: a full buffer drops its oldest triplet for a new one
(the public implementation kept the oldest, so a full buffer never changed again), and a task proposed again moves
to the newest end rather than taking a second place. Buffers are saved in the checker's line format, one file per
type, beside each checkpoint, so a resume starts from exactly the buffers it stopped with.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path

from azr.absolute_zero.triplets import TASK_TYPES, TaskType, Triplet, read_triplets, write_triplets


class TaskBuffer:
    """The newest `cap` distinct triplets of one task type, oldest first."""

    def __init__(self, cap: int, triplets: Iterable[Triplet] = ()):
        if cap < 1:
            raise ValueError("a buffer holds at least one triplet")
        self.cap = cap
        self._items: OrderedDict[tuple, Triplet] = OrderedDict()
        for triplet in triplets:
            self.add(triplet)

    def add(self, triplet: Triplet) -> None:
        """Add `triplet` as the newest, dropping the oldest past the cap."""
        self._items.pop(triplet.key, None)
        self._items[triplet.key] = triplet
        while len(self._items) > self.cap:
            self._items.popitem(last=False)

    def sample(self, k: int, rng: random.Random) -> list[Triplet]:
        """`k` distinct triplets, or all of them when there are fewer, in random order."""
        items = list(self._items.values())
        return rng.sample(items, min(k, len(items)))

    def triplets(self) -> list[Triplet]:
        return list(self._items.values())

    def __len__(self) -> int:
        return len(self._items)


class Buffers:
    """One TaskBuffer per task type."""

    def __init__(self, cap: int, types: Sequence[TaskType] = TASK_TYPES):
        self.by_type: dict[TaskType, TaskBuffer] = {t: TaskBuffer(cap) for t in types}

    def __getitem__(self, kind: TaskType) -> TaskBuffer:
        return self.by_type[kind]

    def programs(self) -> list[Triplet]:
        """The triplets an induction proposer may be shown a program from: the deduction and abduction buffers."""
        return [t for kind in ("deduction", "abduction") if kind in self.by_type for t in self.by_type[kind].triplets()]

    def sizes(self) -> dict[str, int]:
        return {kind: len(buffer) for kind, buffer in self.by_type.items()}

    def save(self, folder: Path) -> None:
        for kind, buffer in self.by_type.items():
            write_triplets(Path(folder) / f"{kind}.jsonl", buffer.triplets())

    def load(self, folder: Path) -> None:
        """Replace every buffer with the one saved in `folder` (a missing file leaves that buffer empty)."""
        for kind, buffer in self.by_type.items():
            path = Path(folder) / f"{kind}.jsonl"
            self.by_type[kind] = TaskBuffer(buffer.cap, read_triplets(path) if path.exists() else ())
