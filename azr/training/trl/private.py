"""The one place where azr meets TRL's private trainer API (TRL 1.16), pinned by tests/training/test_trl_private.py:
`TrainerBatches`, the view of a GRPOTrainer that batch composition, the samplers, Absolute Zero and the held-out
evaluation are typed on (`azr.rollouts.BatchView` / `TrainerView`); `TrlRounds`, the trainer's round as scored
groups; `fill_batch`, which runs the rounds a `RolloutFilter`'s plan asks for. `AZRGRPOTrainer` overrides three
private hooks (`_generate_and_score_completions`, `_calculate_rewards`, `_get_train_sampler`); the rest is here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, cast

import torch

from azr.rollouts import (
    VERSION,
    Packed,
    RolloutFilter,
    RolloutTiming,
    Row,
    ScoredRound,
    group_signal,
    split_groups,
    unpack,
    unsplittable,
    weighted_totals,
)
from azr.training.ranks import Ranks

if TYPE_CHECKING:
    from trl import GRPOTrainer as GRPOTrainer  # the trainer type the rest of training/ annotates with

# TRL's `rollout_func(prompts, trainer)`: prompt and completion ids, sampler log-probs and extra columns per row.
RolloutFunc = Callable[[list[object], object], dict[str, list[object]]]


class ScoresRounds(Protocol):
    """`AZRGRPOTrainer`'s one addition this module calls: TRL's round wrapped (`_score_round`)."""

    def _score_round(self, rows: list[Row]) -> tuple[dict[str, Any], torch.Tensor]: ...


class GenerationBackend(Protocol):
    """What TRL 1.16's `_generate_single_turn` calls on its vLLM backend (`vllm_generation`): TRL's own in server
    and colocate modes, azr's `LoraSync` in adapter mode."""

    def sync_weights(self) -> None: ...

    def generate(self, prompts: list[list[int]], images: object, num_generations: int) -> tuple: ...


