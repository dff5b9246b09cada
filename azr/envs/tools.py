"""The tool loop as an environment: each policy turn is read into content, reasoning and tool calls; each call runs
through the toolbox and is answered with a tool message (an unreadable call, or one past the episode's limit, with an
error message); a turn without calls is the answer, graded through the run's `Rubric`. Finish reasons: `answer`,
`max_tokens` (the last turn cut off), `max_turns`, `parse_error` (the last allowed turn's calls unreadable); tool
events (no arguments, no output) are kept in `episode.state["events"]` for the record. `azr gen` and GRPO play it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from azr.envs.scoring import score_answers
from azr.envs.task import TaskPrompt
from azr.rewards import Rubric
from azr.rollouts import ENV, ChatTokens, Episode, Message
from azr.tools import ParsedTurn, Toolbox, ToolCall, ToolEvent, assistant_message, call_from_wire, parse_turn

Parse = Callable[[str], ParsedTurn]


class ToolEnvironment:
    """`toolbox`'s tools offered to the policy for up to `max_turns` turns and `max_tool_calls` calls an episode
    (None: no limit of its own). `parse` reads a token-level policy's turn (special tokens kept; a local model's
    tokenizer may parse it with its response template, `turn_parser`); an endpoint's native tool calls are read as
    the API sent them. `rubric` None: the episodes are scored elsewhere (GRPO's reward functions)."""

    def __init__(
        self,
        toolbox: Toolbox,
        rubric: Rubric | None,
        max_turns: int,
        max_tool_calls: int | None,
        parse: Parse = parse_turn,
    ):
        self.toolbox, self.rubric, self.parse = toolbox, rubric, parse
        self.max_turns, self.max_tool_calls = max_turns, max_tool_calls
        self._schemas = toolbox.schemas()

    @property
    def tools(self) -> list[dict]:
        return self._schemas

    def start(self, task: TaskPrompt) -> list[Message]:
        return [dict(m) for m in task.messages]

    def respond(self, episode: Episode, text: str) -> list[Message] | None:
        turn = episode.turns[-1]
        parsed = self._read(turn.message, turn.raw or text)
        turn.messages[0] = assistant_message(parsed)
        if not parsed.tool_calls:
            episode.finish_reason = "max_tokens" if turn.finish_reason == "length" else "answer"
            return None
        events = events_of(episode)
        results = [self._answer(call, events) for call in parsed.tool_calls]
        if len(episode.policy_turns) >= self.max_turns:
            unreadable = any(not isinstance(c.arguments, dict) for c in parsed.tool_calls)
            episode.finish_reason = "parse_error" if unreadable else "max_turns"
        return results

    def score(self, episodes: Sequence[Episode]) -> None:
        if self.rubric is None:
            raise ValueError("ToolEnvironment: built without a rubric, it cannot score")
        tasks = []
        for episode in episodes:
            task = episode.task.task if isinstance(episode.task, TaskPrompt) else None
            if task is None:
                raise ValueError(f"episode of {episode.task_id}: started without its task, it cannot be graded")
            tasks.append(task)
        score_answers(self.rubric, episodes, [final_answer(e) for e in episodes], tasks)

    def _read(self, message: Message, text: str) -> ParsedTurn:
        reasoning = message.get("reasoning_content")
        wire = message.get("tool_calls")
        if isinstance(wire, list) and wire:  # an API's native calls; the content is the visible text
            parsed = ParsedTurn(str(message.get("content") or ""), None, [call_from_wire(c) for c in wire])
        else:  # a local model's text, or a server without a tool parser that left the calls in it
            parsed = self.parse(text)
        if parsed.reasoning is None and isinstance(reasoning, str):
            parsed.reasoning = reasoning
        return parsed

    def _answer(self, call: ToolCall, events: list[ToolEvent]) -> Message:
        if call.error is not None:
            text = f"[error] your tool call could not be read: {call.error}"
            events.append(ToolEvent(call.name or "(unreadable)", False, "error", 0.0, False, call.error[:300]))
        elif self.max_tool_calls is not None and len(events) >= self.max_tool_calls:
            text = f"[error] tool call limit reached ({self.max_tool_calls} per episode): answer without tools"
            events.append(ToolEvent(call.name, False, "error", 0.0, False, "tool call limit reached"))
        else:
            result, event = self.toolbox.call(call.name, call.arguments)
            text = result.text()
            events.append(event)
        return {"role": "tool", "tool_call_id": call.id, "name": call.name or "(unreadable)", "content": text}


def turn_parser(chat: ChatTokens, schemas: list[dict]) -> Parse:
    """How a token-level policy's turn is read: its tokenizer's response template where it has one (else the
    lenient parser), the generation prompt rendered with the tools as the prefix it continued."""
    tokenizer, prefix = chat.tokenizer, chat.render([{"role": "user", "content": "."}], schemas)
    return lambda text: parse_turn(text, tokenizer, prefix, schemas)


def shown_messages(episode: Episode) -> list[Message]:
    """The messages after the prompt that the policy wrote or was shown, in order: each turn's assistant message
    (with the tool calls read from it) and the tool results it was answered with. Results that were never shown
    (after the last allowed turn, or past the row's length) are left out."""
    return [m for turn in episode.turns if turn.kind != ENV or turn.ids for m in turn.messages]


def events_of(episode: Episode) -> list[ToolEvent]:
    """The tool events of `episode`, in order."""
    events = episode.state.setdefault("events", [])
    assert isinstance(events, list)
    return events


def final_answer(episode: Episode) -> str:
    """The content of the last assistant message (empty when there is none): what is graded."""
    for message in reversed(episode.messages):
        if message.get("role") == "assistant":
            content: Any = message.get("content")
            return content or ""
    return ""
