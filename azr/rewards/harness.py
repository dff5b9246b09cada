"""The harness: the program grading runs in the sandbox, how each test is planned, and how verdicts are read.

The harness (its sandbox side is `azr.rewards.runner`) loads the solution once, then runs every test in its own
forked copy of that state, and writes one nonce-tagged JSON line per test to descriptor 3. A test is a *value
test* when it is one `assert` whose conjuncts each compare the solution's own output with a literal (`f(x) == 3`,
`3 > obj.m(x)`, `f(x) is None`), or test its truth (`f(x)`, `not f(x)`), optionally through
list/tuple/sorted/set/frozenset. Only the expressions that produce the output enter the sandbox; their values come
back as typed plain data and are wrapped and compared here, with trusted builtins, so the expected values never
reach the program and its dunder methods or shadowed builtins cannot bend a comparison. Every other test is a
*statement test*, run inside the sandbox; its `assert`s of the same shapes (on the solution's output or a name
bound to it) are rewritten to report their values, which are compared here, and those at the top level must report.
Only the rest is decided inside (SPEC_FUNCTIONS.md says what a deliberate attack on the harness can still forge
there).
"""

from __future__ import annotations

import ast
import builtins
import functools
import json
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

from azr.data import decode_case
from azr.rewards.stdio import judge_output, output_cap

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
MAX_HASHED_ITEMS = 10_000

# The program sent for each solution: the harness's sandbox side (`azr.rewards.runner`), preloaded by the worker as
# this module or else compiled from its source, given the payload (solution, nonce, what each test sends) as data.
RUNNER_MODULE = "_azr_harness"
_PROGRAM = """try:
    import {module}
except ImportError:  # a pool that did not preload the harness
    import types
    {module} = types.ModuleType("{module}")
    exec(compile({source!r}, "<harness>", "exec"), {module}.__dict__)
{module}.run({payload!r})
"""
_PRELOADED_PROGRAM = """import {module}
{module}.run({payload!r})
"""


@functools.cache
def runner_source() -> str:
    """The source of `azr.rewards.runner`, as the sandbox runs it."""
    return (resources.files("azr.rewards") / "runner.py").read_text(encoding="utf-8")


def harness_preload() -> dict[str, str]:
    """What a pool preloads into its workers (`open_pool(preload=...)`) so that no program compiles the harness."""
    return {RUNNER_MODULE: runner_source()}


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
                _check_hashed_size(len(actual))
            actual = _WRAPPERS[self.wrap](actual)
        if _CHECKS[self.op](actual, self.expected):
            return None
        shown = f"{self.wrap}({self.expr})" if self.wrap else self.expr
        expected = "" if self.op in ("truthy", "falsy") else f" {self.expected!r}"
        return f"AssertionError: {shown} = {_short(actual)}, expected {self.op}{expected}"


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


def build_program(
    code: str,
    plans: Sequence[TestPlan],
    nonce: str,
    preloaded: bool = False,
    setup: str | None = None,
    case_s: float | None = None,
) -> str:
    """The harness with its payload: the solution, the nonce and what each test sends; no expected value.
    `preloaded`: for a pool whose workers preload `harness_preload()`, the program leaves out the harness's source
    (about 5 KB that every program would otherwise carry through the pipe and compile). `setup` runs after the
    solution loads; `case_s` (stdin/stdout tasks) is each case's time limit."""
    body: dict[str, Any] = {"code": code, "nonce": nonce, "tests": [[p.kind, p.sent()] for p in plans]}
    if setup:
        body["setup"] = setup
    if case_s is not None:
        body["case_s"] = case_s
    payload = json.dumps(body)
    if preloaded:
        return _PRELOADED_PROGRAM.format(module=RUNNER_MODULE, payload=payload)
    return _PROGRAM.format(module=RUNNER_MODULE, source=runner_source(), payload=payload)


def preloads_harness(pool_preload: Mapping[str, str]) -> bool:
    """Whether a pool's `preload` holds this harness (so its programs may leave the source out)."""
    return pool_preload.get(RUNNER_MODULE) == runner_source()


