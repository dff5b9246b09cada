"""The harness's sandbox side: the code that loads a solution and runs its tests inside the sandbox.

Standard library only, and never run by azr itself: `azr.rewards.harness` ships this file's source into the
sandbox, where pools that grading opens preload it into every worker (compiled once, not once per program) and a
program on any other pool compiles it itself. `run(payload)` loads the solution once into a namespace of its own,
then runs each test in a forked copy of that state (the last one in the process itself: nothing runs after it), and
writes one nonce-tagged JSON line per test to descriptor 3. A task's setup code runs once, after the solution
loads and before the first fork. A stdin/stdout task is run differently: the solution is never loaded here; each
case runs it afresh in a child process of its own, its input on stdin and its stdout in an unnamed file that this
process reads back and reports once the child and everything it started are gone (killed at the case's time
limit); this process is then not dumpable and a subreaper, so no case reaches its descriptor 3 or outlives it. A program
with module tests is run in the same spirit: before the solution loads, this process forks a twin that runs each
module test without it and holds descriptor 3, and keeps only a pipe to the twin (see "Twins" below).
What it binds at import (os and json functions, `list`, `iter`, `isinstance`, `bool`, `type`) is bound before any
solution runs. Values go out as typed plain data (`_encode`); what a value that is not plain data is read as only
decides which value is rebuilt outside, never how it compares there (SPEC_FUNCTIONS.md section 5).
"""

import contextlib as _contextlib
import json as _json
import os as _os
import select as _select
import signal as _signal
import sys as _sys
import time as _time

_fork, _write, _exit, _wait = _os.fork, _os.write, _os._exit, _os.waitpid
_dumps, _loads, _list, _iter, _isinstance = _json.dumps, _json.loads, list, iter, isinstance
_BaseException, _compile, _eval, _exec, _enumerate, _len = BaseException, compile, eval, exec, enumerate, len
_bool, _type, _range, _str, _int, _object_eq = bool, type, range, str, int, object.__eq__
_getattr, _bytes_hex, _type_name, _modules = getattr, bytes.hex, type.__dict__["__name__"].__get__, _sys.modules
_NUMPY_KINDS = "biufcmMSU"  # dtypes whose bytes are the whole value: booleans, numbers, dates, strings
_state = {}


def _report(index, kind, payload):
    _write(3, (_dumps([_state["nonce"], index, kind, payload]) + "\n").encode())


def _encode(v, depth=0):
    if depth > 64:
        raise ValueError("value nested too deeply to compare")
    if v is None:
        return ["N"]
    if _isinstance(v, bool):
        return ["b", v is True]
    if _isinstance(v, int):
        return ["i", int.__format__(v, "x")]
    if _isinstance(v, float):
        return ["f", float.__repr__(v)]
    if _isinstance(v, complex):
        return ["c", [float.__repr__(complex.real.__get__(v)), float.__repr__(complex.imag.__get__(v))]]
    if _isinstance(v, str):
        return ["s", str.__str__(v)]
    if _isinstance(v, (bytes, bytearray)):
        return ["y", bytes.hex(bytes(v))]
    for kind, base in (("l", list), ("t", tuple), ("S", set), ("F", frozenset)):
        if _isinstance(v, base):
            return [kind, [_encode(x, depth + 1) for x in base.__iter__(v)]]
    if _isinstance(v, dict):
        return ["d", [[_encode(k, depth + 1), _encode(x, depth + 1)] for k, x in dict.items(v)]]
    try:
        known = _known(v)
    except _BaseException:  # a value that will not be read as its type travels as an opaque one
        known = None
    return known or _opaque(v, depth)


def _hex(n):
    if not _isinstance(n, _int):
        raise TypeError("not an int")
    return _int.__format__(n, "x")


def _text(t):
    if not _isinstance(t, _str):
        raise TypeError("not a str")
    return _str.__str__(t)


def _known(v):
    """A standard-library or numpy value type, read through its base class's own descriptors (never through a
    subclass's methods); None for any other type. Looked up in sys.modules: a value of a type whose module was
    never imported cannot exist."""
    if _type(v) is _range:
        return ["r", [_hex(_range.start.__get__(v)), _hex(_range.stop.__get__(v)), _hex(_range.step.__get__(v))]]
    m = _modules.get("fractions")
    if m is not None and _isinstance(v, m.Fraction):
        return ["Q", _hex(m.Fraction._numerator.__get__(v)), _hex(m.Fraction._denominator.__get__(v))]
    m = _modules.get("decimal")
    if m is not None and _isinstance(v, m.Decimal):
        return ["D", _text(m.Decimal.__str__(v))]
    m = _modules.get("datetime")
    if m is not None and _isinstance(v, (m.date, m.time, m.timedelta)):
        if _isinstance(v, m.timedelta):
            t = m.timedelta
            parts = (t.days.__get__(v), t.seconds.__get__(v), t.microseconds.__get__(v))
            return ["T", "timedelta", [_hex(n) for n in parts]]
        for name in ("datetime", "date", "time"):  # datetime first: it is a date
            if _isinstance(v, _getattr(m, name)):
                return ["T", name, _text(_getattr(m, name).isoformat(v))]
    m = _modules.get("numpy")
    if m is not None and _isinstance(v, (m.ndarray, m.generic)):
        a = m.asarray(v) if _isinstance(v, m.generic) else v
        dtype = _text(m.dtype.str.__get__(m.ndarray.dtype.__get__(a)))
        if dtype[1:2] not in _NUMPY_KINDS:
            return None
        shape = [_hex(n) for n in m.ndarray.shape.__get__(a)]
        return ["A", dtype, shape, _bytes_hex(m.ndarray.tobytes(a)), _isinstance(v, m.generic)]
    return None


