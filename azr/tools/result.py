"""What one tool call returns (`ToolResult`), and the two things done to every output before a model sees it:
capping its length and neutralising chat-template control tokens, so a web page or a program's output cannot
close the tool turn and forge an assistant turn or a tool call of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

ToolStatus = Literal["ok", "error", "refused", "timeout"]

# `<|anything|>` (ChatML, Llama 3, gpt-oss, FIM markers...) and the tag-shaped markers of tool-calling and reasoning
# templates (Hermes/Qwen `<tool_call>`, `<tool_response>`, `<think>`, Qwen3.5's `<function=...>`).
_CONTROL = re.compile(
    r"<\|[^<>|\s]{1,64}\|>"
    r"|</?(?:tool_call|tool_response|tool_result|tools|think|scratch_pad|function|parameter)\b[^<>]{0,64}>",
    re.IGNORECASE,
)


@dataclass
class ToolResult:
    """One tool call's outcome. `status`: ok (the tool did its job; a program that raised is still ok, its
    traceback is the content), error (bad arguments, an unreachable page, a sandbox failure), refused (a policy
    said no: an address the guard refuses, a content type, the `process` sandbox backend), timeout."""

    status: ToolStatus
    content: str
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def text(self) -> str:
        """What the model reads in the tool message."""
        return self.content if self.ok else f"[{self.status}] {self.content}"

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, **asdict(self)}


def neutralise(text: str, extra: Iterable[str] = ()) -> str:
    """`text` with every control token written as inert text (`<|im_end|>` becomes `&lt;|im_end|&gt;`), including
    the model's own special tokens passed as `extra`."""
    text = _CONTROL.sub(_escape, text)
    for token in sorted({t for t in extra if t and len(t) > 1}, key=len, reverse=True):
        # a word joiner after the first character: the same look, but never the token's bytes
        text = text.replace(token, _escape_text(token) if "<" in token else token[0] + "\u2060" + token[1:])
    return text


def _escape(match: re.Match) -> str:
    return _escape_text(match.group(0))


def _escape_text(token: str) -> str:
    return token.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def cap(text: str, limit: int) -> tuple[str, bool]:
    """`text` cut to `limit` characters with a note saying how much was left out; (text, truncated)."""
    if len(text) <= limit:
        return text, False
    dropped = len(text) - limit
    return f"{text[:limit]}\n[... {dropped} more characters not shown]", True
