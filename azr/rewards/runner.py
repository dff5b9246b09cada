"""The harness's sandbox side: the code that loads a solution and runs its tests inside the sandbox.

Standard library only, and never run by azr itself: `azr.rewards.harness` ships this file's source into the
sandbox, where pools that grading opens preload it into every worker (compiled once, not once per program) and a
program on any other pool compiles it itself. `run(payload)` loads the solution once into a namespace of its own,
then runs each test in a forked copy of that state (the last one in the process itself: nothing runs after it), and
writes one nonce-tagged JSON line per test to descriptor 3. What it binds at import (os and json functions, `list`,
`iter`, `isinstance`) is bound before any solution runs.
"""

import contextlib as _contextlib
import json as _json
import os as _os
import sys as _sys

_fork, _write, _exit, _wait = _os.fork, _os.write, _os._exit, _os.waitpid
_dumps, _loads, _list, _iter, _isinstance = _json.dumps, _json.loads, list, iter, isinstance
_BaseException, _compile, _eval, _exec, _enumerate, _len = BaseException, compile, eval, exec, enumerate, len
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
    raise TypeError(f"a {type(v).__name__} cannot be compared outside the sandbox; return plain data")


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
