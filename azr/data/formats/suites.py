"""Sets whose tests are test modules, converted to task fields.

- `kodcode`: KodCode (`question`, `solution`, `test`: a pytest module that imports the solution with
  `from solution import f`, `test_info` with the function's declaration). Its first test is public.
- `bigcodebench`: BigCodeBench (`instruct_prompt` or `complete_prompt`, `canonical_solution`, `code_prompt`,
  `test`: unittest `TestCases`, `entry_point`, `libs`); the prompt is the instruction (a copy of the file
  without `instruct_prompt` gives the completion prompt: a format takes no column map), the reference is the code prompt
  followed by the canonical body, as BigCodeBench checks its ground truth (a canonical solution that is a whole
  function, as code-RL copies ship it, keeps the prompt's imports and constants). The solution and its test run as
  one module (`code + "\n" + test`, with `os`, `sys` and `environ` in it), as BigCodeBench runs them, so each may
  use the other's names. Each library becomes a tag `lib:NAME`. The first test method is public.
"""

from __future__ import annotations

import ast
from typing import Any

from azr.data.formats.common import Row, need_text, parsed, row_id
from azr.errors import DataError

# The names BigCodeBench's harness puts in the module before the solution and its test run in it (`sys`, `os`,
# `environ`: bigcodebench.eval.unsafe_execute).
BIGCODEBENCH_PRELUDE = "import os, sys\nenviron = os.environ\n"
KODCODE_DECLARATION = "\n\nThe function to write: `{declaration}`. Give it in one Python code block."


def kodcode(row: Row, where: str) -> Row:
    question = need_text(row, where, "question")
    info = parsed(row.get("test_info") or [], where, "test_info")
    declaration = (
        info[0].get("function_declaration") if isinstance(info, list) and info and isinstance(info[0], dict) else None
    )
    prompt = question + (KODCODE_DECLARATION.format(declaration=declaration) if declaration else "")
    return {
        **row_id(row, "question_id"),
        "prompt": prompt,
        "solution": row.get("solution"),
        "tests": [{"pytest": need_text(row, where, "test")}],
        "public_tests": 1,
    }


def bigcodebench(row: Row, where: str) -> Row:
    entry = need_text(row, where, "entry_point")
    body = need_text(row, where, "canonical_solution")
    if f"def {entry}(" in body:  # a whole function, as code-RL copies give it: the prompt's imports and constants
        head = _context(row.get("complete_prompt") or row.get("code_prompt"), entry)
    else:
        head = need_text(row, where, "code_prompt", "complete_prompt")
    libs = _libs(row.get("libs"), where)
    return {
        **row_id(row, "task_id"),
        "prompt": need_text(row, where, "instruct_prompt", "complete_prompt"),
        "solution": head + body,
        "tests": [{"unittest": need_text(row, where, "test"), "shared": True}],
        "entry_point": entry,
        "prelude": BIGCODEBENCH_PRELUDE,
        "tags": [f"lib:{name}" for name in libs],
        "public_tests": 1,
    }


def _context(prompt: Any, entry: str) -> str:
    """What a prompt holds besides the function to write (its imports and constants), as source to put before a
    whole-function reference; empty when there is none or the prompt does not parse."""
    if not isinstance(prompt, str):
        return ""
    try:
        tree = ast.parse(prompt)
    except (SyntaxError, ValueError):
        return ""
    lines = prompt.splitlines(keepends=True)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
            del lines[start : node.end_lineno]
            break
    kept = "".join(lines).rstrip()
    return f"{kept}\n\n" if kept else ""


def _libs(value: Any, where: str) -> list[str]:
    """BigCodeBench stores `libs` as a Python list's repr ("['os', 'numpy']"); JSON or a list also do."""
    if value is None:
        return []
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            raise DataError(f"{where}: column 'libs': expected a list of library names, got {value[:60]!r}") from None
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise DataError(f"{where}: column 'libs': expected a list of library names")
    return list(value)
