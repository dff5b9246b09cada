"""Dynamic sampling (DAPO) of TRL's generation batches: every generated group that can teach is trained.

`RolloutFilter.plan` builds one generation batch, the one TRL's `_prepare_inputs` then shuffles and splits into
`steps_per_generation` slices. It asks the group sampler for prompt groups, yields them as a round for the trainer to
generate and score, is sent the round back as scored groups (it never calls the trainer's round; it sees the trainer
otherwise as a `BatchView`), keeps the groups whose rewards differ, and repeats with `ceil(sampling.oversample x
missing)` new groups, at most `sampling.max_attempts` rounds, until the batch is full. Kept groups beyond a full batch
wait for the next batches (`sampling.carry_over`); after the last round a batch still short is topped up with groups
that showed no difference. So a batch always has the rows TRL expects, and `steps_per_generation`, gradient accumulation
and `num_items_in_batch` (recounted over the rows trained) agree with it. With `sampling.dynamic` off it runs one round
and only counts. With `sampling.max_staleness` each round trains the rows the asynchronous pipeline sampled ahead
(`azr.rollouts.pipeline`), its own rows queued in their place; with several processes the pipeline runs on the main one,
which hands each process its slice. Rounds arrive as scored groups (`azr.rollouts.seam`;
`azr.training.trl.private.fill_batch` runs the rounds).

Owns the keep decision, the carry-over pool, joining rounds' tensors and the `sampling/*` metrics. It never changes a
reward or an advantage: a kept group's advantages are those TRL computed in its own round (with the default per-group
scaling they depend on the group alone). A carried group's completions come from the policy before the last update: its
`old_per_token_logps` are taken when it is generated, so the clipped ratio corrects for the lag. Text prompts only: a
multimodal batch has tensors that are not per row, and is refused.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

import torch

from azr.config import AzrConfig, SamplingConfig
from azr.inputs import load_json
from azr.logs import atomic_write_json
from azr.rollouts.curriculum import Curriculum
from azr.rollouts.groups import GroupSampler, GroupSource
from azr.rollouts.pipeline import AsyncRollouts
from azr.rollouts.processes import OneProcess, Processes
from azr.rollouts.seam import BatchView, Row, ScoredBatch, ScoredGroup, ScoredRound
from azr.rollouts.tensors import detached, join_groups, split_groups, unsplittable

log = logging.getLogger(__name__)
STATE_FILE = "sampling_state.json"  # beside each checkpoint's trainer_state.json
CARRY_FILE = "sampling_carry{}.pt"  # each process's waiting groups: "" with one process, else "_<rank>"


def build_sampling(
    cfg: AzrConfig,
    rows: list[dict[str, Any]],
    sources: Sequence[GroupSource] = (),
    checkpoint: str | None = None,
    ranks: Processes | None = None,
) -> RolloutFilter:
    """The run's rollout filter over its group sampler: the training rows by task, the curriculum when
    `curriculum.enabled`, and `sources` of extra groups (self-play's, on the main process); restored from
    `checkpoint` on a resume."""
    by_task = {str(r["task_id"]): r for r in rows}
    curriculum = Curriculum(cfg.curriculum, list(by_task)) if cfg.curriculum.enabled else None
    groups = GroupSampler(by_task, curriculum=curriculum, sources=sources, seed=cfg.seed)
    # Decided from the config, the same on every process (only the main one holds the sources).
    sourced = cfg.self_play.enabled and (cfg.curriculum.replay or cfg.teacher_assist.enabled)
    return RolloutFilter(cfg.sampling, groups, checkpoint, ranks, composes=cfg.curriculum.enabled or sourced)


class RolloutFilter:
    """Fills each generation batch from rounds of the trainer's generation (see the module docstring). `checkpoint`,
    the folder a resumed run continues from, restores what `save` wrote there.

    With several processes (`ranks`), the group sampler runs on the main process over every process's rows, as the
    curriculum's statistics and self-play's sources live there (the trainer's observers see every process's rows on
    the main process only): each process gets its slice of the composed round. Each process keeps the groups it
    generated and its own carry-over pool (saved per process); the counts are summed over the processes."""

    def __init__(
        self,
        cfg: SamplingConfig,
        groups: GroupSampler,
        checkpoint: str | None = None,
        ranks: Processes | None = None,
        composes: bool = True,
    ):
        self.cfg, self.groups, self.ranks = cfg, groups, ranks or OneProcess()
        self.composes = composes  # False: the dataloader's batch is generated as it is, unless dynamic sampling asks
        self.pipeline: AsyncRollouts | None = None  # asynchronous GRPO (sampling.max_staleness >= 1)
        self.pool: list[ScoredGroup] = []  # kept groups waiting for a later batch, oldest first
        self.waiting = 0  # groups waiting, every process's
        self.batches = 0  # generation batches filled
        self.totals: Counter[str] = Counter()
        self._window: Counter[str] = Counter()  # the same counts since the last log
        if checkpoint is not None:
            self._resume(Path(checkpoint))

    def plan(self, trl: BatchView, rows: list[Row]) -> Generator[list[Row], ScoredRound, dict[str, Any]]:
        """The generation batch for the dataloader's `rows` (TRL's output dict over the same number of rows), as a
        plan: it yields the rows of each round to generate and score, is sent each round's `ScoredRound` back,
        and returns the batch."""
        size, step = trl.group_size, trl.step
        self.batches += 1
        if not self.cfg.dynamic:
            rows = self._compose(rows, size, step)
            if self.pipeline is not None:
                trl.sync_backend()  # the weights trained now are served (version step - 1) before anything queues
                rows = self._swap(rows, step - 1)
            scored = yield rows
            if self.pipeline is not None:
                self.pipeline.observe(scored.groups, step - 1, trl.correction)
            signal = scored.signals  # every process's groups: every process counts the same
            self._count(generated=len(signal), kept=sum(signal), trained=len(signal), useful=sum(signal), rounds=1)
            return scored.batch
        if len(rows) % size:
            raise ValueError(f"sampling.dynamic: {len(rows)} rows on this process are not whole groups of {size}")
        need, device = len(rows) // size, trl.device
        counts: Counter[str] = Counter()
        kept, spare, seen, generated, rounds = self._carried(counts, step - 1), [], set(), 0, 0
        carried_in = len(kept)
        if self.pipeline is not None:
            trl.sync_backend()  # as without dynamic sampling: the weights trained now are served first
        while rounds < self.cfg.max_attempts:
            missing = trl.global_max(need - len(kept))  # every process runs the same rounds
            if missing <= 0:
                break
            n = math.ceil(self.cfg.oversample * missing)
            batch = self._compose(rows, size, step, attempt=rounds, groups=n, exclude=seen)
            if self.pipeline is not None:  # this round's groups are queued; a round's sampled ahead is scored now
                batch = self._swap(batch, step - 1)
                n = len(batch) // size
            scored = yield batch
            if unsplittable(scored.batch):
                split_groups(scored.batch, batch, [], self.batches)  # raises, naming the keys
            for group in scored.groups:
                (kept if group.signal else spare).append(group)
                seen.add(group.task_id)
            generated, rounds = generated + n, rounds + 1
        trained, surplus = kept[:need], kept[need:] if self.cfg.carry_over else []
        short = need - len(trained)
        trained += spare[len(spare) - short :] if short else []  # the newest of the groups without a difference
        self._add_old_logps(trl, trained, surplus, device)
        if self.pipeline is not None:
            self.pipeline.observe(trained, step - 1, trl.correction)
        self.pool = [detached(g) for g in surplus]
        batch = join_groups(trained, trl.pad_id, trl.pad_multiple, device)
        batch["num_items_in_batch"] = trl.items_in_batch(batch)
        counts.update(
            generated=generated,
            kept=len(kept) - carried_in,
            trained=need,
            useful=need - short,
            carried_in=min(carried_in, need),
            short=short,
            dropped=max(len(kept) - need - len(surplus), 0),
            waiting=len(self.pool),
        )
        summed = dict(zip(counts, self.ranks.total(*counts.values()), strict=True))  # one collective a batch
        self.waiting = int(summed.pop("waiting"))
        self._count(rounds=rounds, **{k: int(v) for k, v in summed.items()})
        if short:
            log.info("sampling: step %d tops up %d of %d groups after %d rounds", step, short, need, rounds)
        return batch

    def _compose(self, rows: list[dict[str, Any]], size: int, step: int, **draw: Any) -> list[dict[str, Any]]:
        """This process's rows of the round the group sampler composes on the main process over every process's
        `rows` (in rank order, as TRL gathers them); with `groups` in `draw`, that many groups per process."""
        if self.ranks.world == 1 or (draw.get("groups") is None and not self.composes):
            return self.groups.compose(rows, size, step, **draw)
        world, rank = self.ranks.world, self.ranks.rank
        parts = self.ranks.gather((rows, sorted(draw.get("exclude", ()))))
        if draw.get("groups") is not None:
            draw["groups"] *= world
        draw["exclude"] = {t for _, seen in parts for t in seen}

        def compose() -> list[dict[str, Any]]:
            return self.groups.compose([r for p, _ in parts for r in p], size, step, **draw)

        whole = self.ranks.on_main(compose, "the group sampler")
        # The dataloader's slices as they were; or, when asked for `groups` each, equal slices of whole groups.
        sizes = [len(p) for p, _ in parts] if draw.get("groups") is None else [len(whole) // world] * world
        start = sum(sizes[:rank])
        return whole[start : start + sizes[rank]]

    def _swap(self, rows: list[dict[str, Any]], version_now: int) -> list[dict[str, Any]]:
        """This process's rows of the batch the asynchronous pipeline sampled ahead, `rows` queued in its place. With
        several processes the pipeline runs on the main process: every process's rows are gathered and queued there
        as one batch, and each process gets its slice of the batch sampled ahead, completions included (the
        dataloader's slices; or, when a round of dynamic sampling differs in size, equal slices of whole groups)."""
        assert self.pipeline is not None
        if self.ranks.world == 1:
            return self.pipeline.swap(rows, version_now)
        pipeline, parts = self.pipeline, self.ranks.gather(rows)

        def swap() -> Any:
            pipeline.swap([r for p in parts for r in p], version_now)
            return pipeline.ready

        sampled = self.ranks.on_main(swap, "the asynchronous pipeline")
        sizes = [len(p) for p in parts]
        if len(sampled.rows) != sum(sizes):
            sizes = [len(sampled.rows) // self.ranks.world] * self.ranks.world
        start = sum(sizes[: self.ranks.rank])
        return pipeline.hand(sampled.part(start, start + sizes[self.ranks.rank]))

    def observe(self, batch: ScoredBatch) -> None:
        """Trainer observer of each `ScoredBatch` (every round's): the curriculum's statistics."""
        if self.groups.curriculum is not None:
            self.groups.curriculum.observe(batch)

    def _carried(self, counts: Counter[str], version_now: int) -> list[ScoredGroup]:
        """The pool's groups still young enough to train, oldest first; the rest are dropped and counted. Under
        asynchronous GRPO a group older than `max_staleness` policy versions is dropped too: the bound holds for
        carried groups as for the pipeline's."""
        bound = self.cfg.max_staleness if self.pipeline is not None else math.inf
        young = [
            g for g in self.pool if self.batches - g.born <= self.cfg.carry_over and g.staleness(version_now) <= bound
        ]
        counts.update(dropped=len(self.pool) - len(young))
        self.pool = []
        return young

    def _add_old_logps(
        self, trl: BatchView, trained: list[ScoredGroup], surplus: list[ScoredGroup], device: torch.device
    ) -> None:
        """Carried groups need the log-probs of the policy that generated them; so do the fresh groups trained beside
        one (TRL's loss takes old log-probs for the whole batch or for none). TRL has taken them already when its
        generation and updates are misaligned; else they are computed here, in one pass, before any update."""
        mixed = any("old_per_token_logps" in g.tensors for g in trained)
        lacking = [g for g in (trained if mixed else []) + surplus if "old_per_token_logps" not in g.tensors]
        if not lacking:
            return
        logps = trl.policy_logps(join_groups(lacking, trl.pad_id, None, device, trim=False))
        start = 0
        for group in lacking:
            rows, width = group.tensors["completion_ids"].shape
            group.tensors["old_per_token_logps"] = logps[start : start + rows, :width]
            start += rows

    def _count(self, **counts: int) -> None:
        self.totals.update(counts)
        self._window.update(counts)

    def metrics(self) -> dict[str, float]:
        """`sampling/*` for the trainer's log, over the batches filled since the last call: the share of generated
        groups kept, generated groups per trained group, the share of trained groups with no difference, and the
        groups carried over (waiting now), carried in, topped up (`short`) and dropped (beyond a full batch with
        carry-over off, or waited too long)."""
        w, self._window = self._window, Counter()
        out: dict[str, float] = {"sampling/carried_over": self.waiting}
        if w["generated"]:
            out["sampling/kept_share"] = round(w["kept"] / w["generated"], 4)
        if w["trained"]:
            out["sampling/generated_per_trained"] = round(w["generated"] / w["trained"], 4)
            out["sampling/zero_variance_share"] = round(1 - w["useful"] / w["trained"], 4)
        for key, name in (("carried_in", "carried_in"), ("short", "short_groups"), ("dropped", "dropped_groups")):
            out[f"sampling/{name}"] = w[key]
        out["sampling/rounds"] = w["rounds"]
        out["sampling/unaligned_batches"] = self.groups.totals["unaligned_batches"]
        return out | (self.pipeline.metrics() if self.pipeline is not None else {})

    # ------------------------------------------------------------------------------------------------ state
    def save(self, folder: Path) -> None:
        """What a resume from this checkpoint needs to continue exactly, called on every process: the counts and the
        curriculum's statistics (`sampling_state.json`, atomic, by the main process) and each process's groups
        waiting to be trained (`sampling_carry.pt`, or `sampling_carry_<rank>.pt` with several processes)."""
        carry = Path(folder) / self._carry_file()
        if self.pool:
            saved = [
                {"tensors": g.tensors, "task_id": g.task_id, "born": g.born, "version": g.version} for g in self.pool
            ]
            torch.save(saved, carry)
        else:
            carry.unlink(missing_ok=True)
        if self.ranks.main:
            state = {"batches": self.batches, "totals": dict(self.totals), "waiting": self.waiting}
            atomic_write_json(Path(folder) / STATE_FILE, state | {"groups": self.groups.to_json()})

    def _carry_file(self) -> str:
        return CARRY_FILE.format(f"_{self.ranks.rank}" if self.ranks.world > 1 else "")

    def _resume(self, checkpoint: Path) -> None:
        path = checkpoint / STATE_FILE
        try:
            state = load_json(path.read_text())
        except (OSError, ValueError) as exc:
            log.warning("sampling: no readable %s (%s); the curriculum starts afresh", path, exc)
            return
        self.batches, self.waiting = int(state["batches"]), int(state.get("waiting", 0))
        self.totals.update(state["totals"])
        self.groups.restore(state["groups"])
        if (checkpoint / self._carry_file()).exists():
            saved = torch.load(checkpoint / self._carry_file(), map_location="cpu", weights_only=True)
            self.pool = [ScoredGroup(g["tensors"], g["task_id"], True, g["born"], g.get("version", 0)) for g in saved]
        log.info("sampling: resumed from %s (%d groups waiting)", path, len(self.pool))
