"""The `pytest` that test modules import in the sandbox: a small, honest stand-in for the subset of pytest that code
data sets' test files use, since the sandbox's interpreter has no pytest (it sees the standard library alone).

Standard library only, and never imported by azr: `azr.rewards.harness` ships this file's source with a program
whose tests include pytest-style modules, and each test's fork runs it afresh into a new `pytest` module (after the
solution loaded, so the solution cannot have patched it). `run_test(namespace, name, case)` calls one collected
test; a failure raises, a skip raises `Skipped`.

The subset: `raises` (context manager and call forms, `match=`), `approx` (numbers, sequences, dicts; pytest's
default tolerances), `fixture` (module-level fixture functions, by parameter name, `yield` fixtures' teardown,
`autouse`), `mark.parametrize` (names as a string or a sequence, `param`, stacked decorators), `mark.skip`,
`mark.skipif`, other marks ignored, `skip`, `fail`, `importorskip`, `warns`, `setup_module` / `setup_function` /
`setup_method` and their teardowns, and the built-in fixtures `tmp_path`, `tmpdir` (a `pathlib.Path` here),
`capsys`, `monkeypatch` (setattr, delattr, setitem, delitem, setenv, delenv, chdir, syspath_prepend). Not there:
conftest.py, plugins, `request`, class-scoped fixtures (every fixture is function-scoped), fixture parametrization.
"""

import contextlib
import inspect
import io
import itertools
import math
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Mapping

__all__ = ["approx", "fail", "fixture", "importorskip", "mark", "param", "raises", "skip", "warns"]


class Skipped(Exception):
    """A test that skipped itself: not a pass."""


class Failed(AssertionError):
    """`pytest.fail`."""


def skip(reason=""):
    raise Skipped(reason)


def fail(reason="", pytrace=True):
    raise Failed(reason)


def importorskip(modname, minversion=None, reason=None):
    try:
        return __import__(modname, fromlist=["_"])
    except ImportError as exc:
        raise Skipped(reason or f"could not import {modname!r}: {exc}") from None


# raises / warns ----------------------------------------------------------------------------------------------------


class ExceptionInfo:
    def __init__(self):
        self.value = self.type = self.tb = None

    def match(self, pattern):
        if not re.search(pattern, str(self.value)):
            raise AssertionError(f"Regex pattern {pattern!r} does not match {str(self.value)!r}.")
        return True

    def errisinstance(self, exc):
        return isinstance(self.value, exc)


class _Raises:
    def __init__(self, expected, match):
        self.expected, self.match_expr, self.info = expected, match, ExceptionInfo()

    def __enter__(self):
        return self.info

    def __exit__(self, kind, value, tb):
        if kind is None:
            raise Failed(f"DID NOT RAISE {self.expected}")
        if not issubclass(kind, self.expected):
            return False
        self.info.value, self.info.type, self.info.tb = value, kind, tb
        if self.match_expr is not None:
            self.info.match(self.match_expr)
        return True


def raises(expected_exception, *args, match=None, **kwargs):
    context = _Raises(expected_exception, match)
    if not args:
        return context
    with context:
        args[0](*args[1:], **kwargs)
    return context.info


class _Warns(contextlib.AbstractContextManager):
    def __init__(self, expected, match):
        self.expected, self.match_expr = expected, match

    def __enter__(self):
        self._catch = warnings.catch_warnings(record=True)
        self.list = self._catch.__enter__()
        warnings.simplefilter("always")
        return self.list

    def __exit__(self, kind, value, tb):
        self._catch.__exit__(kind, value, tb)
        if kind is not None:
            return False
        for w in self.list:
            if issubclass(w.category, self.expected) and (
                self.match_expr is None or re.search(self.match_expr, str(w.message))
            ):
                return False
        raise Failed(f"DID NOT WARN: no warning of type {self.expected} was emitted")


def warns(expected_warning=Warning, *args, match=None, **kwargs):
    context = _Warns(expected_warning, match)
    if not args:
        return context
    with context:
        return args[0](*args[1:], **kwargs)


