"""A generation batch as prompt groups: which groups' rewards differ, splitting TRL's per-row tensors into groups,
and joining groups back into one batch padded as TRL pads it (prompts on the left, completions on the right).

Owns the tensor layout of a batch (which keys, padded on which side); which groups to keep is
`azr.rollouts.dynamic`'s decision. tests/training/test_trl_private.py pins that TRL's round returns this layout.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from azr.rollouts.seam import RolloutTiming, ScoredGroup

# The per-row keys of a generation batch for text prompts (what TRL 1.16's round returns), by padding side.
LEFT_PADDED = {"prompt_ids", "prompt_mask"}
RIGHT_PADDED = {
    "completion_ids",
    "completion_mask",
    "tool_mask",
    "old_per_token_logps",
    "ref_per_token_logps",
    "sampling_per_token_logps",
    "importance_sampling_ratio",
}
KNOWN = LEFT_PADDED | RIGHT_PADDED | {"advantages", "num_items_in_batch"}


def group_signal(totals: torch.Tensor, size: int) -> list[bool]:
    """For each run of `size` rows: whether its rewards differ. `totals` is each row's weighted reward (the rubric's
    weighing, `weighted_totals`), NaN for a row that was not graded, which never counts: a group needs two graded
    rows whose totals are not all equal (a standard deviation not close to 0, as TRL's frac_reward_zero_std)."""
    out = []
    for start in range(0, totals.shape[0] - size + 1, size):
        values = totals[start : start + size]
        values = values[~torch.isnan(values)]
        out.append(values.numel() >= 2 and not torch.isclose(values.std(), torch.zeros(())).item())
    return out


def unsplittable(output: dict[str, Any]) -> list[str]:
    """The keys of a round's output that are not per row (an image batch's), which no group can take a slice of."""
    return sorted(k for k, v in output.items() if k not in KNOWN and v is not None)


def split_groups(
    output: dict[str, Any],
    rows: list[dict[str, Any]],
    signal: list[bool],
    born: int,
    *,
    rewards: torch.Tensor | None = None,
    totals: torch.Tensor | None = None,
    names: Sequence[str] = (),
    versions: Sequence[int] = (),
    timing: RolloutTiming | None = None,
) -> list[ScoredGroup]:
    """A round's output (TRL's dict), its input rows and the signal of each group, as scored groups; with
    `rewards` (these rows', (rows, reward functions), NaN where not graded) and their `totals` (`weighted_totals`),
    each group's rewards and their breakdown by `names`; `versions` is each group's sampling policy version."""
    unknown = unsplittable(output)
    if unknown:
        raise NotImplementedError(
            f"sampling.dynamic: TRL's batch holds {unknown}, which cannot be split by prompt group (text prompts only)"
        )
    size = len(rows) // len(signal)
    per_row = {k: v for k, v in output.items() if k in KNOWN - {"num_items_in_batch"} and v is not None}
    groups = []
    for i, s in enumerate(signal):
        part = slice(i * size, (i + 1) * size)
        group = ScoredGroup(
            {k: v[part] for k, v in per_row.items()},
            str(rows[i * size].get("task_id")),
            s,
            born,
            version=versions[i] if i < len(versions) else 0,
            timing=timing or RolloutTiming(),
        )
        if rewards is not None and totals is not None:
            group.rewards, group.breakdown = _scores(rewards[part], totals[part], names)
        groups.append(group)
    return groups


def _scores(
    rewards: torch.Tensor, totals: torch.Tensor, names: Sequence[str]
) -> tuple[list[float | None], dict[str, list[float | None]]]:
    """The weighted total of each row (None where it was not graded) and each function's rewards."""
    columns = rewards.float().t().tolist()
    breakdown = {n: [None if v != v else v for v in col] for n, col in zip(names, columns, strict=False)}
    return [None if t != t else float(t) for t in totals.tolist()], breakdown


def join_groups(
    groups: list[ScoredGroup], pad_id: int, multiple: int | None, device: torch.device, trim: bool = True
) -> dict[str, torch.Tensor]:
    """One batch of `groups`' rows, padded as TRL pads (prompts on the left, completions on the right); with `trim`,
    columns no row uses are cut (keeping widths a multiple of `multiple`), so the batch is what TRL would have built
    from these rows in one round."""
    out: dict[str, torch.Tensor] = {}
    for key in groups[0].tensors:
        parts = [g.tensors[key].to(device) for g in groups]
        if parts[0].dim() == 1:
            out[key] = torch.cat(parts)
            continue
        width = max(p.shape[1] for p in parts)
        value = pad_id if key.endswith("_ids") else 1 if key == "tool_mask" else 0
        pad = [(width - p.shape[1], 0) if key in LEFT_PADDED else (0, width - p.shape[1]) for p in parts]
        out[key] = torch.cat([F.pad(p, side, value=value) for p, side in zip(parts, pad, strict=True)])
    if trim:
        _trim(out, multiple)
    return out


def _trim(batch: dict[str, torch.Tensor], multiple: int | None) -> None:
    def rounded(used: int, width: int) -> int:
        return min(width, math.ceil(used / multiple) * multiple) if multiple else used

    prompt_width = batch["prompt_mask"].shape[1]
    used = batch["prompt_mask"].any(dim=0).nonzero()
    keep = rounded(prompt_width - int(used[0]) if len(used) else 0, prompt_width)
    for key in LEFT_PADDED & batch.keys():
        batch[key] = batch[key][:, prompt_width - keep :]
    width = batch["completion_mask"].shape[1]
    used = batch["completion_mask"].any(dim=0).nonzero()
    keep = max(rounded(int(used[-1]) + 1 if len(used) else 0, width), 1)
    for key in RIGHT_PADDED & batch.keys():
        if batch[key].shape[1] == width:  # a sequence-level importance ratio is (rows, 1)
            batch[key] = batch[key][:, :keep]


def detached(group: ScoredGroup) -> ScoredGroup:
    """A group to keep past this batch: its own copy of its rows (not a view holding the whole round's tensors)."""
    return dataclasses.replace(group, tensors={k: v.detach().clone() for k, v in group.tensors.items()})