def _opaque(v, depth):
    """Any other value: its type's name, whether it is truthy (what `assert v` asks; at the top level only) and
    whether its type compares by identity. Outside it is equal to nothing but itself."""
    truth = None
    if depth == 0:
        try:
            truth = _bool(v)
        except _BaseException as e:
            truth = f"{_type_name(_type(e))}: {e}"[:300]
    try:
        own_eq = _type(v).__eq__ is not _object_eq
    except _BaseException:
        own_eq = True
    return ["o", _type_name(_type(v)), truth, own_eq]


def _value(i, expr, wrap, ns):
    v = _eval(_compile(expr, f"<test {i}>", "eval"), ns)
    return _encode(_list(_iter(v)) if wrap else v)


def _flush(flush):
    with _contextlib.suppress(_BaseException):
        flush()


def _checker(seen, wraps):
    """`__azr_check__` for one statement test: records each rewritten assert's value (a module test's reports
    also carry what the twin needs, ignored here)."""
    return lambda k, v, *twin: seen.append([k, _encode(_list(_iter(v)) if wraps[k] else v)])


def _pairer(seen):
    """`__azr_pair__` of a module test: `A == B` (or `!=`) evaluated as the assert would, reported as (A, B, what
    the comparison gave)."""

    def pair(k, left, right, eq, *twin):
        a = left()
        b = right()
        seen.append([k, _encode((a, b, a == b if eq else a != b))])

    return pair


def run(payload):
    """Load the solution, run every test, report each verdict; ends the process (never returns)."""
    p = _loads(payload)
    _state["nonce"] = p["nonce"]
    flush = _sys.stdout.flush  # the program's own stdout, set up by the worker before this runs
    if "checker" in p:
        _run_checker(p)
    if p.get("case_s") is not None:
        _run_cases(p, flush)
    tests = p["tests"]
    modules = _prepare_modules(p, tests)  # before the solution runs: compiled modules, the state it may not touch
    if modules is not None and any(_twinned(t) for t in tests):
        _run_twinned(p, tests, modules, flush)  # from here on, descriptor 3 is a pipe to the twin, not the report
    ns = {"__name__": "solution" if modules else "__main__", "__builtins__": __builtins__}  # imported, as by pytest
    try:
        if p.get("prelude"):
            _exec(_compile(p["prelude"], "<prelude>", "exec"), ns)
        _exec(_compile(p["code"], "<solution>", "exec"), ns)
    except _BaseException as e:
        _report(-1, "load_error", f"{type(e).__name__}: {e}"[:500])
        _finish()
    if p.get("setup"):
        try:
            _exec(_compile(p["setup"], "<setup>", "exec"), ns)
        except _BaseException as e:
            _report(-1, "load_error", f"setup: {type(e).__name__}: {e}"[:500])
            _finish()
    for i, t in _enumerate(tests):
        if t[0] == "none":  # nothing to run: judged outside (no tests ran)
            continue
        _flush(flush)
        pid = 0 if i == _len(tests) - 1 and modules is None else _fork()  # with a twin: every test forks, so a
        # crash in the last one cannot end this process before the twin has copied the others' lines
        if pid == 0:
            try:
                if t[0] == "value":
                    out = ("value", [_value(i, e, w, ns) for e, w in t[1]])
                elif t[0] in ("pytest", "unittest"):
                    out = _module_test(t[0], t[1], ns, modules)
                else:
                    seen = []
                    ns["__azr_check__"] = _checker(seen, t[1][1])
                    _exec(_compile(t[1][0], f"<test {i}>", "exec"), ns)
                    out = ("ok", seen)
            except _BaseException as e:
                out = ("error", f"{type(e).__name__}: {e}"[:500])
            _report(i, *out)
            _flush(flush)
            _finish()
        _wait(pid, 0)
    _finish()


# Test modules (pytest- and unittest-style) -------------------------------------------------------------------------
# Everything a module test relies on is made before the solution loads: the modules' code, the pytest shim's code,
# unittest imported, and a snapshot of the builtins and of unittest's modules and classes, which each test's fork
# restores before the test module runs, so a solution that patched them (or put its own `pytest` or `unittest` in
# sys.modules) changes nothing the test sees.


