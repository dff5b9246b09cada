"""`AZRGRPOTrainer`: TRL's GRPOTrainer with the few changes azr needs, each explained where it is made: ungraded
completions masked, the reward stage timed, scored batches handed to observers, a self-play round's hooks around
generation, and generation batches composed by a `RolloutFilter` (`azr.rollouts`), whose rounds it runs
(`azr.training.trl.private.fill_batch`). It computes advantages and the loss as TRL does and knows no config file.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from accelerate.utils import gather_object
from trl import GRPOTrainer
from trl.trainer.utils import RepeatSampler

from azr.models import keep_vectors_fp32, sharded_launch
from azr.rewards import CodeGrader, is_optional
from azr.rollouts import Packed, RolloutFilter, RoundHooks, ScoredBatch, pack, ungraded
from azr.training.callbacks import SandboxHealth
from azr.training.episodes.rounds import episode_completions
from azr.training.trl.private import TrainerBatches, fill_batch, packed_logps

log = logging.getLogger(__name__)


class AZRGRPOTrainer(GRPOTrainer):
    """GRPOTrainer plus:

    - IA³ scales and trained norm weights are held in float32 (`azr.models.keep_vectors_fp32`): TRL casts the
      trainable parameters of a quantized model to bfloat16, where steps near 1.0 round away.
    - `_calculate_rewards` masks every row a reward could not score (None from a reward that is not optional,
      `azr.rewards.is_optional`: the `tests` reward's sandbox error, a custom reward's infrastructure failure):
      TRL sums rewards with nansum, so such a row would otherwise keep its format reward and be pushed up or down
      for the failure. A row NaN throughout stays out of its group's mean and spread in TRL and gets advantage 0;
      `_score_round` also takes it out of the loss (its completion mask zeroed). The masked rows are counted
      (`rewards/ungraded`, and `rewards/<name>/ungraded` per reward, in every training log). It also times the
      reward stage, and passes the scored batch to observers. The reward weights are the rubric's: TRL's
      `reward_weights` are set from it (`azr.training.trl.trainer_args`) and no recipe field can replace them.
    - The prompt order of each epoch depends on the seed and the epoch only: TRL's sampler draws every epoch's
      shuffle from one generator, which a resumed run restarts, so it would replay the first epoch's order.
    - `grader` (and `health`: more counters, such as Absolute Zero's validator and judge) is checked after every
      step by `azr.training.callbacks.SandboxHealth`, so a run whose infrastructure failure rate passes
      `sandbox.max_infra_failure_rate` stops with `SandboxUnhealthy` instead of training on noise; on several
      processes the failure counts are summed over them first, so that every rank stops at the same step.
    - `observers` are called on the main process only, with the batch of every process (gathered in rank order,
      as TRL gathers the rewards), so the generation log, the scoreboard and the curriculum see each completion
      once.
    - `rounds` (for self-play: an `azr.selfplay.Arena`, or on several processes `azr.rollouts.MainRounds`, which
      plays it on the main process) gets each round's rows before the policy generates (it starts the opponent on
      the tasks), sets its columns just before the rewards, observes each scored batch, and adds its metrics to
      every log.
    - `sampling` (an `azr.rollouts.RolloutFilter`) builds each generation batch in training: which prompt groups
      are generated (the group sampler), and with dynamic sampling which generated groups are trained. It sees the
      trainer as an `azr.rollouts.BatchView` and receives its rounds as data
      (`azr.training.trl.private.fill_batch`), and adds its metrics to every log.
    - `metered`: more parts whose `metrics()` join every log (`data.hardened`'s `HardenedWatch`).
    - `adjust_advantages` lets a subclass replace TRL's group-mean advantages of each round (Absolute Zero's
      per-(type, role) baseline) without overriding a private TRL method itself: the four this class overrides
      (`_generate_and_score_completions`, `_calculate_rewards`, `_get_train_sampler`,
      `_get_per_token_logps_and_entropies`) are pinned by tests/training/test_trl_private.py, and every other
      private access is `azr.training.trl.private`'s.
    - Every forward pass of the policy (and of the reference model) over a text batch runs on its sequences packed
      by a token budget (`azr.rollouts.pack`): TRL pads every row to the longest, so a multi-turn batch whose long
      transcripts only some rows reach would cost rows x the longest. The log-probabilities come back in TRL's
      padded layout, the same values (0 where nothing is scored). Before the first packed pass the trainer checks on
      two of the batch's own sequences that the model keeps packed sequences apart (transformers does so from the
      position ids for its own attention code); a model that does not runs padded as TRL runs it. It then times one
      forward pass of that batch each way: a packed position can cost more than a padded one (on a 1 M-parameter
      model the packed pass saved less than its own cost), so from then on a batch is packed only where its packed
      positions, at the packed cost, take less time than its padded ones (`position_seconds`).
    """

    def __init__(
        self,
        *args: Any,
        grader: CodeGrader | None = None,
        observers: Sequence[Callable[[ScoredBatch], None]] = (),
        rounds: RoundHooks | None = None,
        sampling: RolloutFilter | None = None,
        health: Sequence[Any] = (),
        metered: Sequence[Any] = (),
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        keep_vectors_fp32(self.model)  # TRL cast them to bfloat16 on a quantized base; the optimizer comes later
        self.grader = grader
        self.rounds = rounds
        self.sampling = sampling
        self.metered = list(metered)
        self.round_rewards: torch.Tensor | None = None  # the last round's rewards, every process's rows
        self.round_rows: list[dict[str, Any]] = []  # this process's rows of the round being generated
        self.observers = list(observers) + ([rounds.observe] if rounds is not None else [])
        self.reward_seconds = 0.0  # reward-stage wall time since the metrics callback last read it
        self.generation_seconds = 0.0  # the rest of TRL's generation and scoring, likewise (rewards excluded)
        self._lengths: list[int] = []  # completion lengths (every process's) since the last log
        # Per reward function: whether its None leaves the row ungraded; then the rows masked since the last log,
        # and each function's share of them.
        self._required = torch.tensor([not is_optional(f) for f in self.reward_funcs], dtype=torch.bool)
        self._ungraded = torch.zeros(len(self.reward_funcs) + 1)  # [rows masked, each function's Nones among them]
        self._scored_rows = 0
        # None until the first packed pass has checked the model (`_packs`). Off where the weights are sharded (ZeRO-3,
        # FSDP): every forward pass gathers parameters collectively there, so all ranks must run as many forward
        # chunks, and each rank's packing choice (its own batch, its own timing) could make them differ and hang.
        self.packing: bool | None = False if sharded_launch() else None
        # Seconds per position of a forward pass, (padded, packed), timed on the first batch that packs.
        self.position_seconds: tuple[float, float] | None = None
        checked = ([grader] if grader is not None else []) + list(health)
        if checked:
            self.add_callback(SandboxHealth(checked, self.summed_over_processes))

    def _get_train_sampler(self, dataset=None):
        sampler = super()._get_train_sampler(dataset)
        if type(sampler) is RepeatSampler:
            sampler.__class__ = _EpochSampler  # the same fields; only `set_epoch` is added
        return sampler

    def _get_per_token_logps_and_entropies(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        **multimodal,
    ):
        padded = (model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss)
        if self.packing is False or compute_aux_loss or any(v is not None for v in multimodal.values()):
            return super()._get_per_token_logps_and_entropies(*padded, **multimodal)
        packed = pack(input_ids, attention_mask, logits_to_keep, pad_id=self._pad_id)
        if packed is None or packed.tokens >= input_ids.numel() or not self._packs(model, input_ids, attention_mask):
            return super()._get_per_token_logps_and_entropies(*padded, **multimodal)
        chunk = batch_size or input_ids.size(0)
        if self.position_seconds is None:
            self.position_seconds = self._time_positions(
                model, input_ids, attention_mask, logits_to_keep, packed, chunk
            )
        per_padded, per_packed = self.position_seconds
        if packed.tokens * per_packed >= input_ids.numel() * per_padded:
            return super()._get_per_token_logps_and_entropies(*padded, **multimodal)
        logps, entropies = packed_logps(self, model, packed, chunk, compute_entropy)
        return logps, entropies, None

    @property
    def _pad_id(self) -> int:
        """The id packed bins are padded with (never attended to, never scored)."""
        return TrainerBatches(self).pad_id or 0

    def _packs(self, model, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> bool:
        """Whether `model` keeps packed sequences apart, checked once: two of the batch's sequences packed into one
        bin must score their tokens as they do padded, one a row (the largest difference within float rounding)."""
        if self.packing is not None:
            return self.packing
        two = [r for r in range(input_ids.size(0)) if int(attention_mask[r].sum()) > 1][:2]
        if len(two) < 2:
            return False  # nothing to check it on yet: this batch runs padded
        ids, mask = input_ids[two], attention_mask[two]
        keep = ids.size(1) - 1  # every position that has one before it
        both = pack(ids, mask, keep, budget=int(mask.sum()), pad_id=self._pad_id)
        if both is None:
            return False  # not TRL's layout: this batch runs padded
        with torch.no_grad():
            apart, _, _ = super()._get_per_token_logps_and_entropies(model, ids, mask, keep, batch_size=2)
            together, _ = packed_logps(self, model, both, 2, False)
        gap = float((apart - together)[both.rows, both.cols].abs().max())
        tolerance = 1e-3 if next(model.parameters()).dtype == torch.float32 else 5e-2
        self.packing = gap <= tolerance
        if not self.packing:
            log.warning(
                "sequences are not packed for this model: packed, two sequences scored %.3g apart from their "
                "padded log-probabilities (more than %g), so its forward passes attend across them",
                gap,
                tolerance,
            )
        return self.packing

    def _time_positions(
        self, model, input_ids: torch.Tensor, attention_mask: torch.Tensor, keep: int, packed: Packed, chunk: int
    ) -> tuple[float, float]:
        """Seconds per position of one forward pass over this batch, padded and packed (no gradients, once a run: the
        two-sequence check in `_packs` has already run both paths, so neither pays a first call's set-up)."""

        def timed(forward) -> float:
            if input_ids.is_cuda:
                torch.cuda.synchronize(input_ids.device)
            start = time.perf_counter()
            with torch.no_grad():
                forward()
            if input_ids.is_cuda:
                torch.cuda.synchronize(input_ids.device)
            return time.perf_counter() - start

        padded = timed(
            lambda: GRPOTrainer._get_per_token_logps_and_entropies(
                self, model, input_ids, attention_mask, keep, batch_size=chunk
            )
        )
        together = timed(lambda: packed_logps(self, model, packed, chunk, False))
        costs = (padded / input_ids.numel(), together / packed.tokens)
        log.info(
            "packing: a forward pass costs %.3g ms a position padded and %.3g ms packed (this batch: %d positions "
            "padded, %d packed): a batch is packed where that takes less time",
            1e3 * costs[0],
            1e3 * costs[1],
            input_ids.numel(),
            packed.tokens,
        )
        return costs

    def _generate_and_score_completions(self, inputs):
        if self.sampling is not None and self.model.training:
            return fill_batch(self.sampling, TrainerBatches(self), list(inputs))
        return self._score_round(list(inputs))[0]

    def _score_round(self, rows: list[dict[str, Any]]) -> tuple[dict[str, Any], torch.Tensor]:
        """One round of TRL's generation and scoring for `rows`: its output, and the rewards of every process's rows
        in rank order (rows, reward functions; NaN where not graded)."""
        if self.rounds is not None and self.model.training:
            # Before generating, so that the opponent answers while the policy generates and its own code is graded.
            rows = self.rounds.start(rows, self.state.global_step + 1)
        self.round_rows = rows  # what an episode `rollout_func` starts its episodes from (TRL passes it the prompts)
        started, rewards_before = time.perf_counter(), self.reward_seconds
        output = super()._generate_and_score_completions(rows)
        self.generation_seconds += time.perf_counter() - started - (self.reward_seconds - rewards_before)
        self.adjust_advantages(output, rows)
        self._mask_ungraded(output, len(rows))
        return output, self.round_rewards

    def _mask_ungraded(self, output: dict[str, Any], count: int) -> None:
        """Take this process's ungraded rows (NaN throughout: `_calculate_rewards`) out of the loss: their advantage
        is 0 already, and their completion mask is zeroed, so they add no KL term and no tokens to the loss's
        normaliser. `num_items_in_batch` is counted again (a collective, as TRL's own count: every round)."""
        if self.round_rewards is None or "completion_mask" not in output:
            return
        start = self.accelerator.process_index * count
        masked = torch.isnan(self.round_rewards[start : start + count]).all(dim=1)
        if masked.any():
            mask = output["completion_mask"]
            output["completion_mask"] = mask * (~masked).to(mask.device, mask.dtype).unsqueeze(1)
        if "num_items_in_batch" in output:
            output["num_items_in_batch"] = TrainerBatches(self).items_in_batch(output)

    def adjust_advantages(self, output: dict[str, Any], rows: list[dict[str, Any]]) -> None:
        """A hook for a trainer whose baseline is not TRL's group mean (Absolute Zero's per task type and role):
        may replace `output["advantages"]` for `rows`, from `self.round_rewards`. TRL's own are kept here."""

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        if self.rounds is not None:
            self.rounds.finish(inputs)  # waits for the opponent; TRL reads the reward columns from these rows next
        started = time.perf_counter()
        completions = episode_completions(inputs, completions)  # a multi-turn episode: its answer, its tool calls
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        masked = ungraded(rewards, self._required)
        if self.model.training:
            missing = torch.isnan(rewards[masked]) & self._required.to(rewards.device)
            self._ungraded += torch.cat([masked.sum().view(1), missing.sum(dim=0)]).float().cpu()
            self._scored_rows += len(rewards)
        rewards[masked] = torch.nan
        self.reward_seconds += time.perf_counter() - started
        self.round_rewards = rewards.detach()  # every process's rows, in rank order (TRL gathered them)
        if self.model.training:  # for the p95 TRL does not log (a collective, as TRL's own gather of the lengths)
            mine = torch.tensor([len(ids) for ids in completion_ids_list], device=self.accelerator.device)
            self._lengths += self.accelerator.gather(mine).tolist()
        if self.observers:  # the same list on every process (a collective follows)
            batch = self._scored_batch(inputs, prompts, completions, rewards)
            if self.accelerator.is_main_process:
                for observe in self.observers:
                    observe(batch)
        return rewards

    def _scored_batch(self, inputs, prompts, completions, rewards: torch.Tensor) -> ScoredBatch:
        """Every process's rows of this round, in rank order: `rewards` is already gathered that way by TRL."""
        details = self.grader.last_details if self.grader else []  # set by the tests reward for this batch
        mine = (list(inputs), list(prompts), list(completions), details if len(details) == len(prompts) else [])
        parts = gather_object([mine]) if self.accelerator.num_processes > 1 else [mine]
        inputs, prompts, completions, details = ([row for part in parts for row in part[i]] for i in range(4))
        return ScoredBatch(
            step=self.state.global_step + 1,  # the optimizer step these completions train
            inputs=inputs,
            prompts=prompts,
            completions=completions,
            rewards=rewards.detach().float().cpu(),
            reward_names=list(self.reward_func_names),
            # All or nothing: a process whose grader left no details would shift every later row's verdict.
            details=details if len(details) == len(inputs) else [],
        )

    def summed_over_processes(self, *numbers: float) -> list[float]:
        """`numbers` summed over the processes (a collective: every process calls it together)."""
        summed = self.accelerator.reduce(
            torch.tensor(numbers, dtype=torch.float64, device=self.accelerator.device), "sum"
        )
        return summed.tolist()

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "train_runtime" not in logs:
            for part in (self.rounds, self.sampling, *self.metered):
                logs = {**logs, **part.metrics()} if part is not None else logs
            if self._lengths and "loss" in logs:  # a training step's log: the rounds generated since the last one
                logs = {**logs, "completions/p95_length": _p95(self._lengths)}
                self._lengths = []
            if self._scored_rows and "loss" in logs:
                logs = {**logs, **self._ungraded_metrics()}
        super().log(logs, start_time)

    def _ungraded_metrics(self) -> dict[str, float]:
        """The share of the rows scored since the last log that were masked (`rewards/ungraded`), and of them each
        reward's Nones (`rewards/<name>/ungraded`), for the rewards whose None masks a row."""
        share = (self._ungraded / self._scored_rows).tolist()
        names = [n for n, required in zip(self.reward_func_names, self._required.tolist(), strict=True) if required]
        shares = [v for v, required in zip(share[1:], self._required.tolist(), strict=True) if required]
        self._ungraded.zero_()
        self._scored_rows = 0
        return {
            "rewards/ungraded": share[0],
            **{f"rewards/{n}/ungraded": v for n, v in zip(names, shares, strict=True)},
        }


class _EpochSampler(RepeatSampler):
    """TRL's RepeatSampler, reseeded with (seed + epoch) by the HF Trainer's `set_epoch` at the start of each epoch."""

    def set_epoch(self, epoch: int) -> None:
        if self.shuffle:
            self.generator.manual_seed((self.seed or 0) + epoch)


def _p95(values: list[int]) -> float:
    """The 95th percentile (nearest rank) of `values`."""
    ordered = sorted(values)
    return float(ordered[max(0, -(-95 * len(ordered) // 100) - 1)])
