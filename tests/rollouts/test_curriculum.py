"""The curriculum: per-task statistics, the weights they give, draws by those weights, and a resume that continues
exactly (statistics, draws and the groups waiting to be trained)."""

from __future__ import annotations

import random
from collections import Counter
from types import SimpleNamespace

import pytest
import torch

from azr.config import CurriculumConfig, SamplingConfig
from azr.rollouts.curriculum import Curriculum
from azr.rollouts.dynamic import RolloutFilter
from azr.rollouts.groups import GroupSampler
from azr.rollouts.seam import ScoredGroup

IDS = ["a", "b", "c", "d"]


def _rows(task: str, n: int, hint: str = "") -> list[dict]:
    return [{"task_id": task, "prompt": task, "hint": hint} for _ in range(n)]


def test_weights_follow_learnability_with_a_floor_for_unseen_tasks_and_rest_for_solved_ones():
    cfg = CurriculumConfig(enabled=True, window=4, min_weight=0.01, unseen_weight=0.25, rest_after=2, rest_steps=3)
    cur = Curriculum(cfg, IDS)
    assert cur.weights(1) == dict.fromkeys(IDS, 0.25)  # nothing graded yet
    verdicts = [True, False, True, False] + [False, False, False, True] + [True] * 4
    cur.record(1, _rows("a", 4) + _rows("b", 4) + _rows("c", 4), verdicts)
    w = cur.weights(2)
    assert w["a"] == pytest.approx(0.25) and w["b"] == pytest.approx(0.25 * 0.75)  # p 1/2 and 1/4
    assert w["c"] == 0.01 and w["d"] == 0.25  # solved every time: p(1-p) = 0, at the floor; d unseen
    stats = cur.stats["b"]
    assert (stats.attempts, stats.passes, stats.recent, stats.groups, stats.last_step) == (4, 1, "0001", 1, 1)
    # The window keeps the last 4 graded completions; rows not graded (None) and hinted retries are not counted.
    cur.record(2, _rows("b", 4) + _rows("d", 2, hint="try x = 0"), [True, True, None, None, False, False])
    assert cur.stats["b"].recent == "0111" and cur.stats["b"].attempts == 6  # "0001" + "11", the last 4
    assert cur.stats["d"].attempts == 0 and cur.weights(3)["d"] == 0.25
    # c passes whole twice in a row: it rests for rest_steps steps (weight 0), then comes back at the floor.
    cur.record(3, _rows("c", 2), [True, True])
    assert cur.stats["c"].streak == 2 and cur.stats["c"].rest_until == 6
    assert [cur.weights(s)["c"] for s in (4, 6, 7)] == [0.0, 0.0, 0.01]
    cur.record(7, _rows("c", 2), [True, False])  # recent "1110": p = 3/4
    assert cur.stats["c"].streak == 0 and cur.weights(8)["c"] == pytest.approx(0.75 * 0.25)


def test_ucb_weighting_adds_an_exploration_bonus_that_favours_rarely_drawn_tasks():
    cfg = CurriculumConfig(enabled=True, weighting="ucb", ucb_c=0.1, window=8)
    cur = Curriculum(cfg, ["often", "rare"])
    for step in range(1, 10):
        cur.record(step, _rows("often", 2), [True, False])
    cur.record(10, _rows("rare", 2), [True, False])
    w = cur.weights(11)
    total = 10  # groups graded, every task
    assert w["often"] == pytest.approx(0.25 + 0.1 * (2.302585 / 9) ** 0.5, rel=1e-5)
    assert w["rare"] == pytest.approx(0.25 + 0.1 * (2.302585 / 1) ** 0.5, rel=1e-5) and total == 10
    assert w["rare"] > w["often"]