def _prepare_modules(p, tests):
    kinds = {t[0] for t in tests}
    if not kinds & {"pytest", "unittest"}:
        return None
    import builtins
    import importlib.util
    import types
    import unittest
    import unittest.case

    for name in ("contextlib", "inspect", "io", "itertools", "math", "pathlib", "re", "tempfile", "warnings"):
        __import__(name)  # the stand-in's own imports, once before the tests fork (not in every worker)

    state = {"codes": {}, "types": types, "builtins": builtins, "saved_builtins": dict(builtins.__dict__)}
    state["find_spec"] = importlib.util.find_spec
    for t in tests:
        if t[0] in ("pytest", "unittest") and t[1][0] not in state["codes"]:
            state["codes"][t[1][0]] = _compile(p["modules"][t[1][0]], "<test module>", "exec")
    shim = _modules.get("_azr_pytest")  # preloaded by the pool (its code compiled at the worker's start), or sent
    state["shim"] = (
        shim.CODE if "pytest_shim" not in p and shim else _compile(p.get("pytest_shim", ""), "<pytest>", "exec")
    )
    names = [n for n in _modules if n == "unittest" or n.startswith("unittest.")]
    state["saved_modules"] = {n: _modules[n] for n in names}
    state["saved_dicts"] = [(m, dict(m.__dict__), _codes(m)) for m in state["saved_modules"].values()]
    classes = [v for m in state["saved_modules"].values() for v in m.__dict__.values() if _isinstance(v, type)]
    state["saved_classes"] = [(c, dict(c.__dict__), _codes(c)) for c in classes if c.__module__.startswith("unittest")]
    module_type = types.ModuleType
    state["saved_std"] = [  # every other module loaded before the solution: what its names are bound to
        (m.__dict__, dict(m.__dict__))
        for n, m in list(_modules.items())
        if _type(m) is module_type and n not in _OWN_STATE and not n.startswith("unittest")
    ]
    state["unittest"] = unittest
    return state


def _codes(owner):
    """The code of each function a class or module holds (a solution could swap a function's `__code__`)."""
    return {k: v.__code__ for k, v in owner.__dict__.items() if _type(v).__name__ == "function"}


_OWN_STATE = ("sys", "builtins", "__main__", "_azr_harness", "_azr_pytest")  # not a library's state to put back


def _restore(state, std=True):
    """Undo what the solution did to the builtins, unittest, sys.modules and the names of every module loaded before
    it (`itertools.product = ...`, `math.isclose = ...`) before a module test runs. A name it added to such a module
    stays (a compatibility shim, `fractions.gcd = math.gcd`, changes nothing the test itself uses)."""
    for live, saved in state["saved_std"] if std else ():
        live.update(saved)  # every name at once (about 0.5 ms for the 120 modules a worker holds)
    live = state["builtins"].__dict__
    for k in [k for k in live if k not in state["saved_builtins"]]:
        del live[k]
    live.update(state["saved_builtins"])
    for name in [n for n in _modules if n in ("pytest", "solution") or n.startswith("unittest")]:
        del _modules[name]
    _modules.update(state["saved_modules"])
    for module, saved, codes in state["saved_dicts"]:
        module.__dict__.clear()
        module.__dict__.update(saved)
        for k, code in codes.items():
            saved[k].__code__ = code
    for cls, saved, codes in state["saved_classes"]:
        for k in [k for k in cls.__dict__ if k not in saved]:
            delattr(cls, k)
        for k, v in saved.items():
            if cls.__dict__.get(k) is not v:
                setattr(cls, k, v)
            if k in codes and v.__code__ is not codes[k]:
                v.__code__ = codes[k]


def _module_test(kind, sent, ns, state):
    """One test of a module: the module run in a namespace of its own (seeing the solution's names, with
    `solution` importable as the solution's module), then that test called; ("ok", reported values) when it
    completed, ("skipped", why) when it skipped."""
    index, name, case, wraps = sent[:4]
    options = sent[4] if _len(sent) > 4 else {}  # shared namespace, module names (`plans.TestPlan.sent`)
    _restore(state)
    types = state["types"]
    solution = types.ModuleType("solution")
    solution.__dict__.update({k: v for k, v in ns.items() if k not in ("__name__", "__builtins__")})
    _modules["solution"] = solution
    for alias, names in options.get("names", ()):  # `from leap import f`: the solution, where it is what defines f
        if alias not in _modules and state["find_spec"](alias) is None and all(n in ns for n in names):
            _modules[alias] = solution
    pytest = types.ModuleType("pytest")
    pytest.__dict__["__builtins__"] = state["builtins"]
    _exec(state["shim"], pytest.__dict__)
    _modules["pytest"] = pytest
    seen = []
    g = dict(solution.__dict__)
    g.update({"__name__": "test_solution", "__builtins__": state["builtins"], "__azr_check__": _checker(seen, wraps)})
    g["__azr_pair__"] = _pairer(seen)
    skipped = pytest.__dict__.get("Skipped", state["unittest"].SkipTest), state["unittest"].SkipTest
    try:
        _exec(state["codes"][index], g)
        if options.get("shared") is True:  # one module, as BigCodeBench: the test's names are the solution's too
            ns.update({k: v for k, v in g.items() if not k.startswith("__")})  # (never the harness's own)
        if kind == "pytest":  # how many cases it runs is reported too (site -1): the twin knows how many it should
            pytest.__dict__["run_test"](g, name, case, lambda n: seen.append([-1, n]))
        else:
            _run_unittest(g, name)
    except skipped as e:
        return ("skipped", f"{type(e).__name__}: {e}"[:500])
    return ("ok", seen)