# approx ------------------------------------------------------------------------------------------------------------


class _Approx:
    def __init__(self, expected, rel=None, abs=None, nan_ok=False):
        self.expected, self.rel, self.abs, self.nan_ok = expected, rel, abs, nan_ok

    def _close(self, actual, expected):
        if isinstance(expected, Mapping):
            if not isinstance(actual, Mapping) or set(actual) != set(expected):
                return False
            return all(self._close(actual[k], expected[k]) for k in expected)
        if isinstance(expected, (list, tuple)) and not isinstance(expected, str):
            if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
                return False
            return all(self._close(a, e) for a, e in zip(actual, expected, strict=True))
        numbers = (int, float, complex)
        if not isinstance(expected, numbers) or isinstance(expected, bool):
            return actual == expected
        if not isinstance(actual, numbers) or isinstance(actual, bool):
            try:
                actual = float(actual)  # numpy scalars and friends
            except (TypeError, ValueError):
                return False
        if actual == expected:
            return True
        if isinstance(expected, float) and math.isnan(expected):
            return self.nan_ok and isinstance(actual, float) and math.isnan(actual)
        if isinstance(expected, float) and math.isinf(expected):
            return False
        absolute = 1e-12 if self.abs is None else self.abs
        relative = (1e-6 if self.abs is None else 0.0) if self.rel is None else self.rel
        return abs(actual - expected) <= max(relative * abs(expected), absolute)

    def __eq__(self, actual):
        try:
            import numpy

            if isinstance(actual, numpy.ndarray):
                actual = actual.tolist()
        except ImportError:
            pass
        return self._close(actual, self.expected)

    def __ne__(self, actual):
        return not self == actual

    __hash__ = None

    def __repr__(self):
        return f"approx({self.expected!r})"


def approx(expected, rel=None, abs=None, nan_ok=False):
    return _Approx(expected, rel, abs, nan_ok)


# marks, params, fixtures -------------------------------------------------------------------------------------------


class ParameterSet(tuple):
    """`pytest.param(*values)`."""

    marks = ()


def param(*values, marks=(), id=None):
    found = ParameterSet(values)
    found.marks = marks if isinstance(marks, (list, tuple)) else (marks,)
    return found


class MarkDecorator:
    def __init__(self, name, args=(), kwargs=None):
        self.name, self.args, self.kwargs = name, args, kwargs or {}

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]):  # applied to a test: the mark goes on it
            func = args[0]
            marks = getattr(func, "__azr_marks__", [])
            with contextlib.suppress(AttributeError):
                func.__azr_marks__ = [*marks, self]
            return func
        return MarkDecorator(self.name, args, kwargs)


class _Marks:
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return MarkDecorator(name)


mark = _Marks()


def fixture(func=None, *, scope="function", params=None, autouse=False, ids=None, name=None):
    def decorate(f):
        f.__azr_fixture__ = {"autouse": autouse, "name": name or f.__name__}
        return f

    return decorate(func) if callable(func) else decorate


# built-in fixtures -------------------------------------------------------------------------------------------------


class CaptureResult(tuple):
    out = property(lambda self: self[0])
    err = property(lambda self: self[1])


class CaptureFixture:
    def __init__(self):
        self._out, self._err = io.StringIO(), io.StringIO()
        self._saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = self._out, self._err

    def readouterr(self):
        result = CaptureResult((self._out.getvalue(), self._err.getvalue()))
        for stream in (self._out, self._err):
            stream.seek(0)
            stream.truncate()
        return result

    @contextlib.contextmanager
    def disabled(self):
        sys.stdout, sys.stderr = self._saved
        try:
            yield
        finally:
            sys.stdout, sys.stderr = self._out, self._err

    def close(self):
        sys.stdout, sys.stderr = self._saved


_MISSING = object()


