"""Asynchronous GRPO's pipeline: the next batches' episodes are played while the trainer trains.

Each generation batch's rows are handed in (`swap`) and queued; producer threads, one per batch in flight, play the
queue in order, side by side: every row an episode of the run's environment (`azr.rollouts.ahead`: the one runner,
each turn sampled from the newest policy version the sampler serves, adapter mode's `azr.serving.LoraSync` with one
LoRA per version, the environment answering between turns), and `swap` hands back the oldest queued rows, tagged
with the version that sampled them (an episode's first turn's: the oldest of its turns). With a generation every
`every` optimizer steps (TRL's steps_per_generation x num_iterations), `max_staleness` N keeps N // every batches in
flight, so a batch is played during the steps before it trains; the first call queues its rows that many times plus
one to fill the pipeline. A batch whose version lags the weights being trained by more than N (which the order of
the queue rules out, but a stall could not) is dropped, counted, and played again now. Where the playbook grades
(`Playbook.grade`), the producer runs the batch's programs in the sandbox as soon as it is played, so the reward call
of the step that trains it finds their outcomes and runs none. TRL's round then takes the
episodes through its public `rollout_func` (this object is one) as token ids, the sampler's log-probabilities and
`env_mask`, rewards them, computes the advantages and weighs each policy token by its importance ratio against the
sampler's log-probability (TRL's `vllm_importance_sampling_*` correction). Nothing in flight is saved: a resumed run
samples afresh, and no sample is trained twice. Each batch is played under a seed of its own (`batch_seed`: the
run's seed, the version it is queued at, its place among that version's batches), so what a batch draws never
depends on what else the sampler was doing meanwhile: a run samples the same episodes however its timing falls.

Owns the queue, the producer and the `async/*` metrics; not the episodes' rules, the rewards, or the weights' transfer.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from azr.rollouts.ahead import Playbook, play_ahead
from azr.rollouts.episodes import Episode
from azr.rollouts.seam import VERSION, Row, ScoredGroup, TokenSampler

log = logging.getLogger(__name__)

__all__ = ["AsyncRollouts", "Sampled", "batch_seed", "outside_band"]


@dataclass
class _Batch:
    rows: list[Row]
    prompt_ids: list[list[int]]  # one per group
    seed: int | None = None
    done: threading.Event = field(default_factory=threading.Event)
    version: int = -1
    episodes: list[Episode] = field(default_factory=list)
    columns: dict[str, list[object]] = field(default_factory=dict)
    seconds: float = 0.0
    error: BaseException | None = None


@dataclass
class Sampled:
    """A batch's episodes as TRL's round takes them, row by row: TRL's `rollout_func` columns (prompt ids,
    completion ids, the sampler's per-token log-probabilities, `env_mask` where an environment spoke, each row's
    `policy_version`, and the playbook's own), and the version that drew them. A slice (`part`) is one process's
    rows."""

    rows: list[Row]
    columns: dict[str, list[object]]
    version: int

    def part(self, start: int, end: int) -> Sampled:
        cut = slice(start, end)
        columns = {k: (v[cut] if v is not None else None) for k, v in self.columns.items()}
        return Sampled(self.rows[cut], columns, self.version)  # type: ignore[arg-type]

    def tagged(self) -> list[Row]:
        """The rows, each with the version that sampled it (column `policy_version`)."""
        versions = self.columns.get(VERSION) or [self.version] * len(self.rows)
        return [{**row, VERSION: v} for row, v in zip(self.rows, versions, strict=True)]


class AsyncRollouts:
    """The pipeline of one training run. `sampler` draws each turn from the newest policy version it serves (its
    continuations tagged with it); `tokenize` turns a list of prompts into token ids (the trainer's own); `seed`
    (the run's) seeds each batch's sampling (None: the sampler's own randomness, which depends on what else it ran);
    `playbook` says which environment plays each row (default: one turn, scored by the trainer); call `start()` once
    the sampler serves a version, and `close()` however training ends."""

    def __init__(
        self,
        sampler: TokenSampler,
        tokenize: Callable[[list[object]], list[list[int]]],
        max_staleness: int,
        group_size: int,
        every: int = 1,
        seed: int | None = None,
        playbook: Playbook | None = None,
    ):
        if max_staleness < every:
            raise ValueError(f"AsyncRollouts: max_staleness {max_staleness} is below the {every} steps per generation")
        self.sampler, self.tokenize, self.max_staleness, self.size = sampler, tokenize, max_staleness, group_size
        # Generation batches in flight: a batch sampled d generations ahead is up to d x `every` versions old.
        self.depth = max_staleness // every
        self.seed = seed
        self.playbook = playbook or Playbook()
        self._queued_at: Counter[int] = Counter()  # batches queued at each version (each gets a seed of its own)
        self._queue: deque[_Batch] = deque()  # handed in, not yet trained, oldest first
        self._todo: deque[_Batch] = deque()  # of which not yet sampled
        self._wake = threading.Condition()
        self._stop = False
        self._threads: list[threading.Thread] = []
        self._ready: Sampled | None = None  # the completions TRL's round takes next (this process's)
        self._window: Counter[str] = Counter()
        self._seconds: Counter[str] = Counter()
        self.dropped = 0  # samples dropped for staleness, in all
        self.last: list[Episode] = []  # the episodes of the batch TRL's round took last (this process's)

    # ------------------------------------------------------------------------------------------------ producer
    def start(self) -> None:
        """One producer per batch in flight: the batches queued ahead are played side by side (the server batches
        concurrent requests), so the requests in flight follow from the staleness bound, as generation throughput
        does when generation is the longer part of a step."""
        if not self._threads:
            self._threads = [
                threading.Thread(target=self._produce, name=f"azr-async-rollouts-{i}", daemon=True)
                for i in range(max(1, self.depth))
            ]
            for thread in self._threads:
                thread.start()

    def close(self) -> None:
        """Stop the producers; what they were sampling is discarded (never trained)."""
        with self._wake:
            self._stop = True
            self._todo.clear()
            self._wake.notify_all()
        for thread in self._threads:
            thread.join(timeout=60)
        self._threads = []
        self._queue.clear()

    def _produce(self) -> None:
        playbook = self.playbook.for_thread()
        while True:
            with self._wake:
                while not self._todo and not self._stop:
                    self._wake.wait()
                if self._stop:
                    return
                batch = self._todo.popleft()
            self._sample(batch, playbook)

    def _sample(self, batch: _Batch, playbook: Playbook) -> None:
        started = time.perf_counter()
        graded = 0.0
        try:
            batch.version, batch.episodes, batch.columns = play_ahead(
                self.sampler, playbook, batch.rows, batch.prompt_ids, self.size, batch.seed
            )
            if playbook.grade is not None:  # the batch's programs run now, while the trainer trains
                clock = time.perf_counter()
                playbook.grade(batch.episodes, batch.rows, batch.columns)
                graded = time.perf_counter() - clock
        except BaseException as exc:  # handed to the trainer, which raises it
            batch.error = exc
        batch.seconds = time.perf_counter() - started
        with self._wake:  # producers side by side
            self._seconds["generate"] += batch.seconds - graded
            self._seconds["grade"] += graded
        batch.done.set()

    # ------------------------------------------------------------------------------------------------ trainer
    def swap(self, rows: list[Row], version_now: int) -> list[Row]:
        """Queue `rows` (whole groups of `group_size`) for sampling and return the rows to train now, sampled by a
        version at most `max_staleness` behind `version_now` and tagged with it (column `policy_version`)."""
        if len(rows) % self.size:
            raise ValueError(f"sampling.max_staleness: {len(rows)} rows are not whole groups of {self.size}")
        self.start()
        for _ in range(self.depth + 1 if not self._queue else 1):
            self._put(rows, version_now)
        batch = self._queue.popleft()
        waited = time.perf_counter()
        batch.done.wait()
        self._seconds["wait"] += time.perf_counter() - waited
        if batch.error is not None:
            raise batch.error
        if version_now - batch.version > self.max_staleness:
            log.warning("async: a batch of version %d is too stale at %d; sampled again", batch.version, version_now)
            self.dropped += len(batch.rows)
            self._window["dropped"] += len(batch.rows)
            fresh = _Batch(batch.rows, batch.prompt_ids, self._next_seed(version_now))
            self._sample(fresh, self.playbook)  # on the trainer's thread: its own tokenizer
            self._seconds["wait"] += fresh.seconds
            if fresh.error is not None:
                raise fresh.error
            batch = fresh
        self._ready = Sampled(batch.rows, batch.columns, batch.version)
        self.last = batch.episodes
        return self._ready.tagged()

    @property
    def ready(self) -> Sampled | None:
        """What the last `swap` returned, with its episodes' columns (for the main process to hand out)."""
        return self._ready

    def hand(self, part: Sampled) -> list[Row]:
        """With several processes: this process's share of the batch the main process swapped in (its `ready`,
        sliced), for TRL's round here to take; returns its rows, tagged. The producer runs on the main process
        only."""
        self._ready = part
        return part.tagged()

    def _put(self, rows: list[Row], version_now: int) -> None:
        prompts = [row["prompt"] for row in rows[:: self.size]]
        batch = _Batch([dict(r) for r in rows], self.tokenize(prompts), self._next_seed(version_now))
        self._queue.append(batch)
        with self._wake:
            self._todo.append(batch)
            self._wake.notify()

    def _next_seed(self, version_now: int) -> int | None:
        if self.seed is None:
            return None
        self._queued_at[version_now] += 1
        return batch_seed(self.seed, version_now, self._queued_at[version_now] - 1)

    def __call__(self, prompts: list[object], trainer: object) -> dict[str, list[object]]:
        """TRL's `rollout_func`: the episodes of the batch `swap` returned last (whose rows' prompts are `prompts`,
        one per episode), as TRL takes them: prompt ids and completion ids per episode, each completion token's
        sampler log-probability (0.0 at an environment's tokens, which `env_mask` masks out of the loss), each
        row's `policy_version`, and the playbook's columns."""
        batch, self._ready = self._ready, None
        if batch is None or len(prompts) != len(batch.rows):
            raise RuntimeError("sampling.max_staleness: TRL's round asked for completions the pipeline did not swap in")
        if any(p != r["prompt"] for p, r in zip(prompts, batch.rows, strict=True)):
            raise RuntimeError("sampling.max_staleness: TRL's round holds other prompts than the batch sampled")
        return {k: (list(v) if v is not None else None) for k, v in batch.columns.items()}  # type: ignore[misc]

    # ------------------------------------------------------------------------------------------------ metrics
    def observe(
        self, groups: list[ScoredGroup], version_now: int, correction: tuple[str, float | None, float | None]
    ) -> None:
        """The groups of a trained batch: their staleness, and how many of their importance ratios (TRL's
        correction: `mode`, lower and upper bound) fell outside the band and were clipped or masked."""
        mode, low, high = correction
        for group in groups:
            rows = group.tensors["completion_ids"].shape[0]
            self._window[f"staleness_{group.staleness(version_now)}"] += rows
            self._window["rows"] += rows
            outside, counted = outside_band(group, mode, low, high)
            self._window["outside"] += outside
            self._window["ratios"] += counted

    def metrics(self) -> dict[str, float]:
        """`async/*` since the last call: the staleness histogram of trained samples (`async/staleness_<k>`, a share
        of the rows, k = 0..max_staleness), its mean, the samples dropped as too stale, and the seconds spent
        sampling and grading ahead against those the trainer waited for them (the rest overlapped training)."""
        w, self._window = self._window, Counter()
        s, self._seconds = self._seconds, Counter()
        rows = w["rows"]
        out: dict[str, float] = {"async/dropped_samples": w["dropped"], "async/dropped_samples_total": self.dropped}
        if rows:
            shares = {k: w[f"staleness_{k}"] / rows for k in range(self.max_staleness + 1)}
            out |= {f"async/staleness_{k}": round(v, 4) for k, v in shares.items()}
            out["async/staleness_mean"] = round(sum(k * v for k, v in shares.items()), 4)
        out["async/generate_seconds"] = round(s["generate"], 3)
        out["async/grade_seconds"] = round(s["grade"], 3)
        out["async/wait_seconds"] = round(s["wait"], 3)
        if s["generate"] + s["grade"]:
            out["async/overlap_share"] = round(max(0.0, 1 - s["wait"] / (s["generate"] + s["grade"])), 4)
        if w["ratios"]:
            out["async/importance_outside_band_share"] = round(w["outside"] / w["ratios"], 4)
        return out


def batch_seed(seed: int, version: int, index: int) -> int:
    """The sampling seed of the `index`-th batch queued while the trainer is at `version`, in a run seeded `seed`: a
    hash, so that the seeds vLLM derives for a batch's completions (`+ i`) never meet another batch's; below 2**48,
    well inside vLLM's int64 seeds."""
    digest = hashlib.sha256(f"{seed}:{version}:{index}".encode()).digest()
    return int.from_bytes(digest[:6], "big")


def outside_band(group: ScoredGroup, mode: str, low: float | None, high: float | None) -> tuple[int, int]:
    """How many of `group`'s importance ratios (the policy's old log-probs against the sampler's, per token or per
    sequence as TRL's `mode` says) fall outside [low, high], and how many there are."""
    import torch

    old, sampled = group.tensors.get("old_per_token_logps"), group.tensors.get("sampling_per_token_logps")
    if old is None or sampled is None:
        return 0, 0
    mask = group.tensors["completion_mask"].bool()
    diff = torch.nan_to_num((old - sampled) * mask, nan=0.0)
    ratios = diff.sum(dim=1).exp() if mode.startswith("sequence") else diff.exp()[mask]
    lo, hi = (low if low is not None else -math.inf), (high if high is not None else math.inf)
    return int(((ratios < lo) | (ratios > hi)).sum()), int(ratios.numel())
