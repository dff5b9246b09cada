"""Prompts and the answer format: what the policy is asked to write, and how an answer is read back.

The format (`strict`): after any `<think>…</think>` reasoning, exactly one fenced ```python block holding the whole
solution, followed by a line that starts with `Final answer:`. `relaxed` takes the last fenced block of any
language that defines a function or a class (the last block when none does: a script) and needs no answer line, so
a solution followed by a block of example calls runs the solution, not the calls; without a closed fence, it takes
the part of an unclosed one that parses (`unclosed_block`: an answer cut off by the token budget). Reading answers
lives here, beside the prompt that asks for them, so the two cannot drift apart; scoring them is `rewards`' job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

AnswerFormat = Literal["strict", "relaxed"]
ANSWER_PREFIX = "Final answer:"
SYSTEM_PROMPT = (
    "You are an expert Python programmer. Solve the task. You may reason first. Then write the complete solution "
    "(imports and every function the tests call) in exactly one ```python code block, and finish with a line that "
    f"starts with '{ANSWER_PREFIX}' followed by the name of the function that solves the task."
)

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_FENCE = re.compile(r"^```[ \t]*([\w+-]*)[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
_PYTHON_TAGS = {"python", "py", "python3"}


@dataclass(frozen=True)
class Answer:
    """What was read from one completion: the code to run (None: nothing runnable) and whether the strict
    format held (`problem` says why not)."""

    code: str | None
    format_ok: bool
    problem: str = ""


def completion_text(completion: object) -> str:
    """TRL passes a string (standard datasets) or a list of messages (conversational ones). With tools, the list
    holds the calls and their results too: the answer is what the assistant wrote after the last tool result."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        messages = [m for m in completion if isinstance(m, dict)]
        after = 1 + max((i for i, m in enumerate(messages) if m.get("role") == "tool"), default=-1)
        parts = [m.get("content") or "" for m in messages[after:] if m.get("role") == "assistant"]
        return "\n".join(_content_text(p) for p in parts)
    if isinstance(completion, dict):
        return str(completion.get("content") or "")
    return ""


def last_user_message(prompt: object) -> Any:
    """The content of a conversational prompt's last user message (None if it has none); a plain prompt as it is."""
    if isinstance(prompt, list):
        users = [m.get("content") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        return users[-1] if users else None
    return prompt


def _content_text(content: object) -> str:
    """A message's content: a string, or a list of parts ({"type": "text", "text": ...}) as multimodal APIs send."""
    if isinstance(content, list):
        return "".join(p.get("text") or "" for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content if isinstance(content, str) else str(content)


def strip_thinking(text: str) -> str | None:
    """The text outside `<think>…</think>`; None when a think block is never closed (no answer was given)."""
    visible = _THINK.sub("", text)
    if "<think>" in visible:
        return None
    return visible.replace("</think>", "")


def parse_answer(text: str, mode: AnswerFormat = "strict") -> Answer:
    """Read the code out of a completion. In `strict` mode a format violation leaves no code to run."""
    visible = strip_thinking(text)
    if visible is None:
        return Answer(None, False, "unterminated <think> block: no answer after the reasoning")
    blocks = list(_FENCE.finditer(visible))
    problem = _strict_problem(visible, blocks)
    if mode == "strict":
        return Answer(blocks[0].group(2) if not problem else None, not problem, problem)
    code = solution_block([b.group(2) for b in blocks]) if blocks else unclosed_block(visible)
    return Answer(code, not problem, problem)


def solution_block(blocks: list[str]) -> str:
    """Of an answer's closed blocks, the last that defines a function or a class at its top level (the last block
    when none does). Real models follow the solution with a block of example calls ("Here's how to use it"), which
    alone fails on a name it never defines; a block that improves on an earlier one comes later and wins."""
    return next((code for code in reversed(blocks) if _defines(code)), blocks[-1])


def _defines(code: str) -> bool:
    import ast

    tree = _module(code)
    return tree is not None and any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for node in tree.body
    )


_OPEN_FENCE = re.compile(r"^```[ \t]*([\w+-]*)[ \t]*\n", re.MULTILINE)
SALVAGE_LINES = 400  # the most trailing lines dropped looking for code that parses (a few ms)


def unclosed_block(visible: str) -> str | None:
    """The code of a fence opened and never closed (relaxed mode): what a small model writes when a repetition loop
    runs its answer to the token budget, often after a whole function. The longest run of whole top-level
    statements from the fence's start that parses as Python; None when there is none. A statement still open at
    the cut (an indented last line: a function whose body the loop was still writing) is dropped whole, never
    run half-written, so a truncated loop earns nothing."""
    opened = list(_OPEN_FENCE.finditer(visible))
    if not opened:
        return None
    lines = visible[opened[-1].end() :].splitlines()
    for end in range(len(lines), max(len(lines) - SALVAGE_LINES, 0), -1):
        follows = next((line for line in lines[end:] if line.strip()), None)
        if follows is None:  # cut at the end of the text: its last line must be top-level too
            follows = next((line for line in reversed(lines[:end]) if line.strip()), "")
        if follows[:1] in (" ", "\t"):
            continue  # cutting here would end inside an indented block
        code = "\n".join(lines[:end]).rstrip()
        if code and _module(code) is not None:
            return code + "\n"
    return None


def _module(code: str):
    """`code` parsed (an `ast.Module`), or None where it does not parse."""
    import ast

    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def _strict_problem(visible: str, blocks: list[re.Match]) -> str:
    if len(blocks) != 1:
        return f"expected exactly one fenced code block, found {len(blocks)}"
    if blocks[0].group(1).lower() not in _PYTHON_TAGS:
        return f"the code block is tagged {blocks[0].group(1)!r}, not python"
    after = visible[blocks[0].end() :]
    if not any(line.strip().startswith(ANSWER_PREFIX) for line in after.splitlines()):
        return f"no '{ANSWER_PREFIX}' line after the code block"
    return ""


def chat_messages(task_prompt: str) -> list[dict[str, str]]:
    """The conversation the policy answers: the system prompt and the task."""
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task_prompt}]


_DEF = re.compile(r"^(?:async\s+)?def\s+(\w+)|^class\s+(\w+)", re.MULTILINE)


def reference_answer(solution: str, entry_point: str | None = None) -> str:
    """A reference solution written the way a strict-format answer looks (what the SFT warm start teaches)."""
    name = entry_point
    if not name:
        found = _DEF.findall(solution)
        name = next((a or b for a, b in reversed(found)), "solution") if found else "solution"
    return f"```python\n{solution.strip()}\n```\n{ANSWER_PREFIX} {name}"


HINT_SYSTEM_PROMPT = (
    "You are a programming teacher. A student attempted the Python task below and failed. Give one short hint that "
    "points at the key idea or the mistake to avoid. Do not write any code, do not name or outline a complete "
    "solution, and do not give a final answer."
)
HINT_MARKER = "Hint from a teacher (it may be incomplete; write your own complete solution):"


def hint_request_messages(task_prompt: str) -> list[dict[str, str]]:
    """What the teacher is asked for a hint: its own system prompt and the original task, nothing templated."""
    return [{"role": "system", "content": HINT_SYSTEM_PROMPT}, {"role": "user", "content": task_prompt}]


def hinted_messages(task_prompt: str, hint: str) -> list[dict[str, str]]:
    """The policy's conversation for a retry: the original task, then the hint under a marker line."""
    return chat_messages(f"{task_prompt}\n\n{HINT_MARKER}\n{hint}")