def _run_unittest(g, name):
    cls_name, method = name.split(".", 1)
    cls = g[cls_name]
    if _getattr(cls, "__unittest_skip__", False):
        raise _modules["unittest"].SkipTest(_getattr(cls, "__unittest_skip_why__", ""))
    cls.setUpClass()
    try:
        test = cls(method)
        test.setUp()
        try:
            result = _getattr(test, method)()
            if _getattr(result, "__await__", None) is not None:
                import asyncio

                asyncio.run(result)
        finally:
            test.tearDown()
            test.doCleanups()
    finally:
        cls.tearDownClass()
        cls.doClassCleanups()


# Twins -------------------------------------------------------------------------------------------------------------
# A program with module tests runs as two processes. The harness makes itself non-dumpable and forks the *twin*,
# then puts a pipe to the twin in place of descriptor 3 and only then loads the solution. The twin never sees the
# solution: it runs each module test with the solution's names as `_Taint` stand-ins and writes one line per test
# on descriptor 3 (for each countable check it reached, the values of the pure sides it could compute: SPEC section
# 5, `azr.rewards.twins`), then a separator line, then copies the solution's process's lines from the pipe to
# descriptor 3. The twin is not dumpable, so nothing the solution does reaches descriptor 3 or writes a line before
# the separator; stopping or killing the twin leaves no separator, and then no module test passes.

_TWIN_TEST_S, _TWIN_BUDGET_S = 1.0, 2.0  # a twin's time, and all twins' time: past it the rest go without one
_twin = {"marked": {}, "sure": True}


class _Diverged(BaseException):
    """The twin needed something only the solution has (the truth, length, items or text of its value)."""


class _Taint:
    """What the solution's names are in a twin: every operation on it gives it back; asking its truth, length,
    items, text or hash stops the twin. Whatever a call hands it is marked, as the solution may change it."""

    __slots__ = ()

    def __getattr__(self, name):
        if name[:2] == "__":
            raise AttributeError(name)
        return self

    def __call__(self, *args, **kwargs):
        for v in (*args, *kwargs.values()):
            _mark(v)
        return self

    def __setattr__(self, name, value):
        _mark(value)

    def __setitem__(self, key, value):
        _mark(value)

    def __delitem__(self, key):
        pass


def _same(self, *args, **kwargs):
    return self


def _diverge(self, *args, **kwargs):
    raise _Diverged()


_BINARY = ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "divmod", "pow", "lshift", "rshift", "and")
_SAME = ("neg", "pos", "abs", "invert", "round", "trunc", "floor", "ceil", "getitem", "eq", "ne", "lt", "le", "gt")
_DIVERGE = ("bool", "len", "iter", "contains", "index", "int", "float", "complex", "str", "repr", "format", "bytes")
for _n in (*_BINARY, "xor", "or"):
    setattr(_Taint, f"__{_n}__", _same)
    setattr(_Taint, f"__r{_n}__", _same)
for _n in (*_SAME, "ge"):
    setattr(_Taint, f"__{_n}__", _same)
for _n in (*_DIVERGE, "hash", "enter", "exit", "aenter", "aexit", "await"):
    setattr(_Taint, f"__{_n}__", _diverge)
_TAINT = object.__new__(_Taint)
_IMMUTABLE = (type(None), bool, int, float, complex, str, bytes, range, _Taint)


def _mark(v, depth=0):
    """Remember a list, dict, set or bytearray (and what it holds) handed to the solution; anything else it is
    handed (a function, an object) could change anything, so the twin then vouches for nothing more."""
    kind = _type(v)
    if kind in _IMMUTABLE:
        return
    if depth > 64 or kind not in (list, dict, set, bytearray, tuple, frozenset):
        _twin["sure"] = False
        return
    if kind not in (tuple, frozenset):
        if id(v) in _twin["marked"]:
            return
        _twin["marked"][id(v)] = v  # held, so its id is never reused
    for x in dict.items(v) if kind is dict else (() if kind is bytearray else v):
        _mark(x, depth + 1)


def _has_taint(v, depth=0):
    kind = _type(v)
    if kind is _Taint or id(v) in _twin["marked"] or depth > 64:
        return True
    if kind in (list, tuple, set, frozenset):
        return any(_has_taint(x, depth + 1) for x in v)
    if kind is dict:
        return any(_has_taint(k, depth + 1) or _has_taint(x, depth + 1) for k, x in dict.items(v))
    return False


def _vouched(names, frame):
    """Whether none of `names` (as the test's frame sees them) holds the solution's value or something handed to it."""
    if not _twin["sure"]:
        return False
    local, outer = frame.f_locals, frame.f_globals
    return not any(_has_taint(local[n] if n in local else outer.get(n, _TAINT)) for n in names)


def _opaque_in(e, depth=0):
    kind = e[0]
    if kind == "o" or depth > 70:
        return True
    if kind in ("l", "t", "S", "F"):
        return any(_opaque_in(x, depth + 1) for x in e[1])
    return kind == "d" and any(_opaque_in(a, depth + 1) or _opaque_in(b, depth + 1) for a, b in e[1])