class TrainerBatches:
    """What batch composition needs of an `AZRGRPOTrainer` (or any object with the same few attributes): one
    scored round of generation, the group size, the step being trained, the weighing of its rewards, padding, the
    policy's log-probabilities, and the two collectives the filter adds to TRL's own."""

    def __init__(self, trainer: GRPOTrainer):
        self.trainer = trainer

    # -------------------------------------------------------------------------------------------- the batch
    @property
    def group_size(self) -> int:
        return self.trainer.num_generations

    @property
    def round_group_size(self) -> int:
        """The group size of the round being generated: TRL's `num_generations` in training, its
        `num_generations_eval` in evaluation."""
        trainer = self.trainer
        return trainer.num_generations if trainer.model.training else trainer.num_generations_eval

    @property
    def max_completion_length(self) -> int:
        """GRPO's `max_completion_length`: the most completion tokens of a row TRL trains."""
        return int(self.trainer.args.max_completion_length)

    @property
    def step(self) -> int:
        """The optimizer step the batch being built trains."""
        return self.trainer.state.global_step + 1

    def totals(self, rewards: torch.Tensor) -> torch.Tensor:
        """Each row's weighted reward ((rows, reward functions) in; NaN for a row not graded): the one place azr
        weighs a round's rewards, with TRL's `reward_weights`, which are the trained rubric's (set by
        `azr.training.trl.trainer_args` from `rewards[i].weight`; no recipe field replaces them)."""
        return weighted_totals(rewards, self.trainer.reward_weights)

    @property
    def reward_names(self) -> list[str]:
        return list(self.trainer.reward_func_names)

    @property
    def rank(self) -> int:
        """This process's index: its rows' place among every process's rewards."""
        return int(self.trainer.accelerator.process_index)

    @property
    def processes(self) -> Ranks:
        """The trainer's processes, for the collectives of a round azr plays (`azr.rollouts.play`)."""
        accelerator = self.trainer.accelerator
        return Ranks(accelerator.process_index, accelerator.num_processes, accelerator.local_process_index)

    @property
    def device(self) -> Any:
        return self.trainer.accelerator.device

    @property
    def pad_id(self) -> int:
        return self.trainer.processing_class.pad_token_id

    @property
    def pad_multiple(self) -> int | None:
        return self.trainer.pad_to_multiple_of

    def score_round(self, rows: list[dict[str, Any]]) -> tuple[dict[str, Any], torch.Tensor]:
        """TRL's generation and scoring of `rows`: its output dict (keys in KNOWN for text prompts), and the rewards
        of every process's rows in rank order (rows, reward functions; NaN where not graded)."""
        return cast(ScoresRounds, self.trainer)._score_round(rows)

    def policy_logps(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Per-token log-probabilities of `batch`'s completions under the policy now, without gradients: what TRL
        itself computes as `old_per_token_logps` when generation and update steps are misaligned."""
        from trl.models.utils import disable_gradient_checkpointing

        trainer = self.trainer
        ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        with torch.no_grad(), disable_gradient_checkpointing(trainer.model, trainer.args.gradient_checkpointing_kwargs):
            logps, _, _ = trainer._get_per_token_logps_and_entropies(
                trainer.model,
                ids,
                mask,
                batch["completion_ids"].size(1),
                batch_size=trainer.args.per_device_train_batch_size,
            )
        return logps

    # ------------------------------------------------------------------------------------------ collectives
    def global_max(self, value: int) -> int:
        """The largest `value` over the processes (a collective: every process calls it the same number of times)."""
        accelerator = self.trainer.accelerator
        return int(accelerator.gather(torch.tensor([value], device=accelerator.device)).max())

    def items_in_batch(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """TRL's `num_items_in_batch` for `batch`: the completion tokens trained (tool results masked out), summed
        over the processes."""
        mask = batch["completion_mask"] * batch["tool_mask"] if "tool_mask" in batch else batch["completion_mask"]
        return self.trainer.accelerator.gather(mask.sum()).sum()

    # ------------------------------------------------------------------------------ generation outside a round
    def generate(self, prompts: list[Any], n: int) -> tuple[list[list[int]], list[list[int]], Any, list[str]]:
        """One completion per row of `prompts` (each conversation repeated `n` times in a row, TRL's contract),
        through the trainer's own tokenisation and generation at GRPO's sampling settings: prompt ids, completion
        ids, their sampling log-probabilities, and the decoded completions."""
        trainer = self.trainer
        prompt_ids, _, fields = trainer._tokenize_prompts(prompts)
        completion_ids, logprobs = trainer._generate_single_turn(prompt_ids, None, fields, n)
        texts = trainer.processing_class.batch_decode(completion_ids, skip_special_tokens=True)
        return [list(p) for p in prompt_ids], [list(c) for c in completion_ids], logprobs, list(texts)

    def generate_ids(self, prompt_ids: list[list[int]], n: int) -> tuple[list[list[int]], list[list[float]] | None]:
        """One completion per row of `prompt_ids` (token ids, each prompt `n` times in a row) through the trainer's
        own generation at GRPO's sampling settings, as its round generates: completion ids and the sampler's
        per-token log-probabilities (None when the policy's `generate` sampled)."""
        completion_ids, logprobs = self.trainer._generate_single_turn(prompt_ids, None, {}, n)
        return [list(c) for c in completion_ids], logprobs

    # ------------------------------------------------------------------------- the generation backend (vLLM)
    @property
    def backend(self) -> Any | None:
        """The vLLM backend the trainer generates through (TRL's `vllm_generation`: azr's `LoraSync` in adapter
        mode, TRL's own in server and colocate modes), or None when it generates with the policy's `generate`."""
        trainer = self.trainer
        if getattr(trainer, "use_vllm", False) and getattr(trainer, "vllm_generation", None) is not None:
            return trainer.vllm_generation
        return None

    def use_backend(self, backend: GenerationBackend) -> None:
        """Make the trainer generate through `backend` (`sync_weights`, `generate`) as it does through TRL's vLLM:
        TRL 1.16's `_generate_single_turn` calls `backend.sync_weights()` whenever the step differs from
        `_last_loaded_step`, then `backend.generate(prompts=token ids, images=, num_generations=, profiler=)`."""
        trainer = self.trainer
        trainer.vllm_generation = backend
        trainer.use_vllm = True
        # Server mode is how TRL reads the backend everywhere it asks (the tool loop's context limit, for one).
        trainer.vllm_mode = "server"
        trainer._last_loaded_step = -1  # the first batch syncs the weights as it starts

    def sync_backend(self) -> None:
        """Load the current weights into the backend once per optimizer step, as TRL does before it generates (and
        tells TRL so: it does not load them again for the step)."""
        trainer = self.trainer
        if trainer.state.global_step != trainer._last_loaded_step:
            trainer.vllm_generation.sync_weights()
            trainer._last_loaded_step = trainer.state.global_step

    def sample_backend(
        self, prompt_ids: list[list[int]], n: int, temperature: float, max_tokens: int
    ) -> tuple[list[list[int]], list[list[float]] | None]:
        """Completions of `prompt_ids` (each prompt `n` times in a row) from the backend with the current weights, at
        `temperature` and `max_tokens` for this call only (GRPO's own settings are put back after): their token ids
        and each token's sampler log-probability (None where the backend gives none). Neither TRL's `VLLMGeneration`
        nor `LoraSync` takes settings per call, so they are set on the backend for the time of the call."""
        self.sync_backend()
        backend = self.trainer.vllm_generation
        with _request_settings(backend, temperature, max_tokens):
            _, completion_ids, logprobs, _ = backend.generate(prompts=prompt_ids, images=None, num_generations=n)
        if logprobs is not None:
            logprobs = [[lp[0] if isinstance(lp, list | tuple) else lp for lp in row] for row in logprobs]
        return [list(c) for c in completion_ids], logprobs

    @property
    def round_rows(self) -> list[dict[str, Any]]:
        """The rows of the round being generated (`AZRGRPOTrainer` keeps them: TRL's `rollout_func` gets only the
        prompts)."""
        return list(getattr(self.trainer, "round_rows", None) or [])

    @property
    def template_kwargs(self) -> dict[str, Any]:
        """The chat template arguments TRL renders prompts with (`chat_template_kwargs`)."""
        return dict(getattr(self.trainer, "chat_template_kwargs", None) or {})

    def tokenize(self, prompts: list[Any]) -> list[list[int]]:
        """The prompts' token ids as TRL's round makes them (its chat template and tokenizer settings)."""
        prompt_ids, _, _ = self.trainer._tokenize_prompts(prompts)
        return [list(p) for p in prompt_ids]

    def use_rollouts(self, rollout_func: RolloutFunc) -> None:
        """Make TRL's round take its completions from `rollout_func(prompts, trainer)` (TRL's public but experimental
        `rollout_func`, set after construction: asynchronous GRPO's pipeline needs the trainer to exist first)."""
        self.trainer.rollout_func = rollout_func

    @property
    def correction(self) -> tuple[str, float | None, float | None]:
        """TRL's importance-sampling correction of vLLM samples: its mode and the ratio's lower and upper bounds."""
        trainer = self.trainer
        return (
            trainer.vllm_importance_sampling_mode,
            trainer.vllm_importance_sampling_clip_min,
            trainer.vllm_importance_sampling_clip_max,
        )

    @property
    def policy(self) -> Any:
        """The policy model, unwrapped from DDP (what `generate` is called on)."""
        return self.trainer.accelerator.unwrap_model(self.trainer.model)

    @property
    def tokenizer(self) -> Any:
        return self.trainer.processing_class

    # --------------------------------------------------------------------------------------------- logging
    def replace_logged_advantages(self, advantages: list[float]) -> None:
        """Replace the advantages TRL logged for the batch just scored (its completions table and `advantage`
        statistics) with `advantages`, every process's rows in rank order."""
        logged = self.trainer._logs["advantages"]
        for _ in range(min(len(advantages), len(logged))):
            logged.pop()
        logged.extend(advantages)


@contextmanager
def _request_settings(backend: GenerationBackend, temperature: float, max_tokens: int) -> Iterator[None]:
    """The backend's request settings set to `temperature` and `max_tokens` for the time of one call: `LoraSync`'s
    request fields (a dict), or TRL's `VLLMGeneration` attributes (server and colocate modes)."""
    if isinstance(getattr(backend, "sampling", None), dict):
        before = dict(backend.sampling)
        backend.sampling.update(temperature=temperature, max_tokens=max_tokens)
        try:
            yield
        finally:
            backend.sampling.clear()
            backend.sampling.update(before)
        return
    names = {"temperature": temperature, "max_completion_length": max_tokens}
    previous = {name: getattr(backend, name) for name in names}
    for name, value in names.items():
        setattr(backend, name, value)
    try:
        yield
    finally:
        for name, value in previous.items():
            setattr(backend, name, value)


class TrlRounds:
    """A `RolloutSource` over an `AZRGRPOTrainer`'s own round: generation, rewards, advantages and old log-probs of
    `rows`, handed back as scored groups tagged with the policy version that sampled them (the column
    `policy_version` when the asynchronous pipeline sampled them ahead, else the weights being trained)."""

    def __init__(self, trl: TrainerBatches):
        self.trl = trl

    @property
    def group_size(self) -> int:
        return self.trl.group_size

    def round(self, rows: list[Row], born: int) -> ScoredRound:
        """This process's `rows` generated and scored in one round (a collective: every process calls it)."""
        trl, size = self.trl, self.trl.group_size
        started, clock = time.time(), time.perf_counter()
        output, rewards = trl.score_round(rows)
        timing = RolloutTiming(started, time.perf_counter() - clock)
        # The whole round's rewards (every process's, in rank order) are whole groups even when a process's rows are
        # not: every process counts the same.
        totals = trl.totals(rewards)
        signals = group_signal(totals, size) if len(rewards) % size == 0 else []
        if len(rows) % size or unsplittable(output):  # a group split over processes; an image batch
            return ScoredRound(output, [], signals)
        part = slice(trl.rank * len(rows), (trl.rank + 1) * len(rows))
        mine, my_totals = rewards[part], totals[part]
        now = trl.step - 1  # a round samples from the weights it trains unless the rows say otherwise
        versions = [int(rows[i].get(VERSION, now)) for i in range(0, len(rows), size)]  # type: ignore[call-overload]
        groups = split_groups(
            output,
            rows,
            group_signal(my_totals, size),
            born,
            rewards=mine,
            totals=my_totals,
            names=trl.reward_names,
            versions=versions,
            timing=timing,
        )
        return ScoredRound(output, groups, signals)


def fill_batch(sampling: RolloutFilter, trl: TrainerBatches, rows: list[Row]) -> dict[str, Any]:
    """The generation batch `sampling` composes for the dataloader's `rows`: each round its plan asks for is run by
    the trainer here and its scored groups sent back, so batch composition never calls into the trainer."""
    source, plan = TrlRounds(trl), sampling.plan(trl, rows)
    try:
        request = next(plan)  # carried groups may fill the batch without a round
        while True:
            request = plan.send(source.round(request, sampling.batches))
    except StopIteration as done:
        return done.value


def packed_logps(
    trainer: GRPOTrainer, model: torch.nn.Module, packed: Packed, batch_size: int, entropy: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probabilities (and entropies) of a packed batch in TRL's padded layout, as TRL 1.16's
    `_get_per_token_logps_and_entropies` computes them for a padded one: the model's forward with TRL's fused LM
    head (`fused_lm_head=True`, labels scoring the completion positions only), `batch_size` bins a forward pass, under
    the accelerator's autocast; the bins' position ids, and no attention mask, keep the sequences apart."""
    logps, entropies = [], []
    for start in range(0, packed.input_ids.size(0), batch_size):
        part = slice(start, start + batch_size)
        with trainer.accelerator.autocast():
            out = model(
                input_ids=packed.input_ids[part],
                position_ids=packed.position_ids[part],
                labels=packed.labels[part],
                fused_lm_head=True,
            )
        # TRL's head scores each position's next token: its column t is the token at t + 1.
        logps.append(torch.nn.functional.pad(out.log_probs, (1, 0)))
        if entropy:
            entropies.append(torch.nn.functional.pad(out.entropy, (1, 0)))
    return unpack(torch.cat(logps), packed), unpack(torch.cat(entropies), packed) if entropy else None
