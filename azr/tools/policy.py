"""Who answers in an episode: a local HF model, or an OpenAI-compatible endpoint with native tool calls (a vLLM
server azr starts is one). A policy renders nothing of the conversation's meaning: it takes the messages and the tool
schemas and returns one assistant `Turn`; running the calls is the loop's job.

The local policy renders the chat template with `tools=`, samples through the rollout seam (`azr.rollouts`' HF
generate sampler, one turn at a time, each with its own seed) and parses the turn with `azr.tools.parsing`. The
endpoint policy sends `tools` and reads `tool_calls` through `azr.remote.ChatClient` (a remote API returns text, not
token ids, so it is not a source of the seam); arguments it cannot read become calls with an error, like the local
parser's.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass
from typing import Any

from azr.inputs import load_json
from azr.rollouts import GenerateSampler, Prompt, eos_ids
from azr.rollouts import Sampling as RolloutSampling
from azr.tools.parsing import ParsedTurn, ToolCall, parse_turn


@dataclass
class Turn:
    parsed: ParsedTurn
    finish_reason: str  # stop / length / error
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None  # the request or generation failed: the episode ends with finish reason `error`


@dataclass
class Sampling:
    temperature: float = 0.7
    top_p: float = 1.0


class LocalPolicy:
    """A transformers model and tokenizer, sampled through the rollout seam (`azr.rollouts.GenerateSampler`: one
    group of one completion per turn, with its token ids); generation runs in a worker thread, one turn at a time."""

    kind = "local"

    def __init__(self, model: Any, tokenizer: Any, sampling: Sampling, template_kwargs: dict[str, Any], name: str):
        self.model, self.tokenizer, self.sampling = model, tokenizer, sampling
        self.template_kwargs, self.name = dict(template_kwargs), name
        self.sampler = GenerateSampler(model, tokenizer, self.template_kwargs)
        self.max_length = int(getattr(model.config, "max_position_embeddings", 0) or 0)
        self._lock = threading.Lock()
        model.eval()

    @property
    def control_tokens(self) -> list[str]:
        return list(self.tokenizer.all_special_tokens)

    async def turn(self, messages: list[dict], tools: list[dict], max_new_tokens: int, seed: int) -> Turn:
        return await asyncio.to_thread(self._turn, messages, tools, max_new_tokens, seed)

    def _turn(self, messages: list[dict], tools: list[dict], max_new_tokens: int, seed: int) -> Turn:
        tok = self.tokenizer
        request = Prompt("turn", messages, tools or None)
        prompt = self.sampler.prompt_text(request)
        length = len(tok(prompt, add_special_tokens=False)["input_ids"])
        if self.max_length:
            max_new_tokens = min(max_new_tokens, self.max_length - length)
        if max_new_tokens <= 0:
            return Turn(ParsedTurn("", None, []), "length", length, 0)
        with self._lock:
            (group,) = self.sampler.sample([request], self._settings(max_new_tokens, seed))
        new = group.completion_ids[0]  # through the first end-of-sequence token, if it came
        stop = bool(new) and new[-1] in eos_ids(self.model, tok)
        text = tok.decode(new[:-1] if stop else new, skip_special_tokens=False)
        parsed = parse_turn(text, tok, prompt, tools)
        return Turn(parsed, "stop" if stop else "length", len(group.prompt_ids), len(new))

    def _settings(self, max_new_tokens: int, seed: int) -> RolloutSampling:
        """The turn's sampling: the episode's temperature and top_p, no top-k cut, the model's own min_p and
        repetition penalty, drawn from the turn's seed."""
        config = getattr(self.model, "generation_config", None)
        return RolloutSampling(
            n=1,
            max_new_tokens=max_new_tokens,
            temperature=self.sampling.temperature,
            top_p=self.sampling.top_p,
            top_k=0,
            min_p=getattr(config, "min_p", None),
            repetition_penalty=getattr(config, "repetition_penalty", None) or 1.0,
            batch_size=1,
            seed=seed,
        )


class EndpointPolicy:
    """An OpenAI-compatible chat endpoint (`azr.remote.ChatClient`) asked with native `tools`."""

    kind = "endpoint"
    control_tokens: tuple[str, ...] = ()

    def __init__(self, client: Any, sampling: Sampling, name: str):
        self.client, self.sampling, self.name = client, sampling, name

    async def turn(self, messages: list[dict], tools: list[dict], max_new_tokens: int, seed: int) -> Turn:
        reply = await self.client.achat(
            wire_messages(messages),
            max_tokens=max_new_tokens,
            temperature=self.sampling.temperature,
            top_p=self.sampling.top_p,
            seed=seed,
            tools=tools or None,
        )
        if not reply.ok:
            return Turn(ParsedTurn("", None, []), "error", error=reply.error or "no reply")
        calls = [_call_from_wire(c) for c in reply.tool_calls or []]
        parsed = ParsedTurn(reply.text or "", reply.reasoning, calls)
        if not calls:  # a server without a tool parser hands the calls back as text: read them like a local model's
            parsed = parse_turn(reply.text or "")
            parsed.reasoning = reply.reasoning if parsed.reasoning is None else parsed.reasoning
        usage = reply.usage
        return Turn(parsed, reply.finish_reason or "stop", usage.prompt_tokens, usage.completion_tokens)


def wire_messages(messages: list[dict]) -> list[dict]:
    """Messages as an OpenAI-compatible server takes them: tool-call arguments as JSON strings, no reasoning."""
    out = []
    for message in messages:
        message = {k: v for k, v in message.items() if k != "reasoning_content"}
        if message.get("tool_calls"):
            message["tool_calls"] = [
                {**call, "function": {**call["function"], "arguments": _arguments_text(call["function"]["arguments"])}}
                for call in message["tool_calls"]
            ]
        out.append(message)
    return out


def _arguments_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def _call_from_wire(raw: Any) -> ToolCall:
    function = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
        return ToolCall("", json.dumps(raw, ensure_ascii=False, default=str), "the tool call has no function name")
    call_id = raw.get("id") if isinstance(raw.get("id"), str) and raw.get("id") else None
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = load_json(arguments) if arguments.strip() else {}
        except ValueError as exc:
            call = ToolCall(function["name"], function["arguments"], f"the arguments are not valid JSON: {exc}")
            return _with_id(call, call_id)
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        call = ToolCall(function["name"], json.dumps(arguments), "the arguments must be a JSON object")
        return _with_id(call, call_id)
    return _with_id(ToolCall(function["name"], arguments), call_id)


def _with_id(call: ToolCall, call_id: str | None) -> ToolCall:
    if call_id:
        call.id = call_id
    return call