def _twin_side(thunk, deps, frame):
    """A pure side's value, encoded, when the twin can vouch for it; else None (the program's word stands)."""
    if deps is None or not _vouched(deps, frame):
        return None
    try:
        v = thunk()
        if _has_taint(v):
            return None
        e = _encode(v)
    except BaseException:
        return None
    return None if _opaque_in(e) else e


def _twin_reporters(seen):
    """`__azr_check__` and `__azr_pair__` in a twin: each countable site's pass, with its pure sides' values."""

    def check(k, value, ctl=None):
        if ctl is not None:
            seen.append([k, None, None, _vouched(ctl, _sys._getframe(1))])

    def pair(k, left, right, eq, ctl, deps_a, deps_b):
        if ctl is not None:
            frame = _sys._getframe(1)
            sure = _vouched(ctl, frame)
            seen.append([k, _twin_side(left, deps_a, frame), _twin_side(right, deps_b, frame), sure])

    return check, pair


class _TaintBuiltins(dict):
    """A twin's builtins: any other name a test reads is one the solution may have bound (at load, or later through
    `globals()`), so it is the stand-in too."""

    def __missing__(self, name):
        return _TAINT


class _TaintModule(type(_sys)):
    """The `solution` a twin's test imports: the stand-in for every name but those the solution imported."""

    def __getattr__(self, name):
        if name[:2] == "__":
            raise AttributeError(name)
        return _TAINT


def _solution_names(p):
    """The names the solution binds at its top level (read from its syntax tree, never run): what it imports, as
    imported here, and `_TAINT` for everything else; None when it does not parse."""
    import ast

    try:
        tree = _compile(p["code"], "<solution>", "exec", ast.PyCF_ONLY_AST)
    except BaseException:
        return None
    names = {}
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        if _isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name != "*":
                    names[alias.asname or alias.name.split(".")[0]] = _imported(node, alias, ast)
        elif _isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = _TAINT
        else:
            for sub in ast.iter_child_nodes(node):
                if _isinstance(sub, ast.stmt) or _type(sub).__name__ in ("ExceptHandler", "match_case"):
                    todo.append(sub)
                elif _isinstance(sub, ast.AST):
                    names.update((n.id, _TAINT) for n in ast.walk(sub) if _isinstance(n, ast.Name))
            if _type(node).__name__ in ("ExceptHandler",) and node.name:
                names[node.name] = _TAINT
    return names


def _imported(node, alias, ast):
    """What one import of the solution's binds, imported here (modules of the sandbox's own path only: `-I`)."""
    if _isinstance(node, ast.ImportFrom) and node.level:
        return _TAINT
    one = ast.Import([alias]) if _isinstance(node, ast.Import) else ast.ImportFrom(node.module, [alias], 0)
    scratch = {"__builtins__": __builtins__}
    try:
        _exec(_compile(ast.fix_missing_locations(ast.Module([one], [])), "<import>", "exec"), scratch)
        return scratch[alias.asname or alias.name.split(".")[0]]
    except BaseException:
        return _TAINT


def _twin_test(kind, sent, state, names, p):
    """One module test with the solution's names as stand-ins: {"checks": [[site, a, b, vouched], ...], "end", "cases"
    (how many parametrized cases it ran: computed by the test module from a standard library the solution never
    touched)}."""
    _index, name, case = sent[:3]
    solution = _TaintModule("solution")
    if p.get("prelude"):
        with _contextlib.suppress(BaseException):
            _exec(_compile(p["prelude"], "<prelude>", "exec"), solution.__dict__)
    solution.__dict__.update(names)
    if p.get("setup"):
        with _contextlib.suppress(BaseException):
            _exec(_compile(p["setup"], "<setup>", "exec"), solution.__dict__)
    _modules["solution"] = solution
    pytest = state["types"].ModuleType("pytest")
    pytest.__dict__["__builtins__"] = state["builtins"]
    _exec(state["shim"], pytest.__dict__)
    _modules["pytest"] = pytest
    seen = []
    check, pair = _twin_reporters(seen)
    g = {k: v for k, v in solution.__dict__.items() if k not in ("__name__", "__builtins__")}
    g.update({"__name__": "test_solution", "__builtins__": _TaintBuiltins(state["builtins"].__dict__)})
    g.update({"__azr_check__": check, "__azr_pair__": pair})
    end, cases = "complete", []
    try:
        _exec(state["codes"][_index], g)
        if kind == "pytest":
            pytest.__dict__["run_test"](g, name, case, cases.append)
        else:
            _run_unittest(g, name)
    except _Diverged:
        end = "diverged"
    except BaseException as e:
        end = _type_name(_type(e))
    return {"checks": seen, "end": end, "cases": cases[0] if cases else None}


def _time_up(signum, frame):
    if _time.monotonic() >= _twin.get("until", 0.0):
        raise _Diverged()
    _signal.setitimer(_signal.ITIMER_REAL, max(0.001, _twin["until"] - _time.monotonic()))  # a forged signal


