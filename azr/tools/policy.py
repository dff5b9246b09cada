"""An OpenAI-compatible endpoint as a tool-using policy (a vLLM server azr starts is one): a `TextPolicy` of the
episode runner (`azr.rollouts.run_text`) that sends the conversation with native `tools` and returns one assistant
message: its content, the reasoning the API returned, and the API's tool calls as it sent them. Reading those calls
(or the ones a server without a tool parser leaves in the text) is the tool environment's job. A remote API returns
text, not token ids, so its episodes are records, not training rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from azr.rollouts import Reply


@dataclass
class Sampling:
    temperature: float = 0.7
    top_p: float = 1.0


class EndpointPolicy:
    """An OpenAI-compatible chat endpoint (`azr.remote.ChatClient`) asked with native `tools`."""

    kind = "endpoint"
    control_tokens: tuple[str, ...] = ()

    def __init__(self, client: Any, sampling: Sampling, name: str):
        self.client, self.sampling, self.name = client, sampling, name

    async def reply(self, messages: list[dict], tools: list[dict] | None, max_new_tokens: int, seed: int) -> Reply:
        answer = await self.client.achat(
            wire_messages(messages),
            max_tokens=max_new_tokens,
            temperature=self.sampling.temperature,
            top_p=self.sampling.top_p,
            seed=seed,
            tools=tools or None,
        )
        if not answer.ok:
            return Reply({"role": "assistant", "content": ""}, "error", error=answer.error or "no reply")
        message: dict[str, Any] = {"role": "assistant", "content": answer.text or ""}
        if answer.reasoning is not None:
            message["reasoning_content"] = answer.reasoning
        if answer.tool_calls:
            message["tool_calls"] = list(answer.tool_calls)
        usage = answer.usage
        return Reply(message, answer.finish_reason or "stop", usage.prompt_tokens, usage.completion_tokens)


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