class MonkeyPatch:
    def __init__(self):
        self._undo = []

    def setattr(self, target, name, value=_MISSING, raising=True):
        if value is _MISSING:  # setattr("module.attr", value)
            module, _, attr = target.rpartition(".")
            target, name, value = _resolve(module), attr, name
        old = getattr(target, name, _MISSING)
        if old is _MISSING and raising:
            raise AttributeError(f"{target!r} has no attribute {name!r}")
        self._undo.append(lambda: setattr(target, name, old) if old is not _MISSING else delattr(target, name))
        setattr(target, name, value)

    def delattr(self, target, name=_MISSING, raising=True):
        if name is _MISSING:
            module, _, name = target.rpartition(".")
            target = _resolve(module)
        if not hasattr(target, name):
            if raising:
                raise AttributeError(name)
            return
        old = getattr(target, name)
        self._undo.append(lambda: setattr(target, name, old))
        delattr(target, name)

    def setitem(self, mapping, key, value):
        old = mapping.get(key, _MISSING)
        self._undo.append(lambda: mapping.__setitem__(key, old) if old is not _MISSING else mapping.pop(key, None))
        mapping[key] = value

    def delitem(self, mapping, key, raising=True):
        if key not in mapping:
            if raising:
                raise KeyError(key)
            return
        old = mapping[key]
        self._undo.append(lambda: mapping.__setitem__(key, old))
        del mapping[key]

    def setenv(self, name, value, prepend=None):
        value = str(value)
        if prepend and name in os.environ:
            value = value + prepend + os.environ[name]
        self.setitem(os.environ, name, value)

    def delenv(self, name, raising=True):
        self.delitem(os.environ, name, raising)

    def chdir(self, path):
        old = os.getcwd()
        self._undo.append(lambda: os.chdir(old))
        os.chdir(path)

    def syspath_prepend(self, path):
        old = list(sys.path)
        self._undo.append(lambda: sys.path.__setitem__(slice(None), old))
        sys.path.insert(0, str(path))

    @contextlib.contextmanager
    def context(self):
        patch = MonkeyPatch()
        try:
            yield patch
        finally:
            patch.undo()

    def undo(self):
        while self._undo:
            self._undo.pop()()


def _resolve(dotted):
    parts = dotted.split(".")
    found = __import__(parts[0])
    for i, part in enumerate(parts[1:], 1):
        try:
            found = getattr(found, part)
        except AttributeError:
            found = __import__(".".join(parts[: i + 1]), fromlist=["_"])
    return found


def _tmp_path():
    from pathlib import Path

    return Path(tempfile.mkdtemp(prefix="pytest-", dir=os.getcwd()))


# running one test --------------------------------------------------------------------------------------------------


def _cases(func):
    """The parametrized cases of `func` (dicts of argument name -> value), in azr's order: the product of its
    parametrize marks, the mark nearest the function first. None when it is not parametrized."""
    marks = [m for m in getattr(func, "__azr_marks__", []) if m.name == "parametrize"]
    if not marks:
        return None
    axes = []
    for m in marks:
        names = m.args[0] if m.args else m.kwargs["argnames"]
        values = m.args[1] if len(m.args) > 1 else m.kwargs["argvalues"]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        names = [n for n in names if n]
        axis = []
        for value in values:
            row = tuple(value) if isinstance(value, ParameterSet) or len(names) > 1 else (value,)
            if isinstance(value, ParameterSet) and len(names) == 1 and len(row) != 1:
                row = (row,)
            axis.append(dict(zip(names, row, strict=False)))
        axes.append(axis)
    return [dict(kv for part in combo for kv in part.items()) for combo in itertools.product(*axes)]


def _skip_marks(func):
    for m in getattr(func, "__azr_marks__", []):
        if m.name == "skip":
            raise Skipped(m.kwargs.get("reason", m.args[0] if m.args else "skipped"))
        if m.name == "skipif" and (m.args[0] if m.args else m.kwargs.get("condition")):
            raise Skipped(m.kwargs.get("reason", "skipif"))