def _twinned(test):
    """Whether a test is a module test whose twin has something to say (`plans.TestPlan.sent`'s options)."""
    kind, sent = test
    return kind in ("pytest", "unittest") and _len(sent) > 4 and sent[4].get("twin") is True


def _run_twins(p, tests, state, names):
    """Every module test's twin, one after another in this process, each within its time and all within the
    budget (the rest then have none); a twin's line is written as soon as its test ends. They run in a folder of
    their own (their working directory and temporary files), so nothing a twin writes there meets the solution's
    run of the same tests, which goes on meanwhile."""
    import shutil
    import tempfile

    with _contextlib.suppress(OSError):  # else in the run's own folder
        _state["twin_folder"] = folder = tempfile.mkdtemp(prefix=".azr-twin-")
        _state["twin_rmtree"] = shutil.rmtree
        _os.chdir(folder)
        tempfile.tempdir = folder
    # The solution's process can signal this one: an interrupt is ignored, and the timer's signal stops a test
    # only once that test's time is really up (any other signal that ends this process leaves no separator).
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    _signal.signal(_signal.SIGALRM, _time_up)
    deadline = _time.monotonic() + _TWIN_BUDGET_S
    for i, t in _enumerate(tests):
        left = min(_TWIN_TEST_S, deadline - _time.monotonic())
        if not _twinned(t) or left <= 0:
            continue  # not a module test, one whose twin has nothing to say, or the budget is spent
        _twin.update(marked={}, sure=True, until=_time.monotonic() + left)
        _signal.setitimer(_signal.ITIMER_REAL, left)
        try:
            out = _twin_test(t[0], t[1], state, names, p)
        except BaseException as e:
            out = {"checks": [], "end": f"twin failed: {_type_name(_type(e))}"}
        _signal.setitimer(_signal.ITIMER_REAL, 0)
        _write(3, (_dumps([_state["nonce"], i, "twin", out]) + "\n").encode())
        _restore(state, std=False)  # what this test changed is not the next one's (no solution ever ran here)


def _leave_twin_folder():
    folder = _state.get("twin_folder")
    if folder:
        with _contextlib.suppress(BaseException):
            _state["twin_rmtree"](folder, ignore_errors=True)


def _run_twinned(p, tests, state, flush):
    """The harness's side of a program with module tests (see above). This process forks the twin, then puts a
    pipe to it in place of descriptor 3 and returns, to load the solution; the twin runs the twins, writes the
    separator, then copies the pipe's lines to descriptor 3 until this process has ended."""
    _guard_harness()
    names = _solution_names(p)
    r, w = _os.pipe()
    _flush(flush)
    pid = _fork()
    if pid == 0:
        try:
            _os.close(w)
            devnull = _os.open(_os.devnull, _os.O_WRONLY)
            _os.dup2(devnull, 1)
            _os.dup2(devnull, 2)
            if names is not None:
                _run_twins(p, tests, state, names)
            _write(3, (_dumps([_state["nonce"], -3, "twins_end", None]) + "\n").encode())
            _leave_twin_folder()
            _relay(r)
        finally:
            _exit(0)
    _state["twin"], _state["main"] = pid, _os.getpid()
    _os.close(r)
    _os.dup2(w, 3)  # the report file is closed in this process: the solution's lines go through the twin
    _os.close(w)
    _prctl(_PR_SET_DUMPABLE, 1)  # the twin stays non-dumpable


_END = b"\x00end"  # the solution's process's last line to the twin: what follows is its leftovers' (never JSON)


def _relay(r):
    """Copy complete lines from the pipe to descriptor 3 until the solution's process says it has ended, or every
    writer has closed the pipe."""
    pending = b""
    while True:
        chunk = _os.read(r, 1 << 16)
        if not chunk:
            break
        pending += chunk
        cut = pending.rfind(b"\n") + 1
        if not cut:
            continue
        lines, pending = pending[:cut], pending[cut:]
        end = lines.find(_END + b"\n")
        if end != -1 and (end == 0 or lines[end - 1 : end] == b"\n"):
            _write(3, lines[:end])
            return
        _write(3, lines)
    if pending:
        _write(3, pending + b"\n")


def _finish():
    """End the program. In the solution's process of a program with module tests: tell the twin the last line has
    been written and wait for it to copy them (the program ends when this process does)."""
    twin = _state.get("twin")
    if twin is not None and _os.getpid() == _state.get("main"):
        with _contextlib.suppress(OSError):
            _write(3, _END + b"\n")
            _os.close(3)
        with _contextlib.suppress(OSError):
            _wait(twin, 0)
    _exit(0)


