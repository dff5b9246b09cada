"""Task buffers: capped, keeping the newest (the public implementation kept the oldest), one of each task, saved and
read back in the checker's line format."""

from __future__ import annotations

import random

from azr.absolute_zero import Buffers, TaskBuffer, Triplet, read_triplets


def triplet(n: int) -> Triplet:
    return Triplet(f"def f(x):\n    return x + {n}", ("1",), (str(n + 1),), origin=f"step {n}")


def test_a_full_buffer_drops_its_oldest():
    buffer = TaskBuffer(3)
    for n in range(5):
        buffer.add(triplet(n))
    assert [t.origin for t in buffer.triplets()] == ["step 2", "step 3", "step 4"]


def test_a_task_proposed_again_becomes_the_newest_once():
    buffer = TaskBuffer(3, [triplet(0), triplet(1), triplet(2)])
    buffer.add(triplet(0))
    assert [t.origin for t in buffer.triplets()] == ["step 1", "step 2", "step 0"]
    buffer.add(triplet(3))
    assert [t.origin for t in buffer.triplets()] == ["step 2", "step 0", "step 3"]


def test_samples_are_distinct_and_seeded():
    buffer = TaskBuffer(10, [triplet(n) for n in range(10)])
    drawn = buffer.sample(4, random.Random(0))
    assert len({t.key for t in drawn}) == 4
    assert drawn == buffer.sample(4, random.Random(0))
    assert len(buffer.sample(50, random.Random(0))) == 10


def test_saved_buffers_read_back_the_same(tmp_path):
    buffers = Buffers(4)
    for n in range(6):
        buffers["deduction"].add(triplet(n))
    many = Triplet("def f(x):\n    return x", ("1", "2"), ("1", "2"), message="identity", many=True)
    buffers["induction"].add(many)
    buffers.save(tmp_path)
    assert read_triplets(tmp_path / "deduction.jsonl") == buffers["deduction"].triplets()
    again = Buffers(4)
    again.load(tmp_path)
    assert again.sizes() == {"deduction": 4, "abduction": 0, "induction": 1}
    assert again["deduction"].triplets() == buffers["deduction"].triplets()
    assert again["induction"].triplets() == [many]
