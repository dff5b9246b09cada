"""The random-reward control arm of a learning claim (`reward_control: shuffle`): GRPO trained on the recipe's own
rewards, permuted within each batch. Each completion is paid another completion's reward, so the batch keeps its
mean, spread and share of zeros, but what a completion is paid no longer depends on what it wrote. A gain that the
recipe shows and this arm does not is learnt from the rewards, not from the update itself (the "spurious rewards"
effect, arXiv 2506.10947: some model families improve under any reward).

Every reward function of the batch applies the same permutation (one drawn per batch, from the run's seed and the
batch's completions), so a completion's rewards move together and their weighted total is the one another
completion earned. The grader's own metrics (the logged pass rate) and every evaluation stay real.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from azr.prompts import completion_text


def batch_permutation(completions: Sequence[Any], seed: int) -> list[int]:
    """A permutation of the batch's rows, the same for every call with these completions and this seed."""
    key = zlib.crc32("\x1e".join(completion_text(c) for c in completions).encode("utf-8", "replace"))
    order = list(range(len(completions)))
    random.Random(f"{seed}:{key}:{len(order)}").shuffle(order)
    return order


class Shuffled:
    """`func` with its values permuted within each batch (see the module docstring); TRL's calling convention and
    `func`'s name kept, so its metrics keep their names."""

    def __init__(self, func: Callable[..., list], seed: int):
        self.func, self.seed = func, seed
        self.__name__ = getattr(func, "__name__", type(func).__name__)

    def __call__(self, prompts=None, completions=None, **columns) -> list:
        values = self.func(prompts=prompts, completions=completions, **columns)
        order = batch_permutation(list(completions or []), self.seed)
        if len(order) != len(values):
            return values
        return [values[j] for j in order]

    def __getattr__(self, name: str) -> Any:  # the wrapped reward's own attributes (grader, needs_grader, ...)
        return getattr(self.func, name)
