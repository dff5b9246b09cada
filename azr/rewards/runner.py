"""The harness's sandbox side: the code that loads a solution and runs its tests inside the sandbox.

Standard library only, and never run by azr itself: `azr.rewards.harness` ships this file's source into the
sandbox, where pools that grading opens preload it into every worker (compiled once, not once per program) and a
program on any other pool compiles it itself. `run(payload)` loads the solution once into a namespace of its own,
then runs each test in a forked copy of that state (the last one in the process itself: nothing runs after it), and
writes one nonce-tagged JSON line per test to descriptor 3. What it binds at import (os and json functions, `list`,
`iter`, `isinstance`, `bool`, `type`) is bound before any solution runs. Values go out as typed plain data
(`_encode`); what a value that is not plain data is read as only decides which value is rebuilt outside, never how
it compares there (SPEC_FUNCTIONS.md section 5).
"""

import contextlib as _contextlib
import json as _json
import os as _os
import sys as _sys

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
    """`__azr_check__` for one statement test: records each rewritten assert's value."""
    return lambda k, v: seen.append([k, _encode(_list(_iter(v)) if wraps[k] else v)])


def run(payload):
    """Load the solution, run every test, report each verdict; ends the process (never returns)."""
    p = _loads(payload)
    _state["nonce"] = p["nonce"]
    flush = _sys.stdout.flush  # the program's own stdout, set up by the worker before this runs
    ns = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        _exec(_compile(p["code"], "<solution>", "exec"), ns)
    except _BaseException as e:
        _report(-1, "load_error", f"{type(e).__name__}: {e}"[:500])
        _exit(0)
    tests = p["tests"]
    for i, t in _enumerate(tests):
        _flush(flush)
        pid = 0 if i == _len(tests) - 1 else _fork()
        if pid == 0:
            try:
                if t[0] == "value":
                    out = ("value", [_value(i, e, w, ns) for e, w in t[1]])
                else:
                    seen = []
                    ns["__azr_check__"] = _checker(seen, t[1][1])
                    _exec(_compile(t[1][0], f"<test {i}>", "exec"), ns)
                    out = ("ok", seen)
            except _BaseException as e:
                out = ("error", f"{type(e).__name__}: {e}"[:500])
            _report(i, *out)
            _flush(flush)
            _exit(0)
        _wait(pid, 0)
    _exit(0)
