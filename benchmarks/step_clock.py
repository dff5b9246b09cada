"""Each optimizer step's wall time, for the benchmarks that time GRPO steps (train_overhead, feedback_cost)."""

from __future__ import annotations

import time
from typing import Any


class StepClock:
    """Records each step's seconds; a TrainerCallback by duck typing (the handler calls the `on_*` hooks it finds,
    and every hook but the step's two does nothing)."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._start = 0.0

    def __getattr__(self, name: str):
        if name.startswith("on_"):
            return lambda *a, **k: None
        raise AttributeError(name)

    def on_step_begin(self, *args: Any, **kwargs: Any) -> None:
        self._start = time.perf_counter()

    def on_step_end(self, *args: Any, **kwargs: Any) -> None:
        self.seconds.append(time.perf_counter() - self._start)
