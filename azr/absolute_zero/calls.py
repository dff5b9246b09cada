"""Absolute Zero's calls of `f`, as run inside the sandbox (shipped with `harness`; standard library only):
literal arguments in, plain data out, model code only in a child process. `run_calls` starts a fresh interpreter
(given a hash seed) with its own time limit, counted from when it says it has started, and output cap; the caller
reads the results back as literals and compares them by value with exact types (`same`).
"""

import ast
import builtins
import contextlib
import json
import os
import select
import signal
import sys
import time

REPORT_FD = 3
EXEC_FAILED = 127
STARTUP_S = 5.0  # a fresh interpreter's start, before the program's own clock; longer is the sandbox's failure
READY = b" "  # what a fresh interpreter writes once it has started: whitespace, which the report's JSON ignores
_SOURCE = globals().get("_AZR_SOURCE", "")  # this module's text, set by the program azr sends (see validation)
_SCALARS = (int, float, complex, str, bytes, bool, type(None))
_SEQUENCES = (list, tuple, set, frozenset)
_MAX_DEPTH = 100


def parse_call(text):
    """(args, kwargs) of the call `f(<text>)`, every argument a literal; ValueError otherwise."""
    if not isinstance(text, str):
        raise ValueError("not text")
    try:
        # The newline ends a trailing comment, so it cannot swallow the closing parenthesis.
        tree = ast.parse("f(" + text + "\n)", mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ValueError(f"not an argument list: {type(exc).__name__}") from None
    call = tree.body
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "f"):
        raise ValueError("not the arguments of one call")
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        raise ValueError("* and ** arguments are not literals")
    try:
        args = [ast.literal_eval(a) for a in call.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        raise ValueError("an argument is not a literal") from None
    return args, kwargs


def check_plain(value, depth=0):
    """Raise TypeError unless `value` is plain data (exact builtin types all the way down)."""
    if depth > _MAX_DEPTH:
        raise TypeError("nested too deeply")
    kind = type(value)
    if kind in _SCALARS:
        return
    if kind in _SEQUENCES:
        for item in value:
            check_plain(item, depth + 1)
        return
    if kind is dict:
        for key, item in value.items():
            check_plain(key, depth + 1)
            check_plain(item, depth + 1)
        return
    raise TypeError(f"a {kind.__name__} is not plain data")


def same(a, b):
    """Equal values of the same types: 1, 1.0 and True differ; set and dict order does not matter."""
    if type(a) is not type(b):
        return False
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is dict:
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def read_literal(text):
    """The value of a literal; ValueError for anything else."""
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError, AttributeError):
        raise ValueError("not a Python literal") from None


def encode(value, cap):
    """['ok', repr] for plain data whose repr reads back as the same value within `cap` characters, else why not."""
    try:
        check_plain(value)
    except (TypeError, RecursionError) as exc:
        return ["not_literal", str(exc)]
    try:
        text = repr(value)
    except ValueError:  # an int past the interpreter's digit limit
        return ["too_long", "an integer too long to print"]
    if len(text) > cap:
        return ["too_long", f"{len(text)} characters"]
    try:
        back = read_literal(text)
    except ValueError:
        return ["not_literal", f"{text[:60]} is not a literal"]
    if not same(value, back):
        return ["not_literal", f"{text[:60]} does not read back as the same value"]
    return ["ok", text]


def _describe(exc):
    try:
        return f"{type(exc).__name__}: {exc}"[:200]
    except BaseException:
        return type(exc).__name__


def _child(program, inputs, cap):
    """Where model code runs: load the program and call f on each input. Returns one [status, text] per input."""
    calls = [parse_call(text) for text in inputs]  # checked by the parent already
    namespace = {"__name__": "__azr_program__", "__builtins__": builtins}
    try:
        exec(compile(program, "<program>", "exec"), namespace)
        function = namespace["f"]
    except MemoryError:
        return [["memory", "MemoryError while loading"]] * len(calls)
    except BaseException as exc:
        return [["error", "loading: " + _describe(exc)]] * len(calls)
    results = []
    for args, kwargs in calls:
        try:
            results.append(encode(function(*args, **kwargs), cap))
        except MemoryError:
            results.append(["memory", "MemoryError"])
        except BaseException as exc:
            results.append(["error", _describe(exc)])
    return results


def _write_all(fd, data):
    while data:
        data = data[os.write(fd, data) :]


def _read_all(fd):
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def child_main(request_fd, result_fd):
    """Entry point of a fresh interpreter started by `run_calls` with its own PYTHONHASHSEED."""
    request = json.loads(_read_all(request_fd))
    _write_all(result_fd, READY)  # the program's clock starts now
    _write_all(result_fd, json.dumps(_child(request["program"], request["inputs"], request["cap"])).encode())


def _start(program, inputs, cap, hash_seed, writer):
    """In the forked child: run the calls here, or (with a hash seed) in a new interpreter that has it. Never
    returns."""
    with contextlib.suppress(OSError):
        os.close(REPORT_FD)  # the report channel is the parent's alone
    if hash_seed is None:
        try:
            data = json.dumps(_child(program, inputs, cap)).encode()
        except BaseException:
            data = b"[]"
        _write_all(writer, data)
        os._exit(0)
    request_reader, request_writer = os.pipe()
    for fd in (request_reader, writer):
        os.set_inheritable(fd, True)
    _write_all(request_writer, json.dumps({"program": program, "inputs": inputs, "cap": cap}).encode())
    os.close(request_writer)  # the request is small: it fits the pipe, and the new interpreter reads it whole
    source = _SOURCE + f"\nchild_main({request_reader}, {writer})\n"
    env = {"PYTHONHASHSEED": str(hash_seed), "PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}
    try:
        os.execve(sys.executable, [sys.executable, "-P", "-S", "-s", "-B", "-c", source], env)
    finally:
        os._exit(EXEC_FAILED)


def run_calls(program, inputs, cap, timeout_s, hash_seed=None):
    """[status, text] per input of `f` in a child process (a fresh interpreter with PYTHONHASHSEED=`hash_seed`
    when one is given); or 'timeout' / 'output_too_long' / 'crashed' / 'error' for the run as a whole, or
    'sandbox_error' when no interpreter could start. `timeout_s` counts from the program's start: a forked child
    starts at once, a fresh interpreter when it writes READY (within STARTUP_S)."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(reader)
        _start(program, inputs, cap, hash_seed, writer)
    os.close(writer)
    limit = len(inputs) * (cap + 512) + 4096
    chunks, size = [], 0
    started = hash_seed is None
    deadline = time.monotonic() + (timeout_s if started else STARTUP_S)
    outcome = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([reader], [], [], left)[0]:
            outcome = "timeout" if started else "sandbox_error"
            break
        chunk = os.read(reader, 1 << 16)
        if not chunk:
            break
        if not started:  # the first byte is READY: the interpreter is up, the program's time begins
            started, deadline = True, time.monotonic() + timeout_s
        size += len(chunk)
        if size > limit:
            outcome = "output_too_long"
            break
        chunks.append(chunk)
    os.close(reader)
    if outcome is not None:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if outcome is not None:
        return outcome
    try:
        results = json.loads(b"".join(chunks))
    except ValueError:
        results = None
    if not isinstance(results, list) or len(results) != len(inputs):
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == EXEC_FAILED and not chunks:
            return "sandbox_error"  # no interpreter could start: the sandbox's fault, not the program's
        return "crashed" if os.WIFSIGNALED(status) else "error"
    return results
