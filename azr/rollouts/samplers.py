"""The token samplers outside GRPO's round (`azr.rollouts.seam.TokenSampler`): `GenerateSampler` draws from a model
in memory with its own `generate` (the train pass rate, `azr eval` on a local model, the held-out evaluation when the
trainer generates that way, the tool loop's local turns); `BackendSampler` draws from the vLLM backend a trainer
generates GRPO's batches through (adapter, server and colocate modes), via a `TrainerView`, at the caller's
settings; `TrainerSampler` draws with the trainer's own generation at GRPO's settings (the episodes of GRPO's
rounds and Absolute Zero's). `trainer_sampler` picks the one that samples as a trainer does, for an evaluation.
`sample_groups` draws `n` completions of each prompt from any of them, one `ScoredGroup` per prompt.

Owns generation and decoding only; grading what was sampled is the consumer's. torch is imported where it is used.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from azr.rollouts.chat import ChatTokens
from azr.rollouts.seam import (
    Continuation,
    Policy,
    Prompt,
    RolloutTiming,
    Sampling,
    ScoredGroup,
    TokenSampler,
    TrainerView,
)

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def sample_groups(
    sampler: TokenSampler, chat: ChatTokens, prompts: list[Prompt], sampling: Sampling
) -> list[ScoredGroup]:
    """`sampling.n` completions of each prompt from `sampler`, one group per prompt in order: each prompt rendered
    by `chat` (with its tools) and continued `n` times in a row (a run a vLLM backend samples as one request), with
    the token ids, decoded texts, the sampler's log-probabilities where it gives them, and the oldest policy version
    that drew the group (0 where the sampler does not say: a model loaded from disk). Not graded: `rewards` empty."""
    n = sampling.n
    prompt_ids = [chat.prompt_ids(p.messages, p.tools) for p in prompts]
    started, clock = time.time(), time.perf_counter()
    outs = sampler.complete([ids for ids in prompt_ids for _ in range(n)], sampling)
    timing = RolloutTiming(started, time.perf_counter() - clock)
    pad = chat.tokenizer.pad_token_id or 0
    groups = []
    for i, prompt in enumerate(prompts):
        part = outs[i * n : (i + 1) * n]
        logprobs = [list(o.logprobs) for o in part] if all(o.logprobs is not None for o in part) else None
        versions = [o.version for o in part if o.version is not None]
        group = ScoredGroup.sampled(
            prompt.task_id,
            prompt_ids[i],
            [list(o.ids) for o in part],
            [o.text for o in part],
            version=min(versions, default=0),
            pad_id=pad,
            logprobs=logprobs,
            timing=timing,
        )
        groups.append(group)
    return groups


class GenerateSampler:
    """A causal LM and its tokenizer, continued with `generate`: `sampling.batch_size` rows per call (left-padded),
    all drawn from `sampling.seed` (None: from the generators as they stand) with the torch generators restored
    afterwards, so whatever samples next draws what it would have without this. `version` says which policy version
    the weights are (0 for a model loaded from disk)."""

    def __init__(self, model: Policy, tokenizer: PreTrainedTokenizerBase, version: Callable[[], int] = lambda: 0):
        self.model, self.tokenizer, self.version = model, tokenizer, version

    def complete(self, contexts: list[list[int]], sampling: Sampling) -> list[Continuation]:
        """One continuation of each context: `sampling.batch_size` rows per `generate` call, left-padded, drawn from
        `sampling.seed`."""
        import torch

        model, tokenizer = self.model, self.tokenizer
        eos = eos_ids(model, tokenizer)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        version = self.version()
        outs: list[Continuation] = []
        was_training = model.training
        model.eval()
        generator_state = save_rng(torch)
        if sampling.seed is not None:
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
                    outs.append(continuation(tokenizer, _through_eos(row, eos), eos, version=version))
        finally:
            restore_rng(torch, generator_state)
            model.train(was_training)
        return outs


class BackendSampler:
    """The vLLM backend a trainer generates through (`TrainerView.sample_backend`: the current weights, synced
    once per step, sampled at these settings' temperature and token budget, GRPO's own settings untouched), with
    the backend's log-probabilities. All contexts in one call: each backend gathers every rank's prompts, so every
    rank calls it together."""

    def __init__(self, view: TrainerView):
        self.view = view

    def complete(self, contexts: list[list[int]], sampling: Sampling) -> list[Continuation]:
        """One continuation of each context (in runs of `sampling.n` identical ones, TRL's contract) from the
        backend's current weights, tagged with the optimizer steps taken."""
        view = self.view
        version = view.step - 1  # the weights as they are now: the optimizer steps taken
        completion_ids, logprobs = view.sample_backend(
            [list(c) for c in contexts], max(sampling.n, 1), sampling.temperature, sampling.max_new_tokens
        )
        eos = eos_ids(view.policy, view.tokenizer)
        return [
            continuation(
                view.tokenizer, list(ids), eos, list(logprobs[i]) if logprobs is not None else None, version=version
            )
            for i, ids in enumerate(completion_ids)
        ]


class TrainerSampler:
    """GRPO's own generation outside its round (`TrainerView.generate_ids`: vLLM or `generate` at the `grpo:`
    sampling settings, as the round samples): what the episodes of GRPO's rounds and Absolute Zero's draws are played
    with. Of `sampling` only `n` and the token budget apply: the decoding settings are the trainer's, so what is
    drawn is what GRPO trains on."""

    def __init__(self, view: TrainerView):
        self.view = view

    def complete(self, contexts: list[list[int]], sampling: Sampling) -> list[Continuation]:
        """One continuation of each context through the trainer's own generation: the ids are passed as they are
        (never rendered again), `sampling.n` as the group size TRL passes its backend (a run of n identical contexts
        is one vLLM request). The length it samples to is GRPO's: a continuation longer than
        `sampling.max_new_tokens` (what is left of an episode's row) is cut there."""
        view, budget = self.view, sampling.max_new_tokens
        version = view.step - 1
        completion_ids, logprobs = view.generate_ids([list(c) for c in contexts], max(sampling.n, 1))
        eos = eos_ids(view.policy, view.tokenizer)
        return [
            continuation(
                view.tokenizer,
                list(ids[:budget]),
                eos,
                list(logprobs[i][:budget]) if logprobs is not None else None,
                version=version,
            )
            for i, ids in enumerate(completion_ids)
        ]


def trainer_sampler(view: TrainerView) -> TokenSampler:
    """What samples as the trainer behind `view` samples GRPO's batches: its vLLM backend (adapter, server and
    colocate modes), else the policy's own `generate`, each continuation tagged with the optimizer steps taken."""
    if view.backend is not None:
        return BackendSampler(view)
    return GenerateSampler(view.policy, view.tokenizer, version=lambda: view.step - 1)


def continuation(
    tokenizer: PreTrainedTokenizerBase | None,
    ids: list[int],
    eos: set[int] | frozenset[int],
    logprobs: list[float] | None = None,
    version: int | None = None,
) -> Continuation:
    """A sampled continuation from its ids (through the first end-of-sequence token, if it came): its texts (empty
    without a `tokenizer`: ids only, as a one-turn round that TRL decodes itself), why it stopped, and the policy
    version that drew it."""
    stop = bool(ids) and ids[-1] in eos
    if tokenizer is None:
        return Continuation(list(ids), "", "stop" if stop else "length", logprobs, "", version)
    raw = tokenizer.decode(ids[:-1] if stop else ids, skip_special_tokens=False)
    text = tokenizer.decode(ids, skip_special_tokens=True)
    return Continuation(list(ids), text, "stop" if stop else "length", logprobs, raw, version)


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
