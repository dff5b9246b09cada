"""Reading one generated assistant turn: its visible content, its reasoning, and its tool calls.

Where the tokenizer carries a response template (transformers' `parse_response`, what TRL uses), that parses the
turn; where it has none, or its parse fails on malformed output, a lenient parser reads Hermes-style
`<tool_call>{"name": ..., "arguments": ...}</tool_call>` blocks: several per turn, arguments as an object or as a
JSON string, `parameters` accepted for `arguments`, blocks inside `<think>` ignored. A call that cannot be read
(bad JSON, no name, never closed) becomes a `ToolCall` with an `error`, which the tool environment answers with an
error tool message instead of running it. An API's native tool calls are read into the same `ToolCall`s
(`call_from_wire`), and a parsed turn is written back as an assistant message (`assistant_message`). Nothing here
raises on model output.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from azr.inputs import load_json

_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_OPEN = "<tool_call>"


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any] | str  # an object; the raw text when it could not be read
    error: str | None = None  # why the call cannot be run
    id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:12]}")

    def message_entry(self) -> dict[str, Any]:
        """The call as it goes into an assistant message: OpenAI's shape, arguments as an object."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class ParsedTurn:
    content: str
    reasoning: str | None  # None: the turn had no reasoning block
    tool_calls: list[ToolCall]


def parse_turn(text: str, tokenizer: Any = None, prefix: str = "", tools: list | None = None) -> ParsedTurn:
    """Parse generated `text` (special tokens kept, the end-of-turn token stripped or not). `prefix` is the prompt
    it continued (for templates that open a reasoning block in the prompt)."""
    if tokenizer is not None and getattr(tokenizer, "response_template", None) is not None:
        parsed = _with_template(text, tokenizer, prefix, tools)
        if parsed is not None:
            return parsed
    return parse_lenient(text, prefix)


def _with_template(text: str, tokenizer: Any, prefix: str, tools: list | None) -> ParsedTurn | None:
    try:
        message = tokenizer.parse_response(text, prefix=prefix, tools=tools)
    except Exception:  # transformers raises ValueError (and worse) on malformed calls: the lenient parser says why
        return None
    if not isinstance(message, dict):
        return None
    content = message.get("content") or ""
    if not isinstance(content, str) or _OPEN in strip_reasoning(content):
        return None  # a call the template did not recognise: let the lenient parser report it
    calls = []
    for raw in message.get("tool_calls") or []:
        function = raw.get("function", raw) if isinstance(raw, dict) else None
        if not isinstance(function, dict):
            return None
        calls.append(_call_from(function))
    reasoning = message.get("reasoning_content")
    if reasoning is None and prefix.rstrip().endswith("</think>"):
        reasoning = ""
    return ParsedTurn(_clean(content), reasoning if isinstance(reasoning, str) else None, calls)


def parse_lenient(text: str, prefix: str = "") -> ParsedTurn:
    reasoning, visible = split_reasoning(text, prefix)
    calls = []
    for match in _CALL.finditer(visible):
        calls.append(_call_from_text(match.group(1)))
    rest = _CALL.sub("", visible)
    if _OPEN in rest:  # opened and never closed (cut off by the token limit, or forgotten)
        start = rest.index(_OPEN)
        raw = rest[start + len(_OPEN) :].strip()
        calls.append(ToolCall("", raw, "the <tool_call> block is never closed with </tool_call>"))
        rest = rest[:start]
    return ParsedTurn(_clean(rest), reasoning, calls)


def split_reasoning(text: str, prefix: str = "") -> tuple[str | None, str]:
    """(reasoning, visible text). A `</think>` without its `<think>` closes a block the prompt opened; a `<think>`
    never closed makes the rest reasoning."""
    opened_by_prompt = prefix.rstrip().endswith("<think>")
    if opened_by_prompt or ("</think>" in text and "<think>" not in text.split("</think>", 1)[0]):
        head, sep, tail = text.partition("</think>")
        if not sep:
            return head.strip(), ""
        return head.replace("<think>", "").strip(), tail
    start = text.find("<think>")
    if start < 0:
        return ("" if prefix.rstrip().endswith("</think>") else None), text
    end = text.find("</think>", start)
    if end < 0:
        return text[start + len("<think>") :].strip(), text[:start]
    return text[start + len("<think>") : end].strip(), text[:start] + text[end + len("</think>") :]


def strip_reasoning(text: str) -> str:
    return split_reasoning(text)[1]


def _call_from_text(body: str) -> ToolCall:
    body = body.strip()
    try:
        obj = load_json(body)
    except ValueError as exc:
        return ToolCall(_name_guess(body), body, f"the tool call is not valid JSON: {exc}")
    if not isinstance(obj, dict):
        return ToolCall("", body, "the tool call must be a JSON object with 'name' and 'arguments'")
    return _call_from(obj)


def _call_from(obj: dict[str, Any]) -> ToolCall:
    name = obj.get("name")
    raw_args = obj.get("arguments", obj.get("parameters"))
    if not isinstance(name, str) or not name.strip():
        return ToolCall("", json.dumps(obj, ensure_ascii=False), "the tool call has no 'name'")
    if raw_args is None:
        return ToolCall(name, {})
    if isinstance(raw_args, str):
        try:
            parsed = load_json(raw_args) if raw_args.strip() else {}
        except ValueError as exc:
            return ToolCall(name, raw_args, f"the arguments are not valid JSON: {exc}")
        raw_args = parsed
    if not isinstance(raw_args, dict):
        return ToolCall(name, json.dumps(raw_args, ensure_ascii=False), "the arguments must be a JSON object")
    return ToolCall(name, raw_args)


def _name_guess(body: str) -> str:
    found = re.search(r'"name"\s*:\s*"([^"]{1,64})"', body)
    return found.group(1) if found else ""


def _clean(content: str) -> str:
    for marker in ("<|im_end|>", "<|endoftext|>"):
        content = content.replace(marker, "")
    return content.strip()


def assistant_message(parsed: ParsedTurn) -> dict[str, Any]:
    """The turn as an assistant message: content, reasoning (`reasoning_content`, where the turn had a reasoning
    block), and tool calls with their arguments as objects (the raw text where they could not be read)."""
    message: dict[str, Any] = {"role": "assistant", "content": parsed.content}
    if parsed.reasoning is not None:
        message["reasoning_content"] = parsed.reasoning
    if parsed.tool_calls:
        message["tool_calls"] = [call.message_entry() for call in parsed.tool_calls]
    return message


def call_from_wire(raw: Any) -> ToolCall:
    """A native tool call as an OpenAI-compatible API returns it (arguments as a JSON string); one it cannot read
    becomes a call with an error, as the text parser's do."""
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
