"""Where evaluation samples come from: a local HF model (optionally quantized, optionally with a peft adapter) or a
run's policy, sampled in batches through the rollout seam (`azr.rollouts`: HF generate, or the trainer's vLLM
backend during a run), or an OpenAI-compatible endpoint through `azr.remote.clients`, one request per sample. Each
sample has its own seed from (seed, problem, index). A later turn of execution feedback samples each item's own
conversation (`conversations`: the task, the earlier answers and the feedback on each). Samplers return text (or a
request failure); reading code out of it and grading it is `azr.evaluation.run`'s job.
"""

from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass
from typing import Literal, Protocol

from azr.config import ModelConfig
from azr.data import STOP, Problem
from azr.errors import ConfigError
from azr.evaluation.measure import sampled_groups
from azr.prompts import chat_messages
from azr.rollouts import ChatTokens, GenerateSampler, Prompt, Sampling, TokenSampler, sample_groups

Conversation = list[dict[str, str]]


@dataclass
class EndpointSpec:
    """An OpenAI-compatible server to sample from: `api` picks /chat/completions or raw /completions."""

    base_url: str
    model: str
    api: Literal["chat", "completions"] = "chat"
    api_key_env: str | None = None  # the variable's name; its value never leaves azr.remote.clients
    concurrency: int = 8
    timeout_s: float = 120.0
    max_retries: int = 4


def _seed(seed: int, problem: Problem, index: int, turn: int = 1) -> int:
    """A seed per sample (and per turn after the first): the n samples of one problem differ, and a resumed run
    redraws the same ones."""
    return zlib.crc32(f"{seed}:{problem.id}:{index}".encode() + (f":{turn}".encode() if turn > 1 else b""))


def turn_of(conversation: Conversation) -> int:
    """Which attempt a conversation asks for: one more than the answers it holds."""
    return 1 + sum(m.get("role") == "assistant" for m in conversation)


@dataclass
class Generated:
    text: str | None  # None: the request failed for good
    error: str | None = None
    version: int | None = None  # the policy version that sampled it (a sampler of the rollout seam; else unknown)
    tokens: int | None = None  # tokens generated (progress: tokens/s); None where the source does not say


class ItemSampler(Protocol):
    """What `azr eval` and the held-out evaluation sample from: one `Generated` per (problem, sample index) item,
    `chunk` items per call at most (progress is kept between calls), answers read in `mode` (answer/continuation).
    `conversations`, one per item, replaces the task's prompt (a later turn of execution feedback; chat only)."""

    mode: str
    chunk: int

    def sample(
        self, items: list[tuple[Problem, int]], conversations: list[Conversation] | None = None
    ) -> list[Generated]: ...


class ModelSampler:
    """A model already in memory (a run's policy as it trains, or one `LocalSampler` loaded), sampled through the
    rollout seam (`azr.rollouts.GenerateSampler`, prompts rendered by `chat`) in batches of `sampling.batch_size`
    samples, each batch seeded from its first sample: the same batches give the same samples, in a run and in
    `azr eval` alike."""

    mode = "answer"

    def __init__(self, source: TokenSampler, chat: ChatTokens, sampling: Sampling):
        self.source, self.chat, self.sampling = source, chat, sampling
        self.chunk = sampling.batch_size

    def sample(
        self, items: list[tuple[Problem, int]], conversations: list[Conversation] | None = None
    ) -> list[Generated]:
        turn = turn_of(conversations[0]) if conversations else 1
        sampling = dataclasses.replace(self.sampling, n=1, seed=_seed(self.sampling.seed, *items[0], turn))
        if conversations is not None:
            prompts = [Prompt(p.id, list(c)) for (p, _), c in zip(items, conversations, strict=True)]
            groups = sample_groups(self.source, self.chat, prompts, sampling)
        else:
            groups = sampled_groups(self.source, self.chat, [problem.task for problem, _ in items], sampling)
        return generated(groups)


def generated(groups) -> list[Generated]:
    """One `Generated` per completion of `groups` (`azr.rollouts.sample_groups`'), with its token count."""
    out = []
    for g in groups:
        mask = g.tensors.get("completion_mask")
        counts = mask.sum(dim=1).tolist() if mask is not None else [None] * len(g.texts)
        out += [Generated(t, version=g.version, tokens=c) for t, c in zip(g.texts, counts, strict=True)]
    return out


