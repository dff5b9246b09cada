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

from azr.rollouts.seam import Policy, Prompt, RolloutTiming, Sampler, Sampling, ScoredGroup, TrainerView

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
        import torch

        model, tokenizer, n = self.model, self.tokenizer, sampling.n
        texts = [self.prompt_text(p) for p in prompts for _ in range(n)]
        eos = eos_ids(model, tokenizer)
        rows: list[tuple[list[int], list[int], str]] = []  # prompt ids, completion ids (through the first eos), text
        started, clock = time.time(), time.perf_counter()
        was_training = model.training
        model.eval()
        generator_state = save_rng(torch)
        torch.manual_seed(sampling.seed)  # the same samples for the same weights, whatever ran before
        try:
            for start in range(0, len(texts), sampling.batch_size):
                batch = tokenizer(
                    texts[start : start + sampling.batch_size],
                    return_tensors="pt",
                    padding=True,
                    padding_side="left",
                    add_special_tokens=False,
                ).to(model.device)
                with torch.no_grad():
                    ids = model.generate(
                        **batch,
                        max_new_tokens=sampling.max_new_tokens,
                        do_sample=sampling.temperature > 0,
                        temperature=sampling.temperature or None,
                        top_p=sampling.top_p,
                        top_k=sampling.top_k,
                        min_p=sampling.min_p,
                        repetition_penalty=sampling.repetition_penalty,
                        pad_token_id=tokenizer.pad_token_id,
                    )
                new = ids[:, batch["input_ids"].shape[1] :]
                decoded = tokenizer.batch_decode(new, skip_special_tokens=True)
                for prompt, mask, completion, text in zip(
                    batch["input_ids"], batch["attention_mask"], new.tolist(), decoded, strict=True
                ):
                    rows.append((prompt[mask.bool()].tolist(), _through_eos(completion, eos), text))
        finally:
            restore_rng(torch, generator_state)
            model.train(was_training)
        timing = RolloutTiming(started, time.perf_counter() - clock)
        version, pad = self.version(), tokenizer.pad_token_id or 0
        return [
            ScoredGroup.sampled(
                p.task_id,
                rows[i * n][0] if n else [],
                [c for _, c, _ in rows[i * n : (i + 1) * n]],
                [t for _, _, t in rows[i * n : (i + 1) * n]],
                version=version,
                pad_id=pad,
                timing=timing,
            )
            for i, p in enumerate(prompts)
        ]


class GenerateTurns:
    """`azr.rollouts.TurnSampler` over a causal LM's own `generate` on token-id contexts (left-padded,
    `sampling.batch_size` rows per call, at `sampling`'s settings): the turns of feedback episodes when measuring a
    model outside GRPO's round. The caller seeds torch; no log-probabilities (`generate` gives none)."""

    def __init__(self, model: Policy, tokenizer: PreTrainedTokenizerBase, sampling: Sampling):
        self.model, self.tokenizer, self.sampling = model, tokenizer, sampling
        self.eos = eos_ids(model, tokenizer)

    def sample(self, contexts: list[list[int]], n: int) -> tuple[list[list[int]], None]:
        import torch

        model, sampling, pad = self.model, self.sampling, self.tokenizer.pad_token_id or 0
        out: list[list[int]] = []
        was_training = model.training
        model.eval()
        try:
            for start in range(0, len(contexts), sampling.batch_size):
                part = contexts[start : start + sampling.batch_size]
                width = max(len(c) for c in part)
                ids = torch.tensor([[pad] * (width - len(c)) + list(c) for c in part], device=model.device)
                mask = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in part], device=model.device)
                with torch.no_grad():
                    new = model.generate(
                        input_ids=ids,
                        attention_mask=mask,
                        max_new_tokens=sampling.max_new_tokens,
                        do_sample=sampling.temperature > 0,
                        temperature=sampling.temperature or None,
                        top_p=sampling.top_p,
                        top_k=sampling.top_k,
                        min_p=sampling.min_p,
                        repetition_penalty=sampling.repetition_penalty,
                        pad_token_id=pad,
                    )[:, width:]
                out += [_through_eos(row, self.eos) for row in new.tolist()]
        finally:
            model.train(was_training)
        return out, None


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


def trainer_sampler(view: TrainerView, template_kwargs: dict) -> Sampler:
    """What samples as the trainer behind `view` samples GRPO's batches: its vLLM backend (adapter, server and
    colocate modes), else the policy's own `generate`, each group tagged with the optimizer steps taken."""
    if view.backend is not None:
        return BackendSampler(view, template_kwargs)
    return GenerateSampler(view.policy, view.tokenizer, template_kwargs, version=lambda: view.step - 1)


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