def _run_checker(p):
    """A special judge's run (a separate program): `check(input, expected, output)` per case, or, for a checker
    program in testlib's style, the program run per case as `checker INPUT OUTPUT ANSWER` (file names; exit 0
    accepts); reports each case's verdict. The checker is data: it runs here, in the sandbox, never in azr."""
    _state["nonce"] = p["nonce"]
    ns = {"__name__": "__checker__", "__builtins__": __builtins__}
    try:
        code = _compile(p["checker"], "<checker>", "exec")
        if p.get("style") == "program":
            _run_checker_program(p, code)
        _exec(code, ns)
        check = ns["check"]
    except _BaseException as e:
        _report(-1, "load_error", f"checker: {type(e).__name__}: {e}"[:500])
        _exit(0)
    for i, (data, expected, output) in _enumerate(p["cases"]):
        try:
            out = ("checked", _bool(check(data, expected, output)))
        except _BaseException as e:
            out = ("error", f"checker: {type(e).__name__}: {e}"[:500])
        _report(i, *out)
    _exit(0)


def _run_checker_program(p, code):
    """testlib's convention: exit 0 accepts, 1 (wrong answer) and 2 (presentation error) reject, anything else is
    the checker's own failure (which rejects too)."""
    for i, (data, expected, output) in _enumerate(p["cases"]):
        paths = []
        for name, text in (("input", data), ("output", output), ("answer", expected)):
            paths.append(f"checker-{i}-{name}.txt")
            with open(paths[-1], "w", encoding="utf-8") as f:
                f.write(text)
        pid = _fork()
        if pid == 0:
            status = 0
            try:
                _os.close(3)  # the verdict is the exit code
                _sys.argv = ["checker", *paths]
                _exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
            except SystemExit as e:
                status = _exit_status(e.code)
            except _BaseException as e:
                status = 3
                with _contextlib.suppress(_BaseException):
                    print(f"checker: {type(e).__name__}: {e}", file=_sys.stderr)
            _flush(_sys.stdout.flush)
            _exit(status)
        _, status = _wait(pid, 0)
        exit_code = _os.WEXITSTATUS(status) if _os.WIFEXITED(status) else None
        if exit_code in (0, 1, 2):
            _report(i, "checked", exit_code == 0)
        else:
            _report(i, "error", f"checker failed (exit {exit_code})")
    _exit(0)


def _run_cases(p, flush):
    """A stdin/stdout task: every case in a fresh child, the parent reporting what each printed; never returns."""
    files = (_tmpfile(), _tmpfile(), _tmpfile()) if _guard_harness() else None
    try:
        code = _compile(p["code"], "<solution>", "exec")
        setup = _compile(p["setup"], "<setup>", "exec") if p.get("setup") else None
        if p.get("prelude"):  # before the program, in its namespace (setup runs before both, as it always has)
            setup = _compile((p.get("setup") or "") + "\n" + p["prelude"], "<prelude>", "exec")
    except _BaseException as e:
        _report(-1, "load_error", f"{type(e).__name__}: {e}"[:500])
        _exit(0)
    for i, t in _enumerate(p["tests"]):
        data, cap = t[1]
        _flush(flush)
        line = [_state["nonce"], i, "stdout", _case(code, setup, data, cap, p["case_s"], f"case-{i}", files)]
        _write(3, (_dumps(line, ensure_ascii=False) + "\n").encode())  # output decoded with "replace": no surrogates
    _exit(0)


def _tmpfile():
    """An unnamed file in the run's own directory (on the sandbox's sized /tmp, under the file-size limit)."""
    try:
        return _os.open(".", _os.O_TMPFILE | _os.O_RDWR, 0o600)
    except (AttributeError, OSError):  # no O_TMPFILE here: a named file, unlinked at once
        name = f".azr-case-{_os.getpid()}-{_time.monotonic_ns()}"
        fd = _os.open(name, _os.O_CREAT | _os.O_EXCL | _os.O_RDWR, 0o600)
        _os.unlink(name)
        return fd


def _case(code, setup, data, cap, limit_s, folder, files=None):
    """Run one case in a child, in a folder of its own, and report what it printed: {"out", "exit", "signal",
    "timeout", "cut", "limit_s", "error"} (`error`: the last line the program wrote to stderr, when it failed).
    `files`: the stdin, stdout and stderr files of every case, emptied here; only with the subreaper, whose sweep
    leaves no process of an earlier case that could still hold them (without it, three new files per case)."""
    if files is None:
        stdin, stdout, stderr = _tmpfile(), _tmpfile(), _tmpfile()
    else:
        stdin, stdout, stderr = files
        for fd in files:
            _os.ftruncate(fd, 0)
            _os.lseek(fd, 0, 0)
    raw = data.encode("utf-8")
    while raw:
        raw = raw[_os.write(stdin, raw) :]
    _os.lseek(stdin, 0, 0)
    deadline = _time.monotonic() + limit_s  # before the fork: a case that stops this process at once gains no time
    pid = _fork()
    if pid == 0:
        _child(code, setup, stdin, stdout, folder, stderr)
    if files is None:
        _os.close(stdin)
    status, timeout = _wait_for(pid, deadline)
    with _contextlib.suppress(OSError):  # the case's process group (all there is to find without a subreaper)
        _os.killpg(pid, _signal.SIGKILL)
    _sweep()  # then what it left anywhere else (a session of its own): the subreaper's orphans, before the next
    _os.lseek(stdout, 0, 0)
    out = b""
    while len(out) <= cap:
        chunk = _os.read(stdout, cap + 1 - len(out))
        if not chunk:
            break
        out += chunk
    if files is None:
        _os.close(stdout)
    report = {"out": out[:cap].decode("utf-8", "replace"), "timeout": timeout, "cut": len(out) > cap}
    if not timeout:
        report["exit"] = _os.WEXITSTATUS(status) if _os.WIFEXITED(status) else None
        report["signal"] = _os.WTERMSIG(status) if _os.WIFSIGNALED(status) else None
    report["limit_s"] = limit_s
    error = _stderr_tail(stderr, files is None)
    if error and (timeout or report.get("exit") != 0):
        report["error"] = error
    return report


