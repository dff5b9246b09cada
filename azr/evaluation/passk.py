"""pass@k: the unbiased estimator of Chen et al. (2021), its mean over problems, and a paired bootstrap.

Owns the arithmetic only: per-problem counts (n samples, c correct) in, numbers out. It knows nothing of how
samples are produced or graded (`azr.evaluation.run`) or shown (`azr.evaluation.report`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chance that at least one of k samples drawn without replacement from n (c of them correct) is correct:
    1 - C(n-c, k) / C(n, k), computed as a product so that large n neither overflows nor loses precision."""
    if not 0 <= c <= n:
        raise ValueError(f"pass@k: need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"pass@k: need 1 <= k <= n, got n={n}, k={k}")
    if n - c < k:  # every k-subset holds a correct sample
        return 1.0
    # C(n-c, k) / C(n, k) = prod_{i=n-c+1}^{n} (1 - k / i)
    missing = 1.0
    for i in range(n - c + 1, n + 1):
        missing *= 1.0 - k / i
    return 1.0 - missing


@dataclass(frozen=True)
class Mean:
    """pass@k averaged over the problems with at least k graded samples; `problems` says how many those were."""

    value: float | None
    problems: int


def mean_pass_at_k(counts: Mapping[str, tuple[int, int]], k: int) -> Mean:
    """Mean over problems of pass@k from `{problem: (n, c)}`; problems with fewer than k samples are left out
    (the estimator is undefined there) and not counted."""
    scores = [pass_at_k(n, c, k) for n, c in counts.values() if n >= k]
    return Mean(sum(scores) / len(scores) if scores else None, len(scores))


@dataclass(frozen=True)
class Difference:
    """B minus A on shared problems, with a percentile bootstrap interval at `confidence`."""

    a: float
    b: float
    delta: float
    low: float
    high: float
    problems: int
    confidence: float


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], resamples: int = 10_000, confidence: float = 0.95, seed: int = 0
) -> Difference:
    """Resample problems with replacement, keeping each problem's pair (a_i, b_i) together, so the interval
    reflects which problems were drawn, not the two runs' independent noise."""
    if len(a) != len(b) or not a:
        raise ValueError("paired bootstrap: need two equally long, non-empty score lists")
    size = len(a)
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(diffs, k=size)) / size for _ in range(resamples))
    tail = (1.0 - confidence) / 2
    low = means[int(tail * (resamples - 1))]
    high = means[round((1.0 - tail) * (resamples - 1))]
    return Difference(sum(a) / size, sum(b) / size, sum(diffs) / size, low, high, size, confidence)


def bootstrap_interval(
    scores: Sequence[float], resamples: int = 2_000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval at `confidence` of the mean of per-problem `scores` (problems resampled with
    replacement): how much the mean would move on another draw of problems of the same kind."""
    if not scores:
        raise ValueError("bootstrap interval: need at least one score")
    size = len(scores)
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(scores, k=size)) / size for _ in range(resamples))
    tail = (1.0 - confidence) / 2
    return means[int(tail * (resamples - 1))], means[round((1.0 - tail) * (resamples - 1))]
