"""Grading: build the program from a task and a completion, run it in the sandbox, and decide each test's verdict.

The harness loads the solution once, then runs every test in its own forked copy of that state, so a failing or
crashing test does not stop the others (partial credit) and nothing leaks between tests. A test passes only on a
verdict the harness wrote after the test completed, on the report channel, tagged with a per-run nonce; exit codes
and printed text are never read as verdicts.

Tests of the form `assert CALL <op> LITERAL` (==, !=, <, <=, >, >=, `is` None/True/False) or `assert [not] CALL`,
where CALL is a direct call of the solution's code with literal arguments, are *value tests*: only CALL enters the
sandbox, its value comes back as typed plain data, and the comparison with the literal happens here. Their
expected values never reach the program, so nothing it does inside the sandbox can forge a pass. Other tests are
*statement tests*, decided by the harness inside the sandbox; SPEC_FUNCTIONS.md lists what a program that
deliberately attacks the harness could still forge there.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import json
import operator
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from azr.config import SandboxConfig
from azr.data import Task
from azr.sandbox import ExecResult, Limits, SandboxPool, open_pool, shared_pool
from azr.sandbox.doctor import Check

Status = Literal["passed", "failed", "timeout", "memory", "crashed", "error"]

_OPS: dict[type, tuple[str, Any]] = {
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
_CHECKS = {name: fn for name, fn in _OPS.values()}
_CHECKS["truthy"] = lambda value, _: bool(value)
_CHECKS["falsy"] = lambda value, _: not value
_BUILTIN_NAMES = frozenset(dir(builtins))

# The program run in the sandbox. Payload: solution source, nonce, and per test either an expression to evaluate
# ("value") or a statement to run ("statement"). Writes one JSON line per verdict to descriptor 3.
_HARNESS = r"""
import json as _json, os as _os, sys as _sys
_P = _json.loads(__PAYLOAD__)
_fork, _write, _exit, _wait = _os.fork, _os.write, _os._exit, _os.waitpid
_dumps, _flush = _json.dumps, _sys.stdout.flush

def _report(index, kind, payload):
    _write(3, (_dumps([_P["nonce"], index, kind, payload]) + "\n").encode())

def _encode(v, depth=0):
    if depth > 64:
        raise ValueError("value nested too deeply to compare")
    if v is None:
        return ["N"]
    if isinstance(v, bool):
        return ["b", v is True]
    if isinstance(v, int):
        return ["i", int.__format__(v, "x")]
    if isinstance(v, float):
        return ["f", float.__repr__(v)]
    if isinstance(v, complex):
        return ["c", [float.__repr__(complex.real.__get__(v)), float.__repr__(complex.imag.__get__(v))]]
    if isinstance(v, str):
        return ["s", str.__str__(v)]
    if isinstance(v, (bytes, bytearray)):
        return ["y", bytes(v).hex()]
    for kind, base in (("l", list), ("t", tuple), ("S", set), ("F", frozenset)):
        if isinstance(v, base):
            return [kind, [_encode(x, depth + 1) for x in base.__iter__(v)]]
    if isinstance(v, dict):
        return ["d", [[_encode(k, depth + 1), _encode(x, depth + 1)] for k, x in dict.items(v)]]
    raise TypeError("a %s cannot be compared outside the sandbox; return plain data" % type(v).__name__)

_ns = {"__name__": "__main__", "__builtins__": __builtins__}
try:
    exec(compile(_P["code"], "<solution>", "exec"), _ns)
except BaseException as _e:
    _report(-1, "load_error", ("%s: %s" % (type(_e).__name__, _e))[:500])
    _exit(0)
for _i, _t in enumerate(_P["tests"]):
    try:
        _flush()
    except BaseException:
        pass
    _pid = _fork()
    if _pid == 0:
        try:
            if _t[0] == "value":
                _out = ("value", _encode(eval(compile(_t[1], "<test %d>" % _i, "eval"), _ns)))
            else:
                exec(compile(_t[1], "<test %d>" % _i, "exec"), _ns)
                _out = ("ok", None)
        except BaseException as _e:
            _out = ("error", ("%s: %s" % (type(_e).__name__, _e))[:500])
        _report(_i, *_out)
        try:
            _flush()
        except BaseException:
            pass
        _exit(0)
    _wait(_pid, 0)
