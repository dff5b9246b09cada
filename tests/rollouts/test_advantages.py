"""Advantages as functions of scores: the per-key baseline by hand, GRPO's group baseline against TRL's own formula,
and weighted totals that keep ungraded rows out."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from azr.rollouts import group_advantages, keyed_advantages, ungraded, weighted_totals  # noqa: E402

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


def test_a_row_a_required_reward_could_not_score_is_ungraded_and_out_of_its_groups_mean_and_spread():
    """Rewards (tests, format, self-play): self-play is optional, so its None leaves a row graded; the tests
    reward's or a custom reward's None (an infrastructure failure) leaves it ungraded, whatever the format reward
    says. Masked, the row gets advantage 0 and the others' advantages are those of the group without it."""
    rewards = torch.tensor([[1.0, 1.0, NAN], [NAN, 1.0, 0.5], [0.0, 0.0, NAN], [0.5, 1.0, 0.5], [NAN, NAN, NAN]])
    masked = ungraded(rewards, torch.tensor([True, True, False]))
    assert masked.tolist() == [False, True, False, False, True]
    weights = torch.tensor([1.0, 0.1, 0.5])
    rewards[masked] = NAN  # as AZRGRPOTrainer masks them
    totals = weighted_totals(rewards, weights)
    assert totals[[0, 2, 3]].tolist() == pytest.approx([1.1, 0.0, 0.85]) and torch.isnan(totals[[1, 4]]).all()
    four = group_advantages(totals[:4], 4, scale=True)
    without = group_advantages(totals[[0, 2, 3]], 3, scale=True)  # the group as if the masked row never was
    assert four[1] == 0 and four[[0, 2, 3]].tolist() == pytest.approx(without.tolist())
    kept = totals[[0, 2, 3]]
    assert four[0] == pytest.approx(float((kept[0] - kept.mean()) / (kept.std() + 1e-4)))
