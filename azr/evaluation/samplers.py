"""Where evaluation samples come from, through the policy's two faces (`azr.rollouts`): token ids for a model in
memory (a local HF model, optionally quantized or with its adapter, or a run's policy: HF generate, or the trainer's
vLLM backend), and messages for an OpenAI-compatible endpoint (`azr.tools.EndpointPolicy`, the policy `azr gen`
plays; a raw /completions server is `Continuation`, a policy that continues the conversation's one message as
text). `Draws` is how an evaluation asks either for one `Generated` per (problem, sample index) item; a `Draws` over
token ids samples in batches (`sample_groups`), one over messages sends one request per sample, each with its own
seed from (seed, problem, index). A later turn of execution feedback samples each item's own conversation (the task,
the earlier answers and the feedback on each). Reading code out of a text and grading it is `azr.evaluation.run`'s.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from azr.config import ModelConfig
from azr.data import STOP, Problem
from azr.errors import ConfigError
from azr.evaluation.measure import sampled_groups
from azr.prompts import chat_messages
from azr.rollouts import ChatTokens, GenerateSampler, Prompt, Reply, Sampling, TextPolicy, TokenSampler, sample_groups

if TYPE_CHECKING:
    from azr.remote import ChatClient

Conversation = list[dict[str, str]]
Mode = Literal["answer", "continuation"]
ALL = 1 << 30  # items a call for a source that takes them all at once


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


def item_seed(seed: int | None, problem: Problem, index: int, turn: int = 1) -> int:
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


@dataclass
class Draws:
    """How an evaluation draws samples at `sampling`'s settings, from one of the policy's two faces:

    - `tokens`, a `TokenSampler` whose prompts `chat` renders: in batches of `sampling.batch_size` items, each batch
      seeded from its first item (the same batches give the same samples, in a run and in `azr eval` alike); or,
      `served` (a generation server: the trainer's vLLM backend), all of a call's items at once, a problem's
      `sampling.n` samples as one run of n, seeded by the server;
    - `text`, a `TextPolicy` (an endpoint): one request per item, its seed from (seed, problem, index, turn), all of a
      chunk's requests awaited together by `replies` (the client's: at most its concurrency in flight).

    `chunk` is the most items a call takes (progress is saved and shown between calls), `mode` how its texts are read
    (a chat answer, or the continuation of a raw prompt), `check` runs before every call (a server azr started for
    the evaluation says so if it has died), and `close` releases what the source holds."""

    sampling: Sampling
    tokens: TokenSampler | None = None
    chat: ChatTokens | None = None
    served: bool = False
    text: TextPolicy | None = None
    replies: Callable[[list[Awaitable[Reply]]], list[Reply]] | None = None
    chunk: int = 0  # 0: `sampling.batch_size` for a model, every item for a server, 32 for an endpoint
    mode: Mode = "answer"
    check: Callable[[], None] = lambda: None
    close: Callable[[], None] = lambda: None

    def __post_init__(self) -> None:
        if (self.tokens is None) == (self.text is None):
            raise ValueError("Draws: give token ids (tokens, chat) or messages (text, replies), not both or neither")
        if self.tokens is not None and self.chat is None:
            raise ValueError("Draws: a token sampler needs the chat template its prompts are rendered with")
        if self.text is not None and self.replies is None:
            raise ValueError("Draws: an endpoint policy needs `replies`, which awaits its requests together")
        if not self.chunk:
            self.chunk = ALL if self.served else self.sampling.batch_size if self.tokens is not None else 32

    def sample(
        self, items: list[tuple[Problem, int]], conversations: list[Conversation] | None = None
    ) -> list[Generated]:
        """One `Generated` per item, in order; `conversations` (one per item) replace the tasks' prompts (a later
        turn of execution feedback)."""
        self.check()
        if self.text is not None:
            return self._ask(items, conversations)
        assert self.tokens is not None and self.chat is not None
        if conversations is not None:  # each item its own conversation: one sample of each
            sampling = dataclasses.replace(self.sampling, n=1)
            if not self.served:
                sampling.seed = item_seed(self.sampling.seed, *items[0], turn_of(conversations[0]))
            prompts = [Prompt(p.id, list(c)) for (p, _), c in zip(items, conversations, strict=True)]
            return generated(sample_groups(self.tokens, self.chat, prompts, sampling))
        if self.served:
            n = self.sampling.n
            if len(items) % n:
                raise ValueError(f"{len(items)} items are not whole groups of {n} samples per problem")
            tasks = [problem.task for problem, _ in items[::n]]
            return generated(sampled_groups(self.tokens, self.chat, tasks, self.sampling))
        sampling = dataclasses.replace(self.sampling, n=1, seed=item_seed(self.sampling.seed, *items[0]))
        return generated(sampled_groups(self.tokens, self.chat, [problem.task for problem, _ in items], sampling))

    def _ask(self, items: list[tuple[Problem, int]], conversations: list[Conversation] | None) -> list[Generated]:
        assert self.text is not None and self.replies is not None
        if conversations is not None and self.mode != "answer":
            raise ConfigError("--turns: execution feedback is a conversation; it needs --api chat")
        asked = []
        for k, (problem, index) in enumerate(items):
            conversation = conversations[k] if conversations is not None else None
            turn = turn_of(conversation) if conversation else 1
            messages = conversation or self._opening(problem)
            seed = item_seed(self.sampling.seed, problem, index, turn)
            asked.append(self.text.reply(list(messages), None, self.sampling.max_new_tokens, seed))
        out = []
        for reply in self.replies(asked):
            if reply.error is not None:
                out.append(Generated(None, reply.error))
            else:
                out.append(Generated(reply.text, tokens=reply.completion_tokens or None))
        return out

    def _opening(self, problem: Problem) -> list[dict[str, object]]:
        """The first turn's messages: the task as training asks it, or for a raw continuation the text to continue
        (the HumanEval stub, or the task followed by an opened python fence)."""
        if self.mode == "answer":
            return list(chat_messages(problem.task.prompt))
        text = problem.stub if problem.stub is not None else f"{problem.task.prompt.strip()}\n\n```python\n"
        return [{"role": "user", "content": text}]


def generated(groups) -> list[Generated]:
    """One `Generated` per completion of `groups` (`azr.rollouts.sample_groups`'), with its token count."""
    out = []
    for g in groups:
        mask = g.tensors.get("completion_mask")
        counts = mask.sum(dim=1).tolist() if mask is not None else [None] * len(g.texts)
        out += [Generated(t, version=g.version, tokens=c) for t, c in zip(g.texts, counts, strict=True)]
    return out


class Continuation:
    """A raw /completions endpoint (`azr.remote.ChatClient.acomplete`) as a `TextPolicy`: it continues the text of
    the conversation's one message, up to the Codex stop sequences, or where the prompt ends in an opened python
    fence, up to its closing fence. It takes no tools and no later turns."""

    def __init__(self, client: ChatClient, temperature: float, top_p: float):
        self.client, self.temperature, self.top_p = client, temperature, top_p

    async def reply(
        self, messages: list[dict[str, object]], tools: list[dict] | None, max_new_tokens: int, seed: int
    ) -> Reply:
        (message,) = messages
        text = str(message["content"])
        stop = ["```"] if text.endswith("```python\n") else list(STOP)
        answer = await self.client.acomplete(
            text, stop=stop, max_tokens=max_new_tokens, temperature=self.temperature, top_p=self.top_p, seed=seed
        )
        if not answer.ok:
            return Reply({"role": "assistant", "content": ""}, "error", error=answer.error or "no text")
        usage = answer.usage
        return Reply({"role": "assistant", "content": answer.text or ""}, answer.finish_reason or "stop",
                     usage.prompt_tokens, usage.completion_tokens)  # fmt: skip


def model_draws(model_cfg: ModelConfig, adapter: str | None, sampling: Sampling, template_kwargs: dict) -> Draws:
    """A local HF model (optionally 4-/8-bit, optionally with a peft adapter), loaded here and sampled through its own
    `generate` (the same sampling as the train measurement and the held-out evaluation during a run)."""
    from azr.models import load_policy, quiet_third_party

    quiet_third_party()
    model, tokenizer = load_policy(model_cfg, adapter or None)
    return Draws(sampling, GenerateSampler(model, tokenizer), ChatTokens(tokenizer, template_kwargs))


def endpoint_draws(spec: EndpointSpec, sampling: Sampling) -> Draws:
    """An OpenAI-compatible endpoint through `azr.remote.ChatClient`: one request per sample, at most
    `spec.concurrency` in flight. Chat: the conversation a local model gets (`azr.tools.EndpointPolicy`).
    Completions: the HumanEval stub, or a task's text followed by an opened python fence (`Continuation`)."""
    from azr.remote import ChatClient
    from azr.tools import EndpointPolicy
    from azr.tools import Sampling as Decoding

    client = ChatClient(
        spec.base_url,
        spec.model,
        api_key_env=spec.api_key_env,
        timeout_s=spec.timeout_s,
        max_retries=spec.max_retries,
        concurrency=spec.concurrency,
    )
    chat = spec.api == "chat"
    policy = (
        EndpointPolicy(client, Decoding(sampling.temperature, sampling.top_p), spec.model)
        if chat
        else Continuation(client, sampling.temperature, sampling.top_p)
    )
    return Draws(
        sampling,
        text=policy,
        replies=client.run_all,
        chunk=max(32, 4 * spec.concurrency),  # progress is saved (and shown) after each chunk
        mode="answer" if chat else "continuation",
    )
