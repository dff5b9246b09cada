"""Asynchronous GRPO's pipeline against a token sampler that stands in for the vLLM sidecar at its one edge (the newest
version a `LoraSync` serves): each sample says which version drew it, and generation takes time, so overlap with
"training" (a sleep) can be seen."""

from __future__ import annotations

import itertools
import threading
import time

import pytest
import torch

from azr.rollouts.pipeline import AsyncRollouts, outside_band
from azr.rollouts.seam import VERSION, Continuation, ScoredGroup

G = 2


class _Engine:
    """Serves `version` (the trainer bumps it after each step); a completion's tokens are [version, prompt id]."""

    def __init__(self, seconds: float = 0.05):
        self.version, self.seconds, self.calls = 0, seconds, []
        self.gate = threading.Event()
        self.gate.set()

    def complete(self, contexts, sampling):
        self.gate.wait()
        version = self.version
        time.sleep(self.seconds)
        self.calls.append(version)
        return [Continuation([version, c[0]], "", "length", [-0.5, -0.5], version=version) for c in contexts]


def _rows(step: int) -> list[dict]:
    return [{"prompt": f"p{step}-{g}", "task_id": f"t{g}"} for g in range(2) for _ in range(G)]


def _tokenize(prompts):
    return [[int(p.split("-")[0][1:]) * 10 + int(p.split("-")[1])] for p in prompts]


@pytest.mark.parametrize("max_staleness", [1, 2])
def test_every_trained_sample_is_within_the_bound_and_tagged_with_the_version_that_drew_it(max_staleness):
    engine = _Engine()
    pipeline = AsyncRollouts(engine, _tokenize, max_staleness, G)
    try:
        seen = []
        for step in range(1, 7):
            version_now = step - 1
            rows = pipeline.swap(_rows(step), version_now)
            out = pipeline(rows_prompts := [r["prompt"] for r in rows], trainer=None)
            assert len(out["completion_ids"]) == len(rows_prompts) == len(out["prompt_ids"])
            tags = {r[VERSION] for r in rows} | set(out[VERSION])
            (tag,) = tags
            assert {ids[0] for ids in out["completion_ids"]} == {tag}  # drawn by the version it is tagged with
            assert 0 <= version_now - tag <= max_staleness
            seen.append(version_now - tag)
            time.sleep(0.08)  # "training": the producer samples the next batches meanwhile
            engine.version += 1
        assert max(seen) >= 1  # it did run ahead
        metrics = pipeline.metrics()
        assert metrics["async/dropped_samples"] == 0 and metrics["async/overlap_share"] > 0
    finally:
        pipeline.close()
    assert pipeline._threads == []


@pytest.mark.parametrize(("max_staleness", "side_by_side"), [(1, 1), (2, 2), (4, 4)])
def test_the_batches_in_flight_are_sampled_side_by_side_as_many_as_the_bound_allows(max_staleness, side_by_side):
    engine, lock, now, most = _Engine(0.2), threading.Lock(), [0], [0]
    sample = engine.complete

    def counted(contexts, sampling):
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        try:
            return sample(contexts, sampling)
        finally:
            with lock:
                now[0] -= 1

    engine.complete = counted
    pipeline = AsyncRollouts(engine, _tokenize, max_staleness, G)
    try:
        for step in range(3):
            pipeline.swap(_rows(step), engine.version)
            engine.version += 1
    finally:
        pipeline.close()
    assert most[0] == side_by_side  # requests in flight follow from the bound, never past it


def test_the_first_batches_reuse_the_first_rows_then_rows_train_max_staleness_batches_later():
    pipeline = AsyncRollouts(_Engine(0.0), _tokenize, 2, G)
    try:
        trained = [pipeline.swap(_rows(step), step - 1)[0]["prompt"] for step in range(1, 6)]
    finally:
        pipeline.close()
    assert trained == ["p1-0", "p1-0", "p1-0", "p2-0", "p3-0"]


def test_with_two_steps_per_generation_one_batch_is_in_flight_and_two_versions_old_at_most():
    engine = _Engine(0.0)
    pipeline = AsyncRollouts(engine, _tokenize, 2, G, every=2)
    try:
        assert pipeline.depth == 1
        first = pipeline.swap(_rows(1), 0)
        time.sleep(0.1)
        engine.version = 2  # two optimizer steps on the same generation
        second = pipeline.swap(_rows(3), 2)
    finally:
        pipeline.close()
    assert [r["prompt"] for r in first] == [r["prompt"] for r in second]  # the pipeline's first fill, twice
    assert {r[VERSION] for r in second} == {0} and pipeline.dropped == 0  # two versions old: within the bound
    with pytest.raises(ValueError):
        AsyncRollouts(engine, _tokenize, 1, G, every=2)


