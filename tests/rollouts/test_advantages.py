"""Advantages as functions of scores: the per-key baseline by hand, GRPO's group baseline against TRL's own formula,
and weighted totals that keep ungraded rows out."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from azr.rollouts import group_advantages, keyed_advantages, weighted_totals  # noqa: E402

NAN = float("nan")


def test_the_per_type_and_role_baseline_by_hand():
    totals = torch.tensor([1.0, -1.0, NAN, 0.5, 0.5, 2.0])
    keys = ["d/solve", "d/solve", "d/solve", "d/propose", "a/propose", "d/propose"]
    assert keyed_advantages(totals, keys, scale=False).tolist() == pytest.approx([1.0, -1.0, 0.0, -0.75, 0.0, 0.75])
    scaled = keyed_advantages(totals, keys, scale=True).tolist()
    assert scaled[:2] == pytest.approx([1 / (math.sqrt(2) + 1e-4), -1 / (math.sqrt(2) + 1e-4)])
    assert scaled[2] == 0.0 and scaled[4] == 0.0  # not graded; a key's only row


def test_group_advantages_are_trls():
    """TRL 1.16's `sum_then_normalize` with `scale_rewards: group`, written out with its own nanstd."""
    trl_utils = pytest.importorskip("trl.trainer.utils")
    totals = torch.tensor([1.0, 0.0, 0.5, NAN, 2.0, 2.0, 2.0, 1.0])
    grouped = totals.view(-1, 4)
    mean = torch.nanmean(grouped, dim=1).repeat_interleave(4)
    std = trl_utils.nanstd(grouped, dim=1).repeat_interleave(4)
    expected = torch.nan_to_num((totals - mean) / (std + 1e-4), nan=0.0)
    assert group_advantages(totals, 4, scale=True).tolist() == pytest.approx(expected.tolist())
    assert group_advantages(totals, 4, scale=False).tolist() == pytest.approx(
        torch.nan_to_num(totals - mean, nan=0.0).tolist()
    )


def test_weighted_totals_keep_ungraded_rows_out():
    rewards = torch.tensor([[1.0, 1.0], [0.0, NAN], [NAN, NAN]])
    totals = weighted_totals(rewards, torch.tensor([1.0, 0.1]))
    assert totals[:2].tolist() == pytest.approx([1.1, 0.0]) and math.isnan(totals[2])