def test_draws_follow_the_weights_and_put_resting_and_excluded_tasks_last():
    cfg = CurriculumConfig(enabled=True, window=4, min_weight=0.0, rest_after=1, rest_steps=100)
    cur = Curriculum(cfg, ["half", "quarter", "never", "solved", "fresh"])
    cur.record(1, _rows("half", 4), [True, False, True, False])  # 0.25
    cur.record(1, _rows("quarter", 4), [True, False, False, False])  # 0.1875
    cur.record(1, _rows("never", 4), [False] * 4)  # 0 at a floor of 0: drawn only when nothing else is left
    cur.record(1, _rows("solved", 4), [True] * 4)  # rests
    rng = random.Random(0)
    firsts = Counter(cur.draw(1, rng, 2)[0] for _ in range(20000))
    assert set(firsts) == {"half", "quarter", "fresh"}
    assert firsts["half"] / firsts["quarter"] == pytest.approx(0.25 / 0.1875, rel=0.06)
    assert firsts["fresh"] / firsts["half"] == pytest.approx(1.0, rel=0.06)  # unseen: 0.25 as well
    assert sorted(cur.draw(3, rng, 2)) == ["fresh", "half", "quarter"]  # no repeats while there are tasks enough
    assert cur.draw(3, rng, 2, exclude={"half"})[:2] in (["fresh", "quarter"], ["quarter", "fresh"])
    assert set(cur.draw(5, rng, 2)[3:]) == {"never", "solved"}  # weight 0 last
    assert len(cur.draw(7, rng, 2)) == 7  # more groups than tasks: round again
    # The same seed gives the same draw.
    assert cur.draw(3, random.Random("s"), 2) == cur.draw(3, random.Random("s"), 2)


def _filter(checkpoint=None) -> RolloutFilter:
    cfg = CurriculumConfig(enabled=True, window=8, rest_after=1, rest_steps=2)
    rows = {t: {"task_id": t, "prompt": t, "hint": "", "source": "data"} for t in IDS}
    groups = GroupSampler(rows, curriculum=Curriculum(cfg, IDS), seed=5)
    return RolloutFilter(SamplingConfig(dynamic=True), groups, checkpoint)


def _batch(step: int, passed: list[bool]) -> SimpleNamespace:
    """A scored batch as the trainer's observers get it: two completions of each task."""
    inputs = [{"task_id": t, "hint": ""} for t in IDS for _ in range(2)]
    details = [{"status": "passed" if p else "failed"} for p in passed]
    return SimpleNamespace(step=step, inputs=inputs, details=details)


def test_a_resume_continues_the_curriculum_and_the_carried_groups_exactly(tmp_path):
    running = _filter()
    history = [[True, False, True, True, False, False, True, True], [True, True, False, True, True, True, False, True]]
    for step, passed in enumerate(history, start=1):
        running.observe(_batch(step, passed))
    running.batches = 2
    waiting = {"completion_ids": torch.arange(6).reshape(2, 3), "advantages": torch.tensor([0.5, -0.5])}
    running.pool = [ScoredGroup(waiting, "b", True, born=2)]
    running.totals.update(generated=8, trained=4, useful=4)
    running.save(tmp_path)

    resumed = _filter(str(tmp_path))
    assert resumed.groups.curriculum.to_json() == running.groups.curriculum.to_json()
    assert resumed.batches == 2 and resumed.totals == running.totals
    (group,) = resumed.pool
    assert (group.task_id, group.born) == ("b", 2)
    assert all(torch.equal(group.tensors[k], v) for k, v in waiting.items())
    # Both go on the same way: the same draws, and the same statistics after the next batch.
    rows = [{"task_id": "a", "prompt": "a", "hint": "", "source": "data"}] * 4
    for step in (3, 4):
        assert resumed.groups.compose(rows, 2, step) == running.groups.compose(rows, 2, step)
    for sampler in (running, resumed):
        sampler.observe(_batch(3, [True] * 8))
    assert resumed.groups.curriculum.to_json() == running.groups.curriculum.to_json()
    # A checkpoint without the state file (killed between the trainer's save and this one): a fresh curriculum.
    assert _filter(str(tmp_path / "elsewhere")).groups.curriculum.stats["a"].attempts == 0