_exit(0)
"""


@dataclass(frozen=True)
class TestPlan:
    """How one test is judged: `sent` is all the sandbox sees of it; `check`/`expected` stay outside."""

    kind: Literal["value", "statement"]
    sent: str
    check: str = ""
    expected: Any = None


@dataclass
class Grade:
    """Outcome of one program. `status` is `passed` only when the harness saw every test pass."""

    status: Status
    tests_passed: int
    tests_total: int
    failures: list[str] = field(default_factory=list)  # "test 2: AssertionError: ..." per failed test
    duration_s: float = 0.0
    stdout: str = ""
    stderr: str = ""
    backend: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def fraction(self) -> float:
        return self.tests_passed / self.tests_total if self.tests_total else 0.0


def plan_test(source: str) -> TestPlan:
    """A value test when `source` is one `assert` that compares a direct call with a literal (or tests the call's
    truth); a statement test otherwise.

    "Direct call" means `f(literals)`, `obj.m(literals)` or `Cls(literals).m(literals)` on names the solution
    defines: then the value is the program's own output, and the comparison outside the sandbox cannot be bent by
    the program's dunder methods or by shadowed builtins (as `abs(f(x) - 1.0) < tol` or `sorted(f(x)) == [...]`
    could be, so those stay statement tests)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return TestPlan("statement", source)
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert):
        return TestPlan("statement", source)
    test = tree.body[0].test
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _OPS:
        op = _OPS[type(test.ops[0])][0]
        for expr, literal, check in ((test.left, test.comparators[0], op), (test.comparators[0], test.left, None)):
            found, value = _literal(literal)
            if found and _direct_call(expr) and (not op.startswith("is") or value in (None, True, False)):
                return TestPlan("value", ast.unparse(expr), check or _MIRROR[op], value)
        return TestPlan("statement", source)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and _direct_call(test.operand):
        return TestPlan("value", ast.unparse(test.operand), "falsy")
    if _direct_call(test):
        return TestPlan("value", ast.unparse(test), "truthy")
    return TestPlan("statement", source)


def _direct_call(node: ast.expr) -> bool:
    if not isinstance(node, ast.Call):
        return False
    if not all(_literal(a)[0] for a in node.args) or not all(k.arg and _literal(k.value)[0] for k in node.keywords):
        return False
    func = node.func
    while isinstance(func, ast.Attribute):
        func = func.value
    if isinstance(func, ast.Call):
        return _direct_call(func)
    return isinstance(func, ast.Name) and func.id not in _BUILTIN_NAMES


def _literal(node: ast.expr) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def build_program(code: str, plans: Sequence[TestPlan], nonce: str) -> str:
    """The harness with its payload: the solution, the nonce and what each test sends; no expected value."""
    payload = {"code": code, "nonce": nonce, "tests": [[p.kind, p.sent] for p in plans]}
    return _HARNESS.replace("__PAYLOAD__", repr(json.dumps(payload)))


