"""The one group sampler: the data in TRL's order or by the curriculum's weights, over-sampled for dynamic sampling,
each draw seeded by (seed, process, step, attempt). Self-play's sources through it: tests/training/
test_selfplay_training.py."""

from __future__ import annotations

from azr.config import CurriculumConfig
from azr.rollouts.curriculum import Curriculum
from azr.rollouts.groups import GroupSampler

IDS = ["a", "b", "c", "d"]


def _rows(task: str, n: int) -> list[dict]:
    return [{"task_id": task, "prompt": task, "hint": ""} for _ in range(n)]


def test_the_group_sampler_draws_the_data_by_the_curriculum_seeded_by_step_and_attempt():
    rows = {t: {"task_id": t, "prompt": t, "hint": "", "source": "data"} for t in IDS}
    cur = Curriculum(CurriculumConfig(enabled=True, window=4, min_weight=0.0), IDS)
    cur.record(1, _rows("a", 2) + _rows("b", 2) + _rows("c", 2), [True, False, True, True, False, False])
    sampler = GroupSampler(rows, curriculum=cur, seed=3)
    batch = [dict(rows["c"]) for _ in range(4)]  # the dataloader's choice: two groups of c, not drawn by weight
    composed = sampler.compose(batch, 2, step=2)
    assert [r["task_id"] for r in composed[::2]] in (["a", "d"], ["d", "a"])  # b and c are at weight 0
    assert all(set(r) == set(batch[0]) for r in composed) and len(composed) == 4
    again = GroupSampler(rows, curriculum=cur, seed=3)
    assert again.compose(batch, 2, step=2) == composed
    draws = {tuple(r["task_id"] for r in again.compose(batch, 2, step=2, attempt=a, groups=4)) for a in range(8)}
    assert len(draws) > 1  # each attempt draws afresh


def test_over_sampling_without_a_curriculum_takes_trls_order_first_then_other_tasks():
    rows = {t: {"task_id": t, "prompt": t} for t in "abcdefgh"}
    sampler = GroupSampler(rows, seed=0)
    batch = [rows["c"], rows["c"], rows["a"], rows["a"]]
    first = [r["task_id"] for r in sampler.compose(batch, 2, step=1, groups=4)[::2]]
    assert first[:2] == ["c", "a"] and not set(first[2:]) & {"a", "c"} and len(set(first)) == 4
    later = [r["task_id"] for r in sampler.compose(batch, 2, step=1, attempt=1, groups=4, exclude=set(first))[::2]]
    assert not set(later) & set(first)  # a later attempt avoids what this step generated while others are left
    assert sampler.compose(batch, 2, step=1) is batch  # nothing asked of it: the dataloader's batch untouched
