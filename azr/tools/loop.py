"""The tool loop: one episode of a policy answering a conversation, calling tools and reading their results, until
a final answer or a limit.

Each model turn is parsed into content, reasoning and tool calls; each call is run through the toolbox (in a worker
thread, so endpoint episodes overlap) and answered with a tool message; a call that cannot be read, or one past the
tool-call limit, is answered with an error message instead of run. The episode ends with a finish reason: `answer`
(a turn without calls), `max_turns`, `max_tokens` (the episode's token budget, or a turn cut off), `parse_error`
(the last turn's calls could not be read and no turns were left) or `error` (the policy itself failed). Grading the
answer is not done here.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from azr.tools.parsing import ParsedTurn, ToolCall
from azr.tools.policy import Turn
from azr.tools.toolbox import Toolbox, ToolEvent


@dataclass(frozen=True)
class EpisodeLimits:
    max_turns: int = 6
    max_tool_calls: int = 8
    max_tokens: int = 4096  # generated tokens over the whole episode
    max_new_tokens: int = 1024  # per turn


@dataclass
class Episode:
    messages: list[dict[str, Any]]
    events: list[ToolEvent] = field(default_factory=list)
    finish_reason: str = "answer"
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    turns: int = 0
    max_tool_calls: int = 1 << 30

    @property
    def answer(self) -> str:
        """The final answer: the content of the last assistant message (empty when there is none)."""
        for message in reversed(self.messages):
            if message.get("role") == "assistant":
                return message.get("content") or ""
        return ""

    def usage(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "turns": self.turns,
            "tool_calls": len(self.events),
        }


async def run_episode(policy: Any, toolbox: Toolbox, messages: list[dict], limits: EpisodeLimits, seed: int) -> Episode:
    """Run one episode from `messages` (system and user); never raises for anything the model or a tool does."""
    episode = Episode(list(messages), max_tool_calls=limits.max_tool_calls)
    schemas = toolbox.schemas()
    for index in range(limits.max_turns):
        budget = min(limits.max_new_tokens, limits.max_tokens - episode.completion_tokens)
        if budget <= 0:
            episode.finish_reason = "max_tokens"
            return episode
        turn: Turn = await policy.turn(episode.messages, schemas, budget, seed + index)
        if turn.error is not None:
            episode.finish_reason, episode.error = "error", turn.error
            return episode
        episode.turns += 1
        episode.prompt_tokens += turn.prompt_tokens
        episode.completion_tokens += turn.completion_tokens
        episode.messages.append(assistant_message(turn.parsed))
        if not turn.parsed.tool_calls:
            episode.finish_reason = "max_tokens" if turn.finish_reason == "length" else "answer"
            return episode
        for call in turn.parsed.tool_calls:
            episode.messages.append(await _answer(call, toolbox, episode))
    last = next(m for m in reversed(episode.messages) if m["role"] == "assistant")
    unreadable = any(not isinstance(c["function"]["arguments"], dict) for c in last.get("tool_calls") or [])
    episode.finish_reason = "parse_error" if unreadable else "max_turns"
    return episode


async def _answer(call: ToolCall, toolbox: Toolbox, episode: Episode) -> dict[str, Any]:
    if call.error is not None:
        text = f"[error] your tool call could not be read: {call.error}"
        episode.events.append(ToolEvent(call.name or "(unreadable)", False, "error", 0.0, False, call.error[:300]))
    elif len(episode.events) >= episode.max_tool_calls:
        text = f"[error] tool call limit reached ({episode.max_tool_calls} per episode): answer without tools"
        episode.events.append(ToolEvent(call.name, False, "error", 0.0, False, "tool call limit reached"))
    else:
        result, event = await asyncio.to_thread(toolbox.call, call.name, call.arguments)
        text = result.text()
        episode.events.append(event)
    return {"role": "tool", "tool_call_id": call.id, "name": call.name or "(unreadable)", "content": text}


def assistant_message(parsed: ParsedTurn) -> dict[str, Any]:
    """The turn as an assistant message: content, reasoning (`reasoning_content`, where the turn had a reasoning
    block), and tool calls with their arguments as objects (the raw text where they could not be read)."""
    message: dict[str, Any] = {"role": "assistant", "content": parsed.content}
    if parsed.reasoning is not None:
        message["reasoning_content"] = parsed.reasoning
    if parsed.tool_calls:
        message["tool_calls"] = [call.message_entry() for call in parsed.tool_calls]
    return message