def read_verdicts(report: str, nonce: str, plans: Sequence[TestPlan]) -> list[str | None]:
    """Per test: None when it passed, else why not. Lines without the nonce are ignored; a test with more than
    one verdict fails (something other than the harness wrote one)."""
    seen: dict[int, list] = {}
    load_error = None
    for line in report.splitlines():
        try:  # the program can write anything here: deep nesting (RecursionError), wrong shapes, huge lines
            tag, index, kind, payload = json.loads(line)
        except Exception:
            continue
        if tag != nonce or not isinstance(index, int):
            continue
        if index == -1 and kind == "load_error":
            load_error = str(payload)
        elif 0 <= index < len(plans):
            seen.setdefault(index, []).append((kind, payload))
    verdicts: list[str | None] = []
    for index, plan in enumerate(plans):
        got = seen.get(index)
        if load_error is not None:
            verdicts.append(f"solution failed to load: {load_error}")
        elif not got:
            verdicts.append("no verdict: the program ended or was stopped before this test finished")
        elif len(got) > 1:
            verdicts.append("more than one verdict for this test: forged")
        else:
            verdicts.append(_judge(plan, *got[0]))
    return verdicts


def _judge(plan: TestPlan, kind: str, payload: Any) -> str | None:
    if kind == "error":
        return str(payload)
    if plan.kind == "stdio":
        case = decode_case(plan.source)
        return judge_output(case, payload) if kind == "stdout" and case else f"unexpected verdict {kind!r}"
    if plan.kind == "statement":
        return _judge_statement(plan, payload) if kind == "ok" else f"unexpected verdict {kind!r}"
    if kind != "value" or not isinstance(payload, list) or len(payload) != len(plan.checks):
        return f"unexpected verdict {kind!r}"
    try:
        for check, encoded in zip(plan.checks, payload, strict=True):
            failure = check.judge(decode_value(encoded))
            if failure:
                return failure
    except Exception as exc:  # a malformed value or an impossible comparison fails this test, nothing else
        return f"{type(exc).__name__}: {exc}"[:500]
    return None


def _judge_statement(plan: TestPlan, payload: Any) -> str | None:
    """A statement test completed; its reported check values must each pass, and every top-level check report."""
    if not plan.checks:
        return None
    if not isinstance(payload, list):
        return "a statement test with checks reported no values: forged"
    seen = set()
    try:
        for site, encoded in payload:
            failure = plan.checks[site].judge(decode_value(encoded))
            if failure:
                return failure
            seen.add(site)
    except Exception as exc:  # a malformed report or an impossible comparison fails this test, nothing else
        return f"{type(exc).__name__}: {exc}"[:500]
    missing = [site for site in plan.required if site not in seen]
    return f"check {missing[0]} never reported a value: forged or skipped" if missing else None


def decode_value(encoded: Any) -> Any:
    """Plain data from the harness's typed encoding; raises (ValueError, TypeError, IndexError) on anything else."""
    if not isinstance(encoded, list) or not encoded or not isinstance(encoded[0], str):
        raise ValueError(f"malformed value {encoded!r:.80}")
    kind, rest = encoded[0], encoded[1:]
    simple = {"N": lambda: None, "b": lambda: bool(rest[0]), "i": lambda: int(rest[0], 16)}
    simple |= {"f": lambda: float(rest[0]), "s": lambda: str(rest[0]), "y": lambda: bytes.fromhex(rest[0])}
    simple |= {"c": lambda: complex(float(rest[0][0]), float(rest[0][1]))}
    if kind in simple:
        return simple[kind]()
    containers = {"l": list, "t": tuple, "S": set, "F": frozenset}
    if kind in ("S", "F", "d"):
        _check_hashed_size(len(rest[0]))
    if kind in containers:
        return containers[kind](decode_value(x) for x in rest[0])
    if kind == "d":
        return {decode_value(k): decode_value(v) for k, v in rest[0]}
    raise ValueError(f"unknown value kind {kind!r}")


def _check_hashed_size(n: int) -> None:
    """Python's int hashes are not randomised: a program could send a set of colliding ints that takes the trainer
    quadratic time to build. Hashed containers from the sandbox are capped (far above what tests compare)."""
    if n > MAX_HASHED_ITEMS:
        raise ValueError(f"{n} items in a set or dict is more than the {MAX_HASHED_ITEMS} that are compared")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."
