"""Sets whose tests are test modules, converted to task fields.

- `kodcode`: KodCode (`question`, `solution`, `test`: a pytest module that imports the solution with
  `from solution import f`, `test_info` with the function's declaration).
- `bigcodebench`: BigCodeBench (`instruct_prompt` or `complete_prompt`, `canonical_solution`, `code_prompt`,
  `test`: unittest `TestCases`, `entry_point`, `libs`); the prompt is the instruction (`--column-map` or a copy
  of the file with `complete_prompt` renamed picks the completion prompt), the reference is the code prompt
  followed by the canonical body, as BigCodeBench checks its ground truth. Each library becomes a tag `lib:NAME`.
"""

from __future__ import annotations

import ast
from typing import Any

from azr.data.formats.common import Row, need_text, parsed, row_id
from azr.errors import DataError

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
    }


def bigcodebench(row: Row, where: str) -> Row:
    entry = need_text(row, where, "entry_point")
    body = need_text(row, where, "canonical_solution")
    defines = f"def {entry}(" in body
    head = "" if defines else need_text(row, where, "code_prompt", "complete_prompt")
    libs = _libs(row.get("libs"), where)
    return {
        **row_id(row, "task_id"),
        "prompt": need_text(row, where, "instruct_prompt", "complete_prompt"),
        "solution": head + body,
        "tests": [{"unittest": need_text(row, where, "test")}],
        "entry_point": entry,
        "tags": [f"lib:{name}" for name in libs],
    }


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