def read_verdicts(report: str, nonce: str, plans: Sequence[TestPlan]) -> list[str | None]:
    """Per test: None when it passed, else why not. Lines without the nonce are ignored; a test with more than
    one verdict fails (something other than the harness wrote one)."""
    seen: dict[int, list] = {}
    load_error = None
    for line in report.splitlines():
        try:
            tag, index, kind, payload = json.loads(line)
        except (ValueError, TypeError):
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
    if plan.kind == "statement":
        return None if kind == "ok" else f"unexpected verdict {kind!r}"
    if kind != "value":
        return f"unexpected verdict {kind!r}"
    try:
        actual = decode_value(payload)
        ok = _CHECKS[plan.check](actual, plan.expected)
    except Exception as exc:  # a malformed value or an impossible comparison fails this test, nothing else
        return f"{type(exc).__name__}: {exc}"[:500]
    return None if ok else f"AssertionError: {plan.sent} = {_short(actual)}, expected {plan.check} {plan.expected!r}"


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
    if kind in containers:
        return containers[kind](decode_value(x) for x in rest[0])
    if kind == "d":
        return {decode_value(k): decode_value(v) for k, v in rest[0]}
    raise ValueError(f"unknown value kind {kind!r}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def task_limits(task: Task, base: Limits) -> Limits:
    """`base`, with the task's own timeout and memory where it sets them."""
    return dataclasses.replace(base, wall_s=task.timeout_s or base.wall_s, memory_mb=task.memory_mb or base.memory_mb)


def limits_from_config(cfg: SandboxConfig) -> Limits:
    return Limits(
        wall_s=cfg.timeout_s,
        memory_mb=cfg.memory_mb,
        output_bytes=cfg.max_output_kb * 1024,
        file_size_mb=cfg.file_size_mb,
        open_files=cfg.open_files,
        processes=cfg.processes,
    )


def pool_from_config(cfg: SandboxConfig) -> SandboxPool:
    """The process-wide pool for these sandbox settings (started lazily, closed at exit)."""
    return shared_pool(cfg.backend, cfg.workers, cfg.tmp_size_mb, cfg.processes)


def grade_many(
    pairs: Sequence[tuple[Task, str]], pool: SandboxPool | None = None, limits: Limits | None = None
) -> list[Grade]:
    """Grade (task, code) pairs in parallel over the pool, keeping order; each task's own limits apply."""
    pool = pool or shared_pool()
    base = limits or Limits()
    jobs = []
    for task, code in pairs:
        plans = [plan_test(t) for t in task.tests]
        nonce = secrets.token_hex(16)
        jobs.append((plans, nonce, build_program(code, plans, nonce), task_limits(task, base)))
    results = pool.map([job[2] for job in jobs], [job[3] for job in jobs])
    return [_grade(plans, nonce, result) for (plans, nonce, _, _), result in zip(jobs, results, strict=True)]


def grade(task: Task, code: str, pool: SandboxPool | None = None, limits: Limits | None = None) -> Grade:
    """Run `task`'s tests against `code` in the sandbox."""
    return grade_many([(task, code)], pool, limits)[0]


def _grade(plans: Sequence[TestPlan], nonce: str, result: ExecResult) -> Grade:
    verdicts = read_verdicts(result.report, nonce, plans)
    failures = [f"test {i}: {why}" for i, why in enumerate(verdicts) if why is not None]
    passed = len(plans) - len(failures)
    if passed == len(plans):
        status: Status = "passed"
    elif result.status == "ok":
        missing = any(why and why.startswith("no verdict") for why in verdicts)
        memory = any(why and "MemoryError" in why for why in verdicts)
        status = "memory" if memory else "crashed" if missing else "failed"
    else:
        status = result.status  # timeout / memory / crashed / error
    if result.note:
        failures.append(result.note)
    return Grade(status, passed, len(plans), failures, result.duration_s, result.stdout, result.stderr, result.backend)


_FORGERIES = {
    "os._exit(0) at load": "import os\nos._exit(0)",
    "exit(0) at load": "exit(0)",
    "os._exit(0) inside the function": "def f(x):\n    import os\n    os._exit(0)",
    "SystemExit inside the function": "def f(x):\n    raise SystemExit(0)",
    "closed stdout": "import os\nos.close(1)\ndef f(x):\n    return 0",
    "atexit hook": "import atexit, sys\natexit.register(lambda: print('passed'))\ndef f(x):\n    sys.exit(0)",
    "always-equal object": "class A:\n    def __eq__(self, other):\n        return True\ndef f(x):\n    return A()",
}


def verdict_check(pool: SandboxPool) -> Check:
    """Doctor row: none of the known ways to fake a pass gets a test passed."""
    task = Task("doctor", "", ["assert f(1) == 2", "assert f(2) == 3"])
    grades = grade_many([(task, code) for code in _FORGERIES.values()], pool, Limits(wall_s=5.0))
    forged = [name for name, g in zip(_FORGERIES, grades, strict=True) if g.tests_passed]
    return Check("verdicts cannot be forged", not forged, f"forged: {', '.join(forged)}" if forged else "7 tricks")


def run_program(code: str, tests: Sequence[str], cfg: SandboxConfig) -> dict[str, Any]:
    """`azr sandbox run`: one program, with or without tests, as the JSON contract's object."""
    limits = limits_from_config(cfg)
    with open_pool(cfg.backend, cfg.workers, cfg.tmp_size_mb, cfg.processes) as pool:
        if tests:
            g = grade(Task("cli", "", list(tests)), code, pool, limits)
            status = "ok" if g.passed else g.status
            fields = (g.passed, g.tests_passed, g.tests_total, g.stdout, g.stderr, g.duration_s, g.backend)
        else:
            r = pool.run(code, limits)
            status = "failed" if r.status == "ok" and r.exit_code != 0 else r.status
            fields = (status == "ok", 0, 0, r.stdout, r.stderr, r.duration_s, r.backend)
    keys = ("passed", "tests_passed", "tests_total", "stdout", "stderr", "duration_s", "backend")
    return {"status": status, **dict(zip(keys, fields, strict=True))}


def validate_references(
    tasks: Sequence[Task], pool: SandboxPool | None = None, limits: Limits | None = None
) -> list[tuple[Task, Grade | None]]:
    """Grade each task's reference solution against its own tests; None where a task has no solution."""
    with_solution = [t for t in tasks if t.solution is not None]
    grades = iter(grade_many([(t, t.solution) for t in with_solution], pool, limits))
    return [(t, next(grades) if t.solution is not None else None) for t in tasks]
