"""One grading path for batches of answers: GRPO's `CodeGrader` and Absolute Zero's `Judge` both resolve a batch
through an `OutcomeCache`, which runs each answer not seen before once (however often it repeats in the batch),
keeps outcomes in a bounded LRU, and counts the sandbox's own failures in one `InfraFailures`. A sandbox failure is
never a verdict: it is run again, in the next batch (`retry="next_batch"`: the other reward functions of the same
batch share it) or on its next request (`retry="always"`). Thread-safe: asynchronous GRPO's producer grades a batch
ahead while the trainer's reward call resolves another, and a key one thread is running is waited for by the other,
never run twice.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, Literal, TypeVar

from azr.rewards.health import InfraFailures

log = logging.getLogger(__name__)
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class OutcomeCache(Generic[K, V]):
    """Outcomes by key: `resolve` runs the keys it has not seen (through `run`, all at once) and serves the rest."""

    def __init__(
        self,
        size: int,
        health: InfraFailures,
        is_error: Callable[[V], bool],
        retry: Literal["next_batch", "always"] = "always",
        label: str = "grading",
        reason: Callable[[V], str] = lambda _: "unknown",
    ):
        self.size, self.health, self.is_error, self.retry, self.label, self.reason = (
            size,
            health,
            is_error,
            retry,
            label,
            reason,
        )
        self._cache: OrderedDict[K, V] = OrderedDict()
        self._last_keys: list[K] = []
        self._lock = threading.Lock()
        self._running: dict[K, threading.Event] = {}  # keys another call is running now

    def resolve(
        self, keys: Sequence[K], run: Callable[[list[K]], Sequence[V]], runnable: Callable[[K], bool] = lambda _: True
    ) -> tuple[list[V | None], list[V]]:
        """(an outcome per key, None for a key that is not runnable; the outcomes run now, in order). A key that
        another thread is running is waited for, and run here only if that run left no outcome (a failure under
        `retry="always"`)."""
        keys = list(keys)
        fresh: dict[K, V] = {}
        while True:
            with self._lock:
                if self.retry == "next_batch" and keys != self._last_keys:  # a new batch: earlier failures run again
                    for key in [k for k, v in self._cache.items() if self.is_error(v) and k not in fresh]:
                        del self._cache[key]
                    self._last_keys = keys
                missing = [k for k in dict.fromkeys(keys) if runnable(k) and k not in fresh and k not in self._cache]
                if not missing:
                    return [fresh[k] if k in fresh else self._cache.get(k) for k in keys], list(fresh.values())
                todo = [k for k in missing if k not in self._running]
                waits = {id(e): e for e in (self._running[k] for k in missing if k in self._running)}
                mine = threading.Event()
                for key in todo:
                    self._running[key] = mine
            ran: dict[K, V] = {}
            try:
                ran = dict(zip(todo, run(todo) if todo else [], strict=True))
            finally:
                with self._lock:
                    for key, outcome in ran.items():
                        if self.retry == "next_batch" or not self.is_error(outcome):
                            self._remember(key, outcome)
                    for key in todo:
                        del self._running[key]
                    mine.set()
                    self._account(list(ran.values()))
            fresh.update(ran)
            for done in waits.values():
                done.wait()

    def _remember(self, key: K, outcome: V) -> None:
        self._cache[key] = outcome
        self._cache.move_to_end(key)
        while len(self._cache) > self.size:
            self._cache.popitem(last=False)

    def _account(self, outcomes: list[V]) -> None:
        errors = [o for o in outcomes if self.is_error(o)]
        self.health.account(len(errors), len(outcomes))
        if errors:
            reasons = "; ".join(sorted({self.reason(o) for o in errors}))
            log.warning(
                "%s: sandbox infrastructure failures: %d of %d runs (%s)",
                self.label,
                len(errors),
                len(outcomes),
                reasons,
            )

    def __len__(self) -> int:
        return len(self._cache)

    def __contains__(self, key: object) -> bool:
        return key in self._cache