class _SeededEngine(_Engine):
    """Records the seed each batch is sampled with, by the batch's first prompt id."""

    def __init__(self):
        super().__init__(0.0)
        self.seeds: list[tuple[int, int | None]] = []

    def complete(self, contexts, sampling):
        self.seeds.append((contexts[0][0], sampling.seed))
        return super().complete(contexts, sampling)


def _seeds(seed, generations: int = 5) -> list[tuple[int, int | None]]:
    """The (first prompt id, seed) of each batch trained in `generations` generations two steps apart (one
    producer, one batch in flight, as the demo's recipe runs). The engine serves the trainer's weights, as a run's
    does after each step's sync: no batch is too stale, so only the producer samples, in the order batches were
    queued (a batch sampled again on the trainer's thread would come in between as the machine's load has it)."""
    engine = _SeededEngine()
    pipeline = AsyncRollouts(engine, _tokenize, 2, G, every=2, seed=seed)
    try:
        for generation in range(generations):
            engine.version = 2 * generation
            pipeline.swap(_rows(generation + 1), 2 * generation)
    finally:
        pipeline.close()
    return engine.seeds[:generations]  # the one sampled ahead when the run stops may or may not have been drawn


def test_each_batch_is_sampled_under_a_seed_of_its_own_that_a_rerun_repeats():
    """What a batch draws must not depend on what else the engine served meanwhile (the async demo's samples once
    changed with the machine's load): each batch carries its own seed, a function of the run's seed and its place."""
    first = _seeds(0)
    assert len(first) >= 5 and all(seed is not None for _, seed in first)
    assert len({seed for _, seed in first}) == len(first)  # the first rows, queued twice, draw two ways
    # completion i of a batch is seeded seed + i by vLLM: the batches' ranges never meet
    starts = sorted(seed for _, seed in first)
    assert all(b - a >= G for a, b in itertools.pairwise(starts))
    assert _seeds(0) == first  # the same run, the same seeds, whatever the timing
    assert [s for _, s in _seeds(1)] != [s for _, s in first]  # another run seed, other draws
    assert {seed for _, seed in _seeds(None)} == {None}  # unseeded: the engine's own randomness


def test_a_batch_staler_than_the_bound_is_dropped_counted_and_sampled_again():
    engine = _Engine(0.0)
    pipeline = AsyncRollouts(engine, _tokenize, 1, G)
    try:
        pipeline.swap(_rows(1), 0)
        time.sleep(0.2)  # the batch queued behind it is drawn by version 0 ...
        engine.version = 5
        rows = pipeline.swap(_rows(2), 5)  # ... but the trainer is at version 5 (a stall, say)
    finally:
        pipeline.close()
    assert pipeline.dropped == 2 * G
    assert {r[VERSION] for r in rows} == {5}  # sampled again by the newest version the engine serves
    assert pipeline.metrics()["async/dropped_samples"] == 2 * G


def test_a_round_for_other_prompts_is_refused_and_the_producer_error_reaches_the_trainer():
    pipeline = AsyncRollouts(_Engine(0.0), _tokenize, 1, G)
    try:
        rows = pipeline.swap(_rows(1), 0)
        with pytest.raises(RuntimeError, match="other prompts"):
            pipeline(["x"] * len(rows), trainer=None)
    finally:
        pipeline.close()

    class Broken(_Engine):
        def complete(self, contexts, sampling):
            raise OSError("server gone")

    pipeline = AsyncRollouts(Broken(), _tokenize, 1, G)
    try:
        with pytest.raises(OSError, match="server gone"):
            pipeline.swap(_rows(1), 0)
    finally:
        pipeline.close()
    with pytest.raises(ValueError):
        AsyncRollouts(_Engine(), _tokenize, 0, G)


def test_importance_ratios_outside_the_band_are_counted_per_token_or_per_sequence():
    old = torch.log(torch.tensor([[1.0, 4.0], [1.0, 0.1]]))
    group = ScoredGroup(
        {
            "completion_ids": torch.ones(2, 2, dtype=torch.long),
            "completion_mask": torch.tensor([[1, 1], [1, 0]]),
            "old_per_token_logps": old,
            "sampling_per_token_logps": torch.zeros(2, 2),
        },
        "t",
        True,
        1,
        version=1,
    )
    assert outside_band(group, "token_truncate", None, 3.0) == (1, 3)  # the 4.0; the masked 0.1 is not counted
    assert outside_band(group, "sequence_mask", 0.5, 3.0) == (1, 2)  # sequences: 4.0 and 1.0
    pipeline = AsyncRollouts(_Engine(), _tokenize, 1, G)
    pipeline.observe([group], version_now=2, correction=("token_truncate", None, 3.0))
    metrics = pipeline.metrics()
    assert metrics["async/staleness_1"] == 1.0 and metrics["async/staleness_mean"] == 1.0
    assert metrics["async/importance_outside_band_share"] == round(1 / 3, 4)
