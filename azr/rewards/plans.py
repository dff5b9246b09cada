"""Test plans: how each test is judged. A test is a *value test* when it is one `assert` whose conjuncts each compare
the solution's own output with a literal (`f(x) == 3`, `3 > obj.m(x)`, `f(x) is None`), or test its truth (`f(x)`,
`not f(x)`), optionally through list/tuple/sorted/set/frozenset: only the expressions that produce the output enter
the sandbox, and their values are compared here (`ValueCheck.judge`), with trusted builtins, so the expected values
never reach the program and its dunder methods or shadowed builtins cannot bend a comparison. Every other test is a
*statement test*, run inside; its `assert`s of the same shapes (on the solution's output or a name bound to it) are
rewritten to report their values, compared here, and those at the top level must report. A call case is a value
test whose expected value came from JSON (compared as JSON compares: `values.same`). One test of a pytest- or
unittest-style module is a *module test*: the module, rewritten the same way (and unittest's `self.assertEqual(OUT,
LITERAL)`-style calls too), runs in the sandbox and calls that one test; the checks directly in its body must report.
Which plan a test gets is decided by its kind (`azr.data.Test`) through `PLANNERS`, the one place a new kind is
added on this side; the task's float tolerance comes with it (a test's own wins).
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import functools
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from azr.data import AssertTest, CallCase, ModuleTest, StdioCase, Test
from azr.rewards import twins
from azr.rewards.stdio import output_cap
from azr.rewards.values import Opaque, check_hashed_size, same, short_repr

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
_CHECKS["json"] = lambda value, expected: same(value, expected, json=True)  # a call case: JSON's equality
_CHECKS["pair=="] = lambda pair, _: _pair(pair, True)  # a module test's `assert A == B`: both sides sent back
_CHECKS["pair!="] = lambda pair, _: _pair(pair, False)


def _pair(pair: Any, equal: bool) -> bool:
    """`A == B` (or `!=`) of a module test, from (A, B, what the comparison gave inside). Plain data on both sides
    is compared here; an object of the program's own class (at any depth) against plain data fails (that is how an
    always-equal object forges a pass); where both sides hold such objects, the answer they gave inside stands."""
    left, right, inside = pair
    opaque = _has_opaque(left), _has_opaque(right)
    if all(opaque):
        return inside is True  # what `A == B` (or `A != B`) gave inside
    if any(opaque):
        return not equal  # such an object equals no plain data here, as an object without its own __eq__
    return same(left, right) is equal


def _has_opaque(value: Any, depth: int = 0) -> bool:
    if isinstance(value, Opaque):
        return True
    if depth > 64:
        return False
    if isinstance(value, dict):
        return any(_has_opaque(k, depth + 1) or _has_opaque(v, depth + 1) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_has_opaque(v, depth + 1) for v in value)
    return False


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
    atol: float | None = None  # floats (at any depth) of an `==`, `!=` or `json` check may differ by this much
    rtol: float | None = None  # ... or by this fraction of the expected value

    def judge(self, actual: Any) -> str | None:
        if self.wrap:
            if self.wrap in ("set", "frozenset"):
                check_hashed_size(len(actual))
            actual = _WRAPPERS[self.wrap](actual)
        if self._holds(actual):
            return None
        if self.op.startswith("pair"):
            left, right = (short_repr(v) for v in actual[:2])
            return f"AssertionError: {self.expr}: {left} {self.op[4:]} {right} is false"
        shown = f"{self.wrap}({self.expr})" if self.wrap else self.expr
        expected = "" if self.op in ("truthy", "falsy") else f" {self.expected!r}"
        why = f"AssertionError: {shown} = {short_repr(actual)}, expected {self.op}{expected}"
        if isinstance(actual, Opaque) and actual.own_eq and self.op in ("==", "!="):
            why += f" (a {actual.type_name} is compared here as itself, never by its own __eq__: return plain data)"
        return why

    def _holds(self, actual: Any) -> bool:
        tolerant = self.atol is not None or self.rtol is not None
        if self.op == "json" or (tolerant and self.op in ("==", "!=")):
            equal = same(actual, self.expected, self.atol, self.rtol, json=self.op == "json")
            return equal if self.op != "!=" else not equal
        return bool(_CHECKS[self.op](actual, self.expected))


@dataclass(frozen=True)
class TestPlan:
    """How one test is judged: a statement run in the sandbox, value checks decided here, or a stdin/stdout case
    whose output is compared here (`azr.rewards.stdio`). `origin` is the test it was planned from (provenance:
    left out of equality), so a reader of verdicts has the test itself, never a string to parse."""

    __test__ = False  # not a pytest test class

    kind: Literal["value", "statement", "stdio", "pytest", "unittest", "none"]
    source: str
    checks: tuple[ValueCheck, ...] = ()
    program: str = ""  # statement tests with checks: the source with each checked `assert` turned into a report
    required: tuple[int, ...] = ()  # checks at the top level of a statement test: each must report a value
    test: str = ""  # a module test: which test of the module (`test_f`, `TestC::test_m`, `Case.test_m`)
    case: int | None = None  # ... and which parametrized case (None: all of them)
    shared: bool = False  # ... run in the solution's own namespace, as one module with it (BigCodeBench)
    names: tuple[tuple[str, tuple[str, ...]], ...] = ()  # ... modules it imports from that may be the solution's
    twin: bool = False  # ... and whether its twin has something to say: a pure side, a loop's or cases' count
    origin: Test | None = field(default=None, compare=False)

    @property
    def stdio(self) -> StdioCase | None:
        """The stdin/stdout case of a `stdio` plan: its input goes in, its output stays here."""
        return self.origin if isinstance(self.origin, StdioCase) else None

    def sent(self) -> Any:
        """All the sandbox is told about this test."""
        if self.kind == "none":
            return None
        if self.kind == "value":
            return [[c.expr, c.wrap] for c in self.checks]
        if self.kind == "stdio":
            assert self.stdio is not None
            return [self.stdio.input, output_cap(self.stdio)]
        if self.kind in ("pytest", "unittest"):
            sent = [self.program, self.test, self.case, [c.wrap for c in self.checks]]
            options = {"shared": True} if self.shared else {}
            options |= {"names": [[m, list(symbols)] for m, symbols in self.names]} if self.names else {}
            options |= {"twin": True} if self.twin else {}
            return [*sent, options] if options else sent
        return [self.program or self.source, [c.wrap for c in self.checks]]


@functools.lru_cache(maxsize=1 << 16)  # a step grades every completion of a group against the same tests
def plan_test(test: Test, atol: float | None = None, rtol: float | None = None) -> TestPlan:
    """The plan of one test, by its kind (`PLANNERS`); `atol`/`rtol` are the task's float tolerance."""
    try:
        return dataclasses.replace(PLANNERS[test.kind](test, atol, rtol), origin=test)
    except (KeyError, TypeError, ValueError, AttributeError, SyntaxError, RecursionError, MemoryError):
        return TestPlan("none", "", origin=test)  # malformed: nothing can be judged, so never a pass


