"""Test plans: how each test is judged. A test is a *value test* when it is one `assert` whose conjuncts each compare
the solution's own output with a literal (`f(x) == 3`, `3 > obj.m(x)`, `f(x) is None`), or test its truth (`f(x)`,
`not f(x)`), optionally through list/tuple/sorted/set/frozenset: only the expressions that produce the output enter
the sandbox, and their values are compared here (`ValueCheck.judge`), with trusted builtins, so the expected values
never reach the program and its dunder methods or shadowed builtins cannot bend a comparison. Every other test is a
*statement test*, run inside; its `assert`s of the same shapes (on the solution's output or a name bound to it) are
rewritten to report their values, compared here, and those at the top level must report.
"""

from __future__ import annotations

import ast
import builtins
import functools
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from azr.data import decode_case
from azr.rewards.stdio import output_cap
from azr.rewards.values import Opaque, check_hashed_size, short_repr

_OPS: dict[type, tuple[str, Callable[[Any, Any], Any]]] = {
    ast.Eq: ("==", operator.eq),
    ast.NotEq: ("!=", operator.ne),
    ast.Lt: ("<", operator.lt),
    ast.LtE: ("<=", operator.le),
    ast.Gt: (">", operator.gt),
    ast.GtE: (">=", operator.ge),
    ast.Is: ("is", operator.is_),
    ast.IsNot: ("is not", operator.is_not),
}
_MIRROR = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<=", "is": "is", "is not": "is not"}
_CHECKS: dict[str, Callable[[Any, Any], Any]] = {name: fn for name, fn in _OPS.values()}
_CHECKS["truthy"] = lambda value, _: bool(value)
_CHECKS["falsy"] = lambda value, _: not value
# Applied here, to plain data, by the real builtins: the sandbox only materialises the iterable.
_WRAPPERS: dict[str, Callable[[Any], Any]] = {
    "list": list,
    "tuple": tuple,
    "sorted": sorted,
    "set": set,
    "frozenset": frozenset,
}
_BUILTIN_NAMES = frozenset(dir(builtins))


@dataclass(frozen=True)
class ValueCheck:
    """One conjunct of a value test: `expr` (and `wrap`) is all the sandbox sees; `op` and `expected` stay here."""

    expr: str
    op: str
    expected: Any = None
    wrap: str = ""

    def judge(self, actual: Any) -> str | None:
        if self.wrap:
            if self.wrap in ("set", "frozenset"):
                check_hashed_size(len(actual))
            actual = _WRAPPERS[self.wrap](actual)
        if _CHECKS[self.op](actual, self.expected):
            return None
        shown = f"{self.wrap}({self.expr})" if self.wrap else self.expr
        expected = "" if self.op in ("truthy", "falsy") else f" {self.expected!r}"
        why = f"AssertionError: {shown} = {short_repr(actual)}, expected {self.op}{expected}"
        if isinstance(actual, Opaque) and actual.own_eq and self.op in ("==", "!="):
            why += f" (a {actual.type_name} is compared here as itself, never by its own __eq__: return plain data)"
        return why


@dataclass(frozen=True)
class TestPlan:
    """How one test is judged: a statement run in the sandbox, value checks decided here, or a stdin/stdout case
    whose output is compared here (`azr.rewards.stdio`)."""

    __test__ = False  # not a pytest test class

    kind: Literal["value", "statement", "stdio"]
    source: str
    checks: tuple[ValueCheck, ...] = ()
    program: str = ""  # statement tests with checks: the source with each checked `assert` turned into a report
    required: tuple[int, ...] = ()  # checks at the top level of a statement test: each must report a value

    def sent(self) -> Any:
        """All the sandbox is told about this test."""
        if self.kind == "value":
            return [[c.expr, c.wrap] for c in self.checks]
        if self.kind == "stdio":
            case = decode_case(self.source)
            assert case is not None  # planned as stdio because it decoded
            return [case.input, output_cap(case)]
        return [self.program or self.source, [c.wrap for c in self.checks]]


@functools.lru_cache(maxsize=1 << 16)  # a step grades every completion of a group against the same tests
def plan_test(source: str) -> TestPlan:
    """A value test when every conjunct of a single `assert` is a value check (see the module docstring)."""
    if decode_case(source) is not None:
        return TestPlan("stdio", source)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return TestPlan("statement", source)
    if len(tree.body) == 1 and isinstance(tree.body[0], ast.Assert):
        checks = [_value_check(node) for node in _conjuncts(tree.body[0].test)]
        if all(checks):
            return TestPlan("value", source, tuple(checks))
    return _instrumented(source, tree)


