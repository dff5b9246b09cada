"""What batch composition needs of the run's processes: its rank, the world size, and three collectives. Typed here
as a Protocol so that `rollouts` stays below `training`, whose `Ranks` (accelerate's process group) provides them;
`OneProcess` is the world of one that tests and single-process runs use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

T = TypeVar("T")


class Processes(Protocol):
    """This process's place in the run (`azr.training.Ranks` is one)."""

    rank: int
    world: int

    @property
    def main(self) -> bool: ...

    def gather(self, obj: T) -> list[T]: ...

    def on_main(self, fn: Callable[[], T], what: str) -> T: ...

    def total(self, *numbers: float) -> list[float]: ...


class OneProcess:
    """A run of one process: every collective returns its input."""

    rank, world, main = 0, 1, True

    def gather(self, obj: T) -> list[T]:
        return [obj]

    def on_main(self, fn: Callable[[], T], what: str) -> T:
        return fn()

    def total(self, *numbers: float) -> list[float]:
        return [float(n) for n in numbers]
