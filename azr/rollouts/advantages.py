"""Advantages as pure functions of scores: each completion's weighted reward against the mean of the rows it is
compared with, its prompt group (GRPO's baseline, as TRL computes it in its round) or another key such as Absolute
Zero's (task type, role), divided by their standard deviation when scaled. A row without a reward (NaN) stays out
of every baseline and gets 0; `ungraded` says which rows those are (a reward that applies to every row had an
infrastructure failure, or none had a value), as `azr.rewards.Rubric.total` does for one row. The weights are
always the rubric's. No trainer and no TRL: tests/rollouts/test_advantages.py checks them as functions.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch

EPSILON = 1e-4  # added to the standard deviation before dividing, as TRL does


def ungraded(rewards: torch.Tensor, required: torch.Tensor) -> torch.Tensor:
    """Per row of `rewards` ((rows, reward functions), NaN where a function gave None): whether it is not graded, a
    function that applies to every row (`required`, one bool per function) having no value, or none having one."""
    missing = torch.isnan(rewards)
    return (missing & required.to(rewards.device).bool()).any(dim=1) | missing.all(dim=1)


def weighted_totals(rewards: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Each row's weighted sum of its rewards ((rows, reward functions), NaN where one does not apply); NaN for a
    row no reward applies to (not graded)."""
    total = (rewards.float() * weights.to(rewards.device).float()).nansum(dim=1)
    total[torch.isnan(rewards).all(dim=1)] = torch.nan
    return total


def nanstd(values: torch.Tensor) -> torch.Tensor:
    """The sample standard deviation of the values that are not NaN; NaN with fewer than two."""
    kept = values[~torch.isnan(values)]
    if kept.numel() < 2:
        return torch.tensor(torch.nan, dtype=values.dtype, device=values.device)
    return kept.std(unbiased=True)


def keyed_advantages(totals: torch.Tensor, keys: Sequence[Hashable], scale: bool) -> torch.Tensor:
    """Each row's total less the mean of the rows with its key, divided by their standard deviation (plus
    `EPSILON`) when `scale`; rows without a total, and a key's only row when scaled, get 0."""
    advantages = torch.zeros_like(totals)
    for key in dict.fromkeys(keys):
        mask = torch.tensor([k == key for k in keys], device=totals.device)
        values = totals[mask]
        centred = values - torch.nanmean(values)
        if scale:
            centred = centred / (nanstd(values) + EPSILON)
        advantages[mask] = centred
    return torch.nan_to_num(advantages, nan=0.0)


def group_advantages(totals: torch.Tensor, size: int, scale: bool) -> torch.Tensor:
    """GRPO's advantages: each run of `size` rows (one prompt's group) is its own baseline."""
    return keyed_advantages(totals, [i // size for i in range(len(totals))], scale)