def run_test(namespace, name, case):
    """Call the test `name` (`test_f` or `TestC::test_m`) of a module run into `namespace`; `case`: which of its
    parametrized cases (None: every case, one after another)."""
    fixtures = {  # the module's own fixture functions (never an object the solution put among its names)
        v.__dict__["__azr_fixture__"]["name"]: v
        for v in list(namespace.values())
        if inspect.isfunction(v) and v.__globals__ is namespace and "__azr_fixture__" in v.__dict__
    }
    cls_name, _, method = name.rpartition("::")
    owner = namespace[cls_name]() if cls_name else None
    func = getattr(owner, method) if owner is not None else namespace[name]
    plain = getattr(func, "__func__", func)
    if not inspect.isfunction(plain):
        raise TypeError(f"{name} is not a test function but a {type(plain).__name__}")
    _skip_marks(plain)
    cases = _cases(plain)
    if cases is None and case is not None:
        raise LookupError(f"{name} has no parametrized case {case}")
    if cases is None:
        chosen = [{}]
    elif case is None:
        chosen = cases
    elif 0 <= case < len(cases):
        chosen = [cases[case]]
    else:
        raise LookupError(f"parametrized case {case} of {name} not found ({len(cases)} cases)")
    for values in chosen:
        _call(namespace, fixtures, owner, func, values)


def _call(namespace, fixtures, owner, func, values):
    teardowns, made = [], {}

    def make(name, chain=()):
        if name in made:
            return made[name]
        if name in values:
            return values[name]
        if name in fixtures and name not in chain:
            f = fixtures[name]
            args = {p: make(p, (*chain, name)) for p in _params(f)}
            result = f(**args)
            if inspect.isgenerator(result):
                generator, result = result, next(result)
                teardowns.append(lambda: next(generator, None))
        elif name in ("tmp_path", "tmpdir"):
            result = _tmp_path()
        elif name == "tmp_path_factory":
            result = type("TmpPathFactory", (), {"mktemp": staticmethod(lambda *a, **k: _tmp_path())})()
        elif name == "capsys":
            result = CaptureFixture()
            teardowns.append(result.close)
        elif name == "monkeypatch":
            result = MonkeyPatch()
            teardowns.append(result.undo)
        else:
            raise LookupError(f"fixture {name!r} not found (the fixtures azr offers: tmp_path, capsys, monkeypatch)")
        made[name] = result
        return result

    try:
        for name, f in fixtures.items():
            if f.__azr_fixture__["autouse"]:
                make(name)
        setup, teardown = _hooks(namespace, owner, func)
        for hook in setup:
            hook()
        try:
            result = func(**{p: make(p) for p in _params(func)})
            if inspect.iscoroutine(result):
                import asyncio

                asyncio.run(result)
        finally:
            for hook in teardown:
                hook()
    finally:
        for undo in reversed(teardowns):
            undo()


def _hooks(namespace, owner, func):
    """xunit-style setup and teardown functions around one test."""
    setup, teardown = [], []
    for name, args in (("setup_module", 1), ("setup_function", 1)):
        hook = namespace.get(name)
        if callable(hook) and (owner is None or name == "setup_module"):
            setup.append(_with_optional(hook, namespace if name == "setup_module" else func, args))
    for name in ("teardown_function", "teardown_module"):
        hook = namespace.get(name)
        if callable(hook) and (owner is None or name == "teardown_module"):
            teardown.append(_with_optional(hook, func, 1))
    if owner is not None:
        for name in ("setup_class", "setup_method", "setup"):
            hook = getattr(owner, name, None)
            if callable(hook):
                setup.append(_with_optional(hook, func, 1))
        for name in ("teardown_method", "teardown", "teardown_class"):
            hook = getattr(owner, name, None)
            if callable(hook):
                teardown.append(_with_optional(hook, func, 1))
    return setup, teardown


def _with_optional(hook, arg, _count):
    return lambda: hook(arg) if _params(hook, positional=True) else hook()


def _params(func, positional=False):
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [p.name for p in signature.parameters.values() if p.kind in kinds and (positional or p.default is p.empty)]
