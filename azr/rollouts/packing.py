"""Sequences packed by a token budget for the policy's forward passes: a batch laid out as TRL pads it (prompts on
the left, completions on the right, one row per sequence, every row as wide as the longest) becomes bins of whole
sequences, each at most `budget` tokens, with position ids that start again at 0 for every sequence, so that the
model attends within a sequence only (transformers reads such position ids as a packed batch when no attention mask
is given) and no forward pass spends compute on padding. A multi-turn batch whose longest transcript only some rows
reach costs what its tokens cost, not rows x the longest row.

Owns the layout only (which sequence goes where, and putting per-position values back in TRL's padded layout);
whether the model reads packed position ids correctly is checked by the trainer on its own batch
(`azr.training.trl.trainer`).
"""

from __future__ import annotations

import dataclasses

import torch

IGNORE = -100  # the label of a position that is not scored (transformers' and TRL's convention)


@dataclasses.dataclass(frozen=True)
class Packed:
    """Bins of whole sequences: `input_ids`, `position_ids` and `labels` (the scored positions' tokens, `IGNORE`
    elsewhere) are (bins, width); each scored position `k` of the padded batch is row `rows[k]`, column `cols[k]`
    of its last `keep` columns, and sits in bin `bins[k]` at `places[k]`."""

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    labels: torch.Tensor
    rows: torch.Tensor
    cols: torch.Tensor
    bins: torch.Tensor
    places: torch.Tensor
    shape: tuple[int, int]  # (rows, keep) of the padded values `unpack` returns

    @property
    def tokens(self) -> int:
        """The positions the packed forward computes (bins x width)."""
        return int(self.input_ids.numel())


def pack(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, keep: int, budget: int | None = None, pad_id: int = 0
) -> Packed | None:
    """`input_ids` (rows, width; `attention_mask` 1 on each row's tokens, which must be one contiguous run, as TRL's
    left-padded prompt and right-padded completion make it) packed first-fit, longest first, into bins of at most
    `budget` tokens (default: the batch's width, so no bin is wider than a padded row); a row with no token to score
    in its last `keep` columns is left out. None where a row's tokens are not one run: such a batch is not TRL's
    layout and stays padded."""
    rows, width = input_ids.shape
    budget = width if budget is None else budget
    mask = attention_mask.bool()
    counts = mask.sum(dim=1)
    starts = torch.where(counts > 0, mask.int().argmax(dim=1), 0)
    ends = starts + counts
    columns = torch.arange(width, device=mask.device)
    inside = (columns >= starts[:, None]) & (columns < ends[:, None])
    if not torch.equal(inside, mask):
        return None
    first_scored = width - keep
    scored = [r for r in range(rows) if int(ends[r]) > first_scored and int(counts[r]) > 0]
    lengths = {r: int(counts[r]) for r in scored}
    if any(n > budget for n in lengths.values()):
        budget = max(lengths.values())
    fill: list[int] = []
    placed: dict[int, tuple[int, int]] = {}  # row -> (bin, offset)
    for r in sorted(scored, key=lambda r: (-lengths[r], r)):
        slot = next((b for b, used in enumerate(fill) if used + lengths[r] <= budget), None)
        if slot is None:
            slot = len(fill)
            fill.append(0)
        placed[r] = (slot, fill[slot])
        fill[slot] += lengths[r]
    bins = max(len(fill), 1)
    wide = max(fill, default=1)
    ids = torch.full((bins, wide), pad_id, dtype=input_ids.dtype, device=input_ids.device)
    labels = torch.full((bins, wide), IGNORE, dtype=input_ids.dtype, device=input_ids.device)
    # Padding after a bin's last sequence counts from 0 again: a sequence of its own, which nothing attends to.
    positions = torch.arange(wide, device=input_ids.device).repeat(bins, 1)
    for b, used in enumerate(fill):
        positions[b, used:] = torch.arange(wide - used, device=input_ids.device)
    where_rows, where_cols, where_bins, where_places = [], [], [], []
    for r, (b, offset) in placed.items():
        start, n = int(starts[r]), lengths[r]
        ids[b, offset : offset + n] = input_ids[r, start : start + n]
        positions[b, offset : offset + n] = torch.arange(n, device=input_ids.device)
        lo = max(start + 1, first_scored)  # a sequence's first token is predicted by nothing of its own
        cols = torch.arange(lo, start + n, device=input_ids.device)
        places = offset + (cols - start)
        labels[b, places] = input_ids[r, cols]
        where_rows.append(torch.full_like(cols, r))
        where_cols.append(cols - first_scored)
        where_bins.append(torch.full_like(cols, b))
        where_places.append(places)
    empty = torch.zeros(0, dtype=torch.long, device=input_ids.device)
    return Packed(
        input_ids=ids,
        position_ids=positions,
        labels=labels,
        rows=torch.cat(where_rows) if where_rows else empty,
        cols=torch.cat(where_cols) if where_cols else empty,
        bins=torch.cat(where_bins) if where_bins else empty,
        places=torch.cat(where_places) if where_places else empty,
        shape=(rows, keep),
    )


def unpack(values: torch.Tensor, packed: Packed) -> torch.Tensor:
    """Per-position `values` of the packed bins (bins, width) back in the padded layout (rows, keep): each scored
    position's value where TRL's padded forward puts it, 0 at every position not scored (masked out of the loss).
    Differentiable: gradients flow back to `values`."""
    out = values.new_zeros(packed.shape)
    return out.index_put((packed.rows, packed.cols), values[packed.bins, packed.places])
