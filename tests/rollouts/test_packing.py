"""Sequences packed by a token budget (`azr.rollouts.pack`): whole sequences into bins no wider than the padded
batch, position ids counting from 0 again for each, labels on the scored positions only, and `unpack` putting each
scored position's value back where TRL's padded layout has it; a batch that is not TRL's layout is refused."""

from __future__ import annotations

import torch

from azr.rollouts import pack, unpack
from azr.rollouts.packing import IGNORE


def _batch():
    """Three rows of TRL's layout, width 8 (prompt width 4, completion width 4): real lengths 8, 3 and 4."""
    ids = torch.tensor(
        [
            [11, 12, 13, 14, 15, 16, 17, 18],
            [0, 0, 21, 22, 23, 0, 0, 0],
            [0, 31, 32, 33, 34, 0, 0, 0],
        ]
    )
    mask = (ids != 0).long()
    return ids, mask


def test_rows_go_whole_into_bins_no_wider_than_the_batch():
    ids, mask = _batch()
    packed = pack(ids, mask, keep=4)
    assert packed.input_ids.tolist() == [[11, 12, 13, 14, 15, 16, 17, 18], [31, 32, 33, 34, 21, 22, 23, 0]]
    assert packed.position_ids.tolist() == [[0, 1, 2, 3, 4, 5, 6, 7], [0, 1, 2, 3, 0, 1, 2, 0]]
    # Completion positions only (the last 4 columns), and never a sequence's first token.
    assert packed.labels.tolist() == [
        [IGNORE, IGNORE, IGNORE, IGNORE, 15, 16, 17, 18],
        [IGNORE, IGNORE, IGNORE, 34, IGNORE, IGNORE, 23, IGNORE],
    ]
    assert packed.tokens == 16 < ids.numel()


def test_unpack_puts_each_value_where_the_padded_layout_has_it_and_zero_elsewhere():
    ids, mask = _batch()
    packed = pack(ids, mask, keep=4)
    values = packed.input_ids.float().requires_grad_()  # a position's value is its token: easy to follow
    out = unpack(values, packed)
    assert out.tolist() == [[15, 16, 17, 18], [23, 0, 0, 0], [34, 0, 0, 0]]
    out.sum().backward()
    assert values.grad.sum() == 6  # one per scored position, and none elsewhere


def test_a_row_with_nothing_to_score_is_left_out():
    ids, mask = _batch()
    mask[1, 4:] = 0  # its completion masked (an ungraded row)
    packed = pack(ids, mask, keep=4)
    assert 21 not in packed.input_ids.tolist()[-1] and packed.rows.tolist().count(1) == 0
    assert unpack(packed.input_ids.float(), packed)[1].tolist() == [0, 0, 0, 0]


def test_a_batch_whose_tokens_are_not_one_run_a_row_is_refused():
    ids, mask = _batch()
    mask[0, 2] = 0
    assert pack(ids, mask, keep=4) is None


def test_a_budget_narrower_than_a_row_widens_to_it():
    ids, mask = _batch()
    narrow, default = pack(ids, mask, keep=4, budget=4), pack(ids, mask, keep=4)
    assert torch.equal(narrow.input_ids, default.input_ids)  # the longest row's 8 tokens a bin