class ServedSampler:
    """A policy served by a generation server (the trainer's vLLM backend through `azr.rollouts.BackendSampler`):
    all of this rank's items in one call, `sampling.n` per problem (the items hold each problem n times in a row),
    seeded by the server."""

    mode = "answer"
    chunk = 1 << 30

    def __init__(self, source: TokenSampler, chat: ChatTokens, sampling: Sampling):
        self.source, self.chat, self.sampling = source, chat, sampling

    def sample(
        self, items: list[tuple[Problem, int]], conversations: list[Conversation] | None = None
    ) -> list[Generated]:
        if conversations is not None:  # each item its own conversation: one sample of each
            prompts = [Prompt(p.id, list(c)) for (p, _), c in zip(items, conversations, strict=True)]
            groups = sample_groups(self.source, self.chat, prompts, dataclasses.replace(self.sampling, n=1))
            return generated(groups)
        n = self.sampling.n
        if len(items) % n:
            raise ValueError(f"{len(items)} items are not whole groups of {n} samples per problem")
        groups = sampled_groups(self.source, self.chat, [problem.task for problem, _ in items[::n]], self.sampling)
        return generated(groups)


class LocalSampler(ModelSampler):
    """A local HF model (optionally 4-/8-bit, optionally with a peft adapter), loaded here and sampled as a
    `ModelSampler` (the same sampling as the train measurement and the held-out evaluation during a run)."""

    def __init__(self, model_cfg: ModelConfig, adapter: str | None, sampling: Sampling, template_kwargs: dict):
        from azr.models import load_policy, quiet_third_party

        quiet_third_party()
        model, tokenizer = load_policy(model_cfg, adapter or None)
        super().__init__(GenerateSampler(model, tokenizer), ChatTokens(tokenizer, template_kwargs), sampling)


class EndpointSampler:
    """An OpenAI-compatible endpoint through `azr.remote.clients.ChatClient`; one request per sample, each with its own
    seed, at most `concurrency` in flight. Chat: the same conversation a local model gets. Completions: the HumanEval
    stub (cut at the Codex stop sequences), or a task's text followed by an opened python fence."""

    def __init__(self, spec: EndpointSpec, sampling: Sampling):
        from azr.remote import ChatClient

        self.client = ChatClient(
            spec.base_url,
            spec.model,
            api_key_env=spec.api_key_env,
            timeout_s=spec.timeout_s,
            max_retries=spec.max_retries,
            concurrency=spec.concurrency,
        )
        self.api, self.sampling = spec.api, sampling
        self.mode = "continuation" if spec.api == "completions" else "answer"
        self.chunk = max(32, 4 * spec.concurrency)  # progress is saved (and shown) after each chunk

    def sample(
        self, items: list[tuple[Problem, int]], conversations: list[Conversation] | None = None
    ) -> list[Generated]:
        if conversations is not None and self.api != "chat":
            raise ConfigError("--turns: execution feedback is a conversation; it needs --api chat")
        chats = conversations or [None] * len(items)
        replies = self.client.run_all([self._request(p, i, c) for (p, i), c in zip(items, chats, strict=True)])
        return [
            Generated(r.text, None, tokens=r.usage.completion_tokens or None)
            if r.ok
            else Generated(None, r.error or "no text")
            for r in replies
        ]

    def _request(self, problem: Problem, index: int, conversation: Conversation | None = None):
        s = self.sampling
        params = {"max_tokens": s.max_new_tokens, "temperature": s.temperature, "top_p": s.top_p}
        params["seed"] = _seed(s.seed, problem, index, turn_of(conversation) if conversation else 1)
        if self.api == "chat":
            return self.client.achat(conversation or chat_messages(problem.task.prompt), **params)
        if problem.stub is not None:
            return self.client.acomplete(problem.stub, stop=STOP, **params)
        return self.client.acomplete(f"{problem.task.prompt.strip()}\n\n```python\n", stop=["```"], **params)