def _conjuncts(test: ast.expr) -> list[ast.expr]:
    return test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]


def _instrumented(source: str, tree: ast.Module) -> TestPlan:
    """A statement test, with every `assert` whose conjuncts are all value checks (on the solution's output or a
    name bound to it) turned into reports compared here. Checks at the top level must report, so a forged
    completion without the values fails; a test with no such check stays a plain statement test."""
    if not any(isinstance(node, ast.Assert) for node in tree.body):  # none at the top level: nothing can report
        return TestPlan("statement", source)  # (HumanEval's `def check(...)` + call: the rewrite was its 0.3 ms)
    checks: list[ValueCheck] = []
    required: list[int] = []
    objects = frozenset(  # names the test binds to objects it constructs: their comparisons stay inside
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and _constructed(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    )

    class Rewrite(ast.NodeTransformer):
        depth = 0

        def generic_visit(self, node):
            nested = isinstance(node, ast.stmt) and not isinstance(node, ast.Module)
            self.depth += nested
            node = super().generic_visit(node)
            self.depth -= nested
            return node

        def visit_Assert(self, node: ast.Assert):
            found = [_value_check(c, names=objects or True) for c in _conjuncts(node.test)]
            if not all(found):
                return node
            calls = []
            for check, conjunct in zip(found, _conjuncts(node.test), strict=True):
                if self.depth == 0:
                    required.append(len(checks))
                expr = _checked_expr(conjunct)
                call = ast.Call(ast.Name("__azr_check__", ast.Load()), [ast.Constant(len(checks)), expr], [])
                calls.append(ast.copy_location(ast.Expr(call), node))
                checks.append(check)
            return calls

    rewritten = Rewrite().visit(tree)  # only unparsed, never compiled here: new nodes need no line numbers
    if not required:
        return TestPlan("statement", source)
    return TestPlan("statement", source, tuple(checks), ast.unparse(rewritten), tuple(required))


def _checked_expr(node: ast.expr) -> ast.expr:
    """The part of a value check evaluated inside: its output expression (without wrapper or literal)."""
    if isinstance(node, ast.Compare):
        found, _ = _literal(node.comparators[0])
        side = node.left if found else node.comparators[0]
    else:
        side = node.operand if isinstance(node, ast.UnaryOp) else node
    if isinstance(side, ast.Call) and isinstance(side.func, ast.Name) and side.func.id in _WRAPPERS:
        side = side.args[0]
    return side


def _value_check(node: ast.expr, names: bool | frozenset[str] = False) -> ValueCheck | None:
    if isinstance(node, ast.Compare):
        if len(node.ops) != 1 or type(node.ops[0]) not in _OPS:
            return None
        op = _OPS[type(node.ops[0])][0]
        for expr, literal, check in ((node.left, node.comparators[0], op), (node.comparators[0], node.left, None)):
            found, value = _literal(literal)
            if found and (not op.startswith("is") or value in (None, True, False)):
                output = _output(expr, names)
                return ValueCheck(output[0], check or _MIRROR[op], value, output[1]) if output else None
        return None
    negated = isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
    output = _output(node.operand if negated else node, names)  # type: ignore[attr-defined]
    return ValueCheck(output[0], "falsy" if negated else "truthy", None, output[1]) if output else None


def _output(node: ast.expr, names: bool | frozenset[str] = False) -> tuple[str, str] | None:
    """(expression, wrapper) when `node` is the solution's own output, possibly inside one container builtin;
    with `names`, a bare (non-builtin) name too: in a statement test it holds what the solution returned."""
    wrap = ""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _WRAPPERS:
        if len(node.args) != 1 or node.keywords:
            return None
        wrap, node = node.func.id, node.args[0]
    if _constructed(node) or (isinstance(node, ast.Name) and node.id in _objects_of(names)):
        return None  # an object the test built itself: comparing it is what the test checks, so it stays inside
    base = node
    while isinstance(base, (ast.Call, ast.Attribute)):
        base = base.func if isinstance(base, ast.Call) else base.value
    if (base is node and not names) or not isinstance(base, ast.Name) or base.id in _BUILTIN_NAMES:
        return None
    return ast.unparse(node), wrap


def _constructed(node: ast.expr) -> bool:
    """`Name(...)` with a capitalised name: by convention an instance of a class under test, whose own comparison
    methods (`__eq__`, `__lt__`, ...) the test means to exercise, not a plain value to compare outside."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id[:1].isupper()


def _objects_of(names: bool | frozenset[str]) -> frozenset[str]:
    return names if isinstance(names, frozenset) else frozenset()


def _literal(node: ast.expr) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None