def _stderr_tail(fd, close, size=4096):
    """A case's stderr: its last `size` bytes copied to the program's own stderr (as if written there), and its
    last non-blank line returned (the exception of a traceback)."""
    end = _os.lseek(fd, 0, 2)
    _os.lseek(fd, max(0, end - size), 0)
    tail = b""
    while True:
        chunk = _os.read(fd, size)
        if not chunk:
            break
        tail += chunk
    if close:
        _os.close(fd)
    if tail:
        with _contextlib.suppress(OSError):
            _os.write(2, tail)
    lines = [line.strip() for line in tail.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _wait_for(pid, deadline):
    """(wait status, whether the child ran past `deadline` (a monotonic time) and was killed)."""
    try:
        pidfd = _os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    while True:
        done, status = _wait(pid, _os.WNOHANG)
        if done:  # reaped past the deadline (this process was stopped meanwhile): the case ran out of time
            status = status if _time.monotonic() <= deadline else None
            break
        left = deadline - _time.monotonic()
        if left <= 0:
            _os.kill(pid, _signal.SIGKILL)
            _wait(pid, 0)
            status = None
            break
        if pidfd is not None:
            _select.select([pidfd], [], [], left)
        else:
            _time.sleep(min(left, 0.002))
    if pidfd is not None:
        _os.close(pidfd)
    return status, status is None


_PR_SET_DUMPABLE, _PR_SET_CHILD_SUBREAPER = 4, 36


_LIBC = []  # libc's prctl, loaded once: a CDLL made in every case's child costs it a new ctypes type


def _prctl(option, value):
    try:
        if not _LIBC:
            import ctypes

            _LIBC.append(ctypes.CDLL(None, use_errno=True).prctl)
        return _LIBC[0](option, value, 0, 0, 0) == 0
    except (ImportError, OSError, AttributeError):
        return False


def _guard_harness():
    """Before any case runs: non-dumpable, so no case (same uid) can open /proc/<this>/fd/3, read or write this
    process's memory, or take its descriptors (pidfd_getfd); and a child subreaper, so every process a case leaves
    behind, wherever its session or group, is orphaned to this process, which kills it before the next case. Returns
    whether it is the subreaper."""
    _prctl(_PR_SET_DUMPABLE, 0)
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def _sweep():
    """Kill and reap every process the case left: as a subreaper, each is (or becomes, once its parent dies) a
    child of this process; done when none is left."""
    me = _os.getpid()
    while True:
        try:
            reaped, _status = _wait(-1, _os.WNOHANG)
        except ChildProcessError:
            return
        if reaped == 0:
            for child in _children_of(me):
                for kill in (_os.killpg, _os.kill):
                    with _contextlib.suppress(OSError):
                        kill(child, _signal.SIGKILL)
            _time.sleep(0.0005)


def _children_of(ppid):
    found = []
    for name in _os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat[stat.rfind(b")") + 2 :].split()[1]) == ppid:
                found.append(int(name))
    return found


def _child(code, setup, stdin, stdout, folder, stderr):
    """In the case's child: stdin, stdout and stderr on the case's files, descriptor 3 closed, a fresh working
    folder, the program run as __main__ (setup first); exits with the program's exit code."""
    exit_code = 1
    try:
        _os.setpgid(0, 0)
        _prctl(_PR_SET_DUMPABLE, 1)  # the program's own process is as any program's; the harness stays closed
        _os.mkdir(folder)
        _os.chdir(folder)
        _os.dup2(stdin, 0)
        _os.dup2(stdout, 1)
        _os.dup2(stderr, 2)
        for fd in (stdin, stdout, stderr, 3):
            _os.close(fd)
        _sys.stdin = open(0, closefd=False)  # noqa: SIM115 (the child's streams, closed by its _exit)
        _sys.stdout = open(1, "w", closefd=False, encoding="utf-8", errors="backslashreplace")  # noqa: SIM115
        ns = {"__name__": "__main__", "__builtins__": __builtins__}
        if setup is not None:
            _exec(setup, ns)
        exit_code = 0
        _exec(code, ns)
    except SystemExit as e:
        exit_code = _exit_status(e.code)
    except _BaseException:
        exit_code = 1
        with _contextlib.suppress(_BaseException):
            import traceback

            traceback.print_exc()
    _flush(_sys.stdout.flush)
    _flush(_sys.stderr.flush)
    _exit(exit_code)


def _exit_status(value):
    if value is None:
        return 0
    if _isinstance(value, int):
        return value & 0xFF
    with _contextlib.suppress(_BaseException):
        print(value, file=_sys.stderr)
    return 1