def plan_assert(source: str) -> TestPlan:
    """A value test when every conjunct of a single `assert` is a value check (see the module docstring)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return TestPlan("statement", source)
    if len(tree.body) == 1 and isinstance(tree.body[0], ast.Assert):
        checks = [_value_check(node) for node in _conjuncts(tree.body[0].test)]
        if all(checks):
            return TestPlan("value", source, tuple(checks))
    return _instrumented(source, tree)


def _plan_assert(test: AssertTest, atol: float | None, rtol: float | None) -> TestPlan:
    """An assert test; with a float tolerance (its own, else the task's), its value checks compare within it."""
    tol = {"atol": test.atol if test.atol is not None else atol, "rtol": test.rtol if test.rtol is not None else rtol}
    try:
        plan = plan_assert(test.source)
    except (ValueError, RecursionError, MemoryError):  # a literal too long to print, nesting too deep to walk
        return TestPlan("statement", test.source)  # run as written: the sandbox's Python judges it
    if tol["atol"] is None and tol["rtol"] is None:
        return plan
    return dataclasses.replace(plan, checks=tuple(dataclasses.replace(c, **tol) for c in plan.checks))


def _plan_call(test: CallCase, atol: float | None, rtol: float | None) -> TestPlan:
    own_atol, own_rtol = (test.atol if test.atol is not None else atol), (test.rtol if test.rtol is not None else rtol)
    check = ValueCheck(test.expression(), "json", test.output, atol=own_atol, rtol=own_rtol)
    return TestPlan("value", check.expr, (check,))


def _plan_stdio(test: StdioCase, atol: float | None, rtol: float | None) -> TestPlan:
    return TestPlan("stdio", "", origin=test)


def _plan_module(test: ModuleTest, atol: float | None, rtol: float | None) -> TestPlan:
    """One test of a module; a module that collected none is planned as `none` (its verdict: no tests ran)."""
    if test.test is None:
        return TestPlan("none", "")
    module = instrumented_module(test.module, test.style == "unittest")
    return TestPlan(
        test.style,
        "",
        module.checks,
        module.program,
        module.required.get(test.test, ()),
        test=test.test,
        case=test.case,
        shared=test.shared,
        names=test.names,
        twin=test.test in module.twinned,
    )


PLANNERS: dict[str, Callable[[Any, float | None, float | None], TestPlan]] = {  # a test's kind -> its planner
    "assert": _plan_assert,
    "call": _plan_call,
    "stdio": _plan_stdio,
    "pytest": _plan_module,
    "unittest": _plan_module,
}


@dataclass(frozen=True)
class _Module:
    program: str
    checks: tuple[ValueCheck, ...]
    required: dict[str, tuple[int, ...]]  # test name -> the checks directly in its body
    twinned: frozenset[str] = frozenset()  # tests whose twin has something to say (`azr.rewards.twins`)


_ASSERT_METHODS = {  # unittest's self.assertX(OUT, ...) calls that become value checks: name -> (op, arguments)
    "assertEqual": ("==", 2),
    "assertEquals": ("==", 2),
    "assertNotEqual": ("!=", 2),
    "assertTrue": ("truthy", 1),
    "assertFalse": ("falsy", 1),
    "assertIsNone": ("is", 1),
    "assertIsNotNone": ("is not", 1),
}


@functools.lru_cache(maxsize=1024)
def instrumented_module(source: str, unittest: bool = False) -> _Module:
    """A test module with its value-check asserts (and, for unittest, `self.assertEqual(OUT, LITERAL)`-style calls)
    turned into reports compared outside, and for each test function or method the checks directly in its body.
    Each report also tells the twin (`azr.rewards.twins`) whether its site is countable and which sides are pure:
    `__azr_check__(k, OUT[, CTL])` and `__azr_pair__(k, lambda: A, lambda: B, EQ, CTL, DEPS_A, DEPS_B)`."""
    tree = ast.parse(source)
    owner: dict[int, str] = {}  # id of a statement directly in a test's body -> that test's name
    module_scope = twins.module_scope(tree)
    scopes: dict[int, twins.Scope] = {}  # id of a test function -> its bindings
    tests: dict[int, str] = {}  # id of a test function -> its name
    twinned: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            owner |= {id(stmt): node.name for stmt in node.body}
            scopes[id(node)] = twins.function_scope(node, module_scope, False)
            tests[id(node)] = node.name
            if twins.runs_computed_cases(node):
                twinned.add(node.name)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    sep = "." if unittest else "::"
                    owner |= {id(stmt): f"{node.name}{sep}{item.name}" for stmt in item.body}
                    static = any(_decorator_name(d) == "staticmethod" for d in item.decorator_list)
                    scopes[id(item)] = twins.function_scope(item, module_scope, not static)
                    tests[id(item)] = f"{node.name}{sep}{item.name}"
                    if twins.runs_computed_cases(item):
                        twinned.add(tests[id(item)])
    objects = frozenset(  # names the module binds to objects it constructs: their comparisons stay inside
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and _constructed(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    )
    checks: list[ValueCheck] = []
    required: dict[str, list[int]] = {}

    class Rewrite(ast.NodeTransformer):
        def __init__(self):
            self.stack: list[ast.AST] = []  # the statements (and functions) enclosing the node being visited

        def visit(self, node):
            self.stack.append(node)
            try:
                return super().visit(node)
            finally:
                self.stack.pop()

        def test(self) -> str | None:
            """The name of the test whose body holds the node being visited (not inside a nested function)."""
            functions = [n for n in self.stack[:-1] if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            return tests.get(id(functions[-1])) if functions else None

        def site(self) -> tuple[twins.Scope | None, frozenset[str] | None]:
            """The test function's bindings, and the names the `for` loops around this site iterate over when the
            site runs once per loop pass of a call of its test (else None: not countable)."""
            chain = self.stack[:-1]
            functions = [i for i, n in enumerate(chain) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            if not functions or id(chain[functions[-1]]) not in scopes:
                return None, None
            scope = scopes[id(chain[functions[-1]])]
            if scope.exits:
                return scope, None
            ctl: set[str] = set()
            for node in chain[functions[-1] + 1 :]:
                if not isinstance(node, ast.For):
                    return scope, None
                names = twins.pure_names(node.iter, scope)
                if names is None:
                    return scope, None
                ctl |= names
            return scope, frozenset(ctl)

        def report(self, node: ast.stmt, found: list[ValueCheck], exprs: list[ast.expr]) -> list[ast.stmt]:
            _, ctl = self.site()
            if ctl is not None and any(isinstance(n, ast.For) for n in self.stack[:-1]):
                twinned.add(self.test() or "")  # how often a loop's check runs is the twin's to say
            calls = []
            for check, expr in zip(found, exprs, strict=True):
                args = [expr] + ([_names(ctl)] if ctl is not None else [])
                calls.append(ast.copy_location(ast.Expr(self.mark(node, check, "__azr_check__", args)), node))
            return calls

        def pair(self, node: ast.stmt, check: ValueCheck, legacy: ast.expr, sides: tuple[ast.expr, ...]):
            scope, ctl = self.site()
            if scope is None or any(isinstance(n, _NOT_IN_LAMBDA) for s in sides for n in ast.walk(s)):
                return [ast.copy_location(ast.Expr(self.mark(node, check, "__azr_check__", [legacy])), node)]
            pure = [twins.pure_names(side, scope) for side in sides]
            deps = [_names(names) for names in pure]
            if ctl is not None and any(names is not None for names in pure):
                twinned.add(self.test() or "")  # a pure side: the twin computes it
            thunks = [ast.Lambda(_NO_ARGS, side) for side in sides]
            eq = ast.Constant(check.op == "pair==")
            args = [*thunks, eq, _names(ctl), *deps]
            return [ast.copy_location(ast.Expr(self.mark(node, check, "__azr_pair__", args)), node)]

        def mark(self, node: ast.stmt, check: ValueCheck, name: str, args: list[ast.expr]) -> ast.Call:
            if id(node) in owner:
                required.setdefault(owner[id(node)], []).append(len(checks))
            args = [ast.Constant(len(checks)), *args]
            checks.append(check)
            return ast.Call(ast.Name(name, ast.Load()), args, [])

        def visit_Assert(self, node: ast.Assert):
            found = [_value_check(c, names=objects or True) for c in _conjuncts(node.test)]
            if not all(found):
                pair = _pair_check(node.test)
                return self.pair(node, *pair) if pair else node
            return self.report(node, found, [_checked_expr(c) for c in _conjuncts(node.test)])  # type: ignore[arg-type]

        def visit_Expr(self, node: ast.Expr):
            found = _assert_method(node.value, objects or True) if unittest else None
            if found is None:
                return node
            return self.pair(node, *found) if len(found) == 3 else self.report(node, [found[0]], [found[1]])

    program = ast.unparse(Rewrite().visit(tree))
    return _Module(program, tuple(checks), {k: tuple(v) for k, v in required.items()}, frozenset(twinned))


_NOT_IN_LAMBDA = (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)  # what a side cannot keep inside a lambda
_NO_ARGS = ast.arguments([], [], None, [], [], None, [])


def _names(names: frozenset[str] | None) -> ast.expr:
    """A constant the program carries for the twin: a tuple of names, or None."""
    return ast.Constant(None if names is None else tuple(sorted(names)))


def _decorator_name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")


def _pair_check(test: ast.expr) -> tuple[ValueCheck, ast.expr, tuple[ast.expr, ast.expr]] | None:
    """`assert A == B` (or `!=`) of two expressions, neither an `approx(...)` (whose own comparison is the test):
    sent back as (A, B, A == B) and compared here (`_pair`). Also returns the two sides."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq))):
        return None
    sides = (test.left, test.comparators[0])
    if any(isinstance(s, ast.Call) and ast.unparse(s.func).split(".")[-1] == "approx" for s in sides):
        return None
    op = "pair==" if isinstance(test.ops[0], ast.Eq) else "pair!="
    inside = ast.Compare(ast.Name("__azr_a__", ast.Load()), [test.ops[0]], [ast.Name("__azr_b__", ast.Load())])
    pair = ast.Call(  # (lambda __azr_a__, __azr_b__: (__azr_a__, __azr_b__, __azr_a__ OP __azr_b__))(A, B)
        ast.Lambda(
            ast.arguments([], [ast.arg("__azr_a__"), ast.arg("__azr_b__")], None, [], [], None, []),
            ast.Tuple([ast.Name("__azr_a__", ast.Load()), ast.Name("__azr_b__", ast.Load()), inside], ast.Load()),
        ),
        list(sides),
        [],
    )
    return ValueCheck(ast.unparse(test), op), pair, sides


def _assert_method(node: ast.expr, names: bool | frozenset[str]) -> tuple[Any, ...] | None:
    """`self.assertEqual(OUT, LITERAL)` (either order), `self.assertTrue(OUT)`, ... as a value check."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    if not (isinstance(node.func.value, ast.Name) and node.func.value.id == "self"):
        return None
    spec = _ASSERT_METHODS.get(node.func.attr)
    if spec is None or node.keywords or len(node.args) < spec[1] or len(node.args) > spec[1] + 1:
        return None
    op, count = spec
    if count == 1:
        output = _output(node.args[0], names)
        if output is None:
            return None
        return ValueCheck(output[0], op, None, output[1]), _checked_expr(node.args[0])
    compare = ast.Compare(node.args[0], [ast.Eq() if op == "==" else ast.NotEq()], [node.args[1]])
    check = _value_check(compare, names=names)
    return (check, _checked_expr(compare)) if check else _pair_check(compare)


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
