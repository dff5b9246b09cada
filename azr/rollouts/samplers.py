"""The samplers outside GRPO's round, as sources of the rollout seam (`azr.rollouts.seam.Sampler`): `GenerateSampler`
draws from a model in memory with its own `generate` (the train pass rate, `azr eval` on a local model, the held-out
evaluation when the trainer generates that way, the tool loop's local turns); `BackendSampler` draws from the vLLM
backend a trainer generates GRPO's batches through (adapter, server and colocate modes), via a `TrainerView`, at
the caller's settings; `TrainerSampler` draws with the trainer's own generation at GRPO's settings (Absolute Zero's
proposer and solver). `trainer_sampler` picks the one that samples as a trainer does, for an evaluation.

Owns generation and decoding only; grading what was sampled is the consumer's. torch is imported where it is used.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from azr.rollouts.seam import (
    Continuation,
    Policy,
    Prompt,
    RolloutTiming,
    Sampler,
    Sampling,
    ScoredGroup,
    TrainerView,
)

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


class GenerateSampler:
    """A causal LM and its tokenizer, sampled with `generate` through the chat template: every prompt repeated
    `sampling.n` times in a row, `sampling.batch_size` rows per call (left-padded), all drawn from `sampling.seed`
    with the torch generators restored afterwards, so whatever samples next draws what it would have without this.
    `version` says which policy version the weights are (0 for a model loaded from disk)."""

    def __init__(
        self,
        model: Policy,
        tokenizer: PreTrainedTokenizerBase,
        template_kwargs: dict,
        version: Callable[[], int] = lambda: 0,
    ):
        self.model, self.tokenizer, self.template_kwargs, self.version = model, tokenizer, template_kwargs, version

    def prompt_text(self, prompt: Prompt) -> str:
        return self.tokenizer.apply_chat_template(
            prompt.messages, tools=prompt.tools, tokenize=False, add_generation_prompt=True, **self.template_kwargs
        )

    def sample(self, prompts: list[Prompt], sampling: Sampling) -> list[ScoredGroup]:
        tokenizer, n = self.tokenizer, sampling.n
        prompt_ids = [list(tokenizer(self.prompt_text(p), add_special_tokens=False)["input_ids"]) for p in prompts]
        started, clock = time.time(), time.perf_counter()
        outs = self.complete([ids for ids in prompt_ids for _ in range(n)], sampling)
        timing = RolloutTiming(started, time.perf_counter() - clock)
        version, pad = self.version(), tokenizer.pad_token_id or 0
        return [
            ScoredGroup.sampled(
                p.task_id,
                prompt_ids[i],
                [o.ids for o in outs[i * n : (i + 1) * n]],
                [o.text for o in outs[i * n : (i + 1) * n]],
                version=version,
                pad_id=pad,
                timing=timing,
            )
            for i, p in enumerate(prompts)
        ]

    def complete(self, contexts: list[list[int]], sampling: Sampling) -> list[Continuation]:
        """One continuation of each context (a `TokenSampler`): `sampling.batch_size` rows per `generate` call,
        left-padded, drawn from `sampling.seed`."""
        import torch

        model, tokenizer = self.model, self.tokenizer
        eos = eos_ids(model, tokenizer)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        outs: list[Continuation] = []
        was_training = model.training
        model.eval()
        generator_state = save_rng(torch)
        torch.manual_seed(sampling.seed)  # the same samples for the same weights, whatever ran before
        try:
            for start in range(0, len(contexts), sampling.batch_size):
                rows = contexts[start : start + sampling.batch_size]
                width = max(len(r) for r in rows)
                ids = torch.tensor([[pad] * (width - len(r)) + list(r) for r in rows], dtype=torch.long)
                mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], dtype=torch.long)
                with torch.no_grad():
                    generated = model.generate(
                        input_ids=ids.to(model.device),
                        attention_mask=mask.to(model.device),
                        max_new_tokens=sampling.max_new_tokens,
                        do_sample=sampling.temperature > 0,
                        temperature=sampling.temperature or None,
                        top_p=sampling.top_p,
                        top_k=sampling.top_k,
                        min_p=sampling.min_p,
                        repetition_penalty=sampling.repetition_penalty,
                        pad_token_id=tokenizer.pad_token_id,
                    )
                for row in generated[:, width:].tolist():
                    outs.append(continuation(tokenizer, _through_eos(row, eos), eos))
        finally:
            restore_rng(torch, generator_state)
            model.train(was_training)
        return outs


class BackendSampler:
    """The vLLM backend a trainer generates through (`TrainerView.sample_backend`: the current weights, synced
    once per step, sampled at these settings' temperature and token budget, GRPO's own settings untouched). All
    prompts in one call: each backend gathers every rank's prompts, so every rank calls it together."""

    def __init__(self, view: TrainerView, template_kwargs: dict):
        self.view, self.template_kwargs = view, template_kwargs

    def sample(self, prompts: list[Prompt], sampling: Sampling) -> list[ScoredGroup]:
        view, tokenizer, n = self.view, self.view.tokenizer, sampling.n
        texts = [
            tokenizer.apply_chat_template(
                p.messages, tokenize=False, add_generation_prompt=True, **self.template_kwargs
            )
            for p in prompts
        ]
        prompt_ids = [list(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
        started, clock = time.time(), time.perf_counter()
        version = view.step - 1  # the weights as they are now: the optimizer steps taken
        rows = [ids for ids in prompt_ids for _ in range(n)]  # each prompt n times in a row, TRL's contract
        completion_ids, logprobs = view.sample_backend(rows, n, sampling.temperature, sampling.max_new_tokens)
        timing = RolloutTiming(started, time.perf_counter() - clock)
        pad = tokenizer.pad_token_id or 0
        groups = []
        for i, p in enumerate(prompts):
            part = slice(i * n, (i + 1) * n)
            ids = [list(c) for c in completion_ids[part]]
            texts = [tokenizer.decode(c, skip_special_tokens=True) for c in ids]
            lps = logprobs[part] if logprobs is not None else None
            groups.append(
                ScoredGroup.sampled(
                    p.task_id, prompt_ids[i], ids, texts, version=version, pad_id=pad, logprobs=lps, timing=timing
                )
            )
        return groups

    def complete(self, contexts: list[list[int]], sampling: Sampling) -> list[Continuation]:
        """One continuation of each context (a `TokenSampler`) from the backend's current weights, at `sampling`'s
        temperature and token budget, with the backend's log-probabilities."""
        view = self.view
        completion_ids, logprobs = view.sample_backend(
            [list(c) for c in contexts], max(sampling.n, 1), sampling.temperature, sampling.max_new_tokens
        )
        eos = eos_ids(view.policy, view.tokenizer)
        return [
            continuation(view.tokenizer, list(ids), eos, list(logprobs[i]) if logprobs is not None else None)
            for i, ids in enumerate(completion_ids)
        ]


class TrainerSampler:
    """GRPO's own generation outside its round (`TrainerView.generate`: TRL's tokenisation and generation at the
    `grpo:` sampling settings, vLLM or `generate`, as the round samples): what Absolute Zero's proposer and solver
    draw from. Of `sampling` only `n` applies: the decoding settings are the trainer's, so what is drawn is what
    GRPO trains on."""

    def __init__(self, view: TrainerView):
        self.view = view

    def sample(self, prompts: list[Prompt], sampling: Sampling) -> list[ScoredGroup]:
        view, n = self.view, sampling.n
        started, clock = time.time(), time.perf_counter()
        rows = [p.messages for p in prompts for _ in range(n)]  # TRL's contract: each prompt n times, in a row
        prompt_ids, completion_ids, logprobs, texts = view.generate(rows, n)
        timing = RolloutTiming(started, time.perf_counter() - clock)
        version, pad = view.step - 1, view.tokenizer.pad_token_id or 0
        groups = []
        for i, p in enumerate(prompts):
            part = slice(i * n, (i + 1) * n)
            lps = [list(lp) for lp in logprobs[part]] if logprobs is not None else None
            ids = [list(c) for c in completion_ids[part]]
            group = ScoredGroup.sampled(
                p.task_id, prompt_ids[i * n], ids, texts[part], version=version, pad_id=pad, logprobs=lps, timing=timing
            )
            groups.append(group)
        return groups

    def complete(self, contexts: list[list[int]], sampling: Sampling) -> list[Continuation]:
        """One continuation of each context (a `TokenSampler`) through the trainer's own generation: the ids are
        passed as they are (never rendered again), `sampling.n` as the group size TRL passes its backend (a run of n
        identical contexts is one vLLM request). The decoding settings are GRPO's, and so is the length it samples
        to: a continuation longer than `sampling.max_new_tokens` (what is left of an episode's row) is cut there."""
        view, budget = self.view, sampling.max_new_tokens
        completion_ids, logprobs = view.generate_ids([list(c) for c in contexts], max(sampling.n, 1))
        eos = eos_ids(view.policy, view.tokenizer)
        return [
            continuation(
                view.tokenizer, list(ids[:budget]), eos, list(logprobs[i][:budget]) if logprobs is not None else None
            )
            for i, ids in enumerate(completion_ids)
        ]


def trainer_sampler(view: TrainerView, template_kwargs: dict) -> Sampler:
    """What samples as the trainer behind `view` samples GRPO's batches: its vLLM backend (adapter, server and
    colocate modes), else the policy's own `generate`, each group tagged with the optimizer steps taken."""
    if view.backend is not None:
        return BackendSampler(view, template_kwargs)
    return GenerateSampler(view.policy, view.tokenizer, template_kwargs, version=lambda: view.step - 1)


def continuation(
    tokenizer: PreTrainedTokenizerBase, ids: list[int], eos: set[int], logprobs: list[float] | None = None
) -> Continuation:
    """A sampled continuation from its ids (through the first end-of-sequence token, if it came): its texts and why
    it stopped."""
    stop = bool(ids) and ids[-1] in eos
    raw = tokenizer.decode(ids[:-1] if stop else ids, skip_special_tokens=False)
    text = tokenizer.decode(ids, skip_special_tokens=True)
    return Continuation(list(ids), text, "stop" if stop else "length", logprobs, raw)


def save_rng(torch: ModuleType) -> tuple:
    """The CPU generator's state and, where CUDA is available, every device's: what `torch.manual_seed` reseeds."""
    return torch.random.get_rng_state(), torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None


def restore_rng(torch: ModuleType, state: tuple) -> None:
    cpu, cuda = state
    torch.random.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


def eos_ids(model: Policy, tokenizer: PreTrainedTokenizerBase) -> set[int]:
    """The tokens that end a completion: the model's generation config's, else the tokenizer's."""
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    return set(eos if isinstance(eos, list) else [eos]) - {None}


def _through_eos(ids: list[int], eos: set[int]) -> list[int]:
    """A completion's tokens up to and including the first end-of-sequence token (what follows is padding)."""
    stop = next((i for i, t in enumerate(ids) if t in eos), None)
    return ids if stop is None else ids[: stop + 1]
