"""Absolute Zero's checks, as run inside the sandbox: validating a proposed program and judging a solver's answer.

Standard library only: azr sends this file's text to a sandbox worker with a payload (`validation.harness_program`)
and never runs it in the trainer. Two modes:

- `validate`: the static rules on the program's syntax tree (one top-level function `f`, classes and nested
  functions allowed; imports only from an allow-list, dotted names by their top package, `__import__` and
  `importlib` refused; no I/O, eval or introspection builtins), each input read as literal arguments, then `f` run
  on every input in two fresh interpreters started with PYTHONHASHSEED 0 and 1 (a sandbox worker's forked
  programs share one hash secret, so only a new interpreter gets another): each result must be plain data whose
  repr is a literal within the size cap (too long is a rejection, never a truncation), and both runs must agree by
  value. With `expected` reprs (a checked file) the outputs must also match them.
- `judge`: deduction compares the answer literal with the gold output; abduction runs the task's program on the
  answer's arguments and compares with the gold output; induction checks the answer program with the same rules
  and requires every hidden input to give its gold output.

Model code runs only in a child process, with the report descriptor closed, and hands back text that the parent
(which never runs model code) reads as literals and compares by value with exact types. The static rules are a
policy for well-formed tasks, not the security boundary: the sandbox is. The verdict goes to descriptor 3 tagged
with the payload's nonce.
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
IMPORTERS = frozenset({"__import__", "importlib"})
# Builtins for I/O, dynamic code and reflection, and the names through which the module's globals are reached.
# The two name lists are not laid out one name per line (formatting off), which would double this module.
# fmt: off
BANNED_NAMES = frozenset({
    "open", "input", "print", "eval", "exec", "compile", "globals", "locals", "vars", "getattr", "setattr",
    "delattr", "breakpoint", "exit", "quit", "help", "memoryview", "__builtins__", "__loader__", "__spec__",
    "__file__",
})
# Attributes that reach interpreter internals (and from there any module): never part of a code-reasoning task.
INTROSPECTION = frozenset({
    "__class__", "__bases__", "__base__", "__mro__", "__subclasses__", "__globals__", "__builtins__", "__code__",
    "__closure__", "__dict__", "__getattribute__", "__reduce__", "__reduce_ex__", "__import__", "__loader__",
    "__spec__", "__self__", "__func__", "__module__", "__traceback__", "gi_frame", "gi_code", "cr_frame", "ag_frame",
    "f_globals", "f_locals", "f_builtins", "f_back", "tb_frame",
})
# fmt: on
HASH_SEEDS = (0, 1)  # validation runs a program in two fresh interpreters, one with each
_SOURCE = globals().get("_HARNESS_SOURCE", "")  # this file's text, set by the program azr sends (see main)
_SCALARS = (int, float, complex, str, bytes, bool, type(None))
_SEQUENCES = (list, tuple, set, frozenset)
_MAX_DEPTH = 100


def static_problem(source, allowed_imports, entry="f"):
    """(reason, detail) for the first rule `source` breaks, or None: syntax, structure, banned_import, banned_name."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        return "syntax", f"{type(exc).__name__}: {exc}"[:200]
    except (RecursionError, MemoryError):
        return "syntax", "nested too deeply to parse"
    functions = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            functions.append(node.name)
        elif isinstance(node, (ast.ClassDef, ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign)):
            continue
        elif not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            name = type(node).__name__
            return "structure", f"a top-level {name} statement; only imports, constants, classes and f"
    if functions != [entry]:
        return "structure", f"expected one top-level function named {entry}, found {functions or 'none'}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in allowed_imports:
                    return "banned_import", f"import {alias.name}"
        elif isinstance(node, ast.ImportFrom):
            if node.level or (node.module or "").split(".")[0] not in allowed_imports:
                return "banned_import", f"from {'.' * node.level}{node.module or ''} import ..."
        elif isinstance(node, ast.Name) and node.id in IMPORTERS:
            return "banned_import", node.id
        elif isinstance(node, ast.Name) and node.id in BANNED_NAMES:
            return "banned_name", node.id
        elif isinstance(node, ast.Attribute) and node.attr in INTROSPECTION:
            return "banned_name", f".{node.attr}"
    return None


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
    when one is given); or 'timeout' / 'output_too_long' / 'crashed' / 'error' for the run as a whole."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(reader)
        _start(program, inputs, cap, hash_seed, writer)
    os.close(writer)
    limit = len(inputs) * (cap + 512) + 4096
    chunks, size = [], 0
    deadline = time.monotonic() + timeout_s
    outcome = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([reader], [], [], left)[0]:
            outcome = "timeout"
            break
        chunk = os.read(reader, 1 << 16)
        if not chunk:
            break
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


_RUN_REASONS = {
    "error": "error",
    "memory": "memory",
    "too_long": "output_too_long",
    "not_literal": "output_not_literal",
}


def validate(p):
    """{'reason': '' or why not, 'detail': ..., 'outputs': [repr, ...]} for the program and inputs in `p`: the
    static rules, then two runs in fresh interpreters with different hash seeds that must agree by value."""
    problem = static_problem(p["program"], frozenset(p["allowed_imports"]))
    if problem:
        return {"reason": problem[0], "detail": problem[1]}
    seen = set()
    for index, text in enumerate(p["inputs"]):
        try:
            args, kwargs = parse_call(text)
        except ValueError as exc:
            return {"reason": "bad_input", "detail": f"input {index}: {exc}"}
        shown = repr((args, sorted(kwargs.items())))
        if shown in seen:
            return {"reason": "bad_input", "detail": f"input {index} repeats an earlier one"}
        seen.add(shown)
    runs = []
    for run, seed in enumerate(HASH_SEEDS):
        results = run_calls(p["program"], p["inputs"], p["max_output_chars"], p["timeout_s"], seed)
        if isinstance(results, str):
            reason = {"crashed": "error", "error": "error"}.get(results, results)
            if run and reason == "error":
                reason = "nondeterministic"  # it ran with the first hash seed and fails with the second
            return {"reason": reason, "detail": f"run {run + 1} (PYTHONHASHSEED={seed}) ended: {results}"}
        for index, (status, text) in enumerate(results):
            if status != "ok":
                reason = _RUN_REASONS.get(status, "error")
                if run and reason == "error":
                    reason = "nondeterministic"
                return {"reason": reason, "detail": f"input {index}: {text}"}
        runs.append([text for _, text in results])
    outputs, again = runs
    checks = [("nondeterministic", again, "with PYTHONHASHSEED=1")]
    if p.get("expected") is not None:
        checks.append(("output_mismatch", p["expected"], "expected"))
    for reason, other, label in checks:
        for index, (got, want) in enumerate(zip(outputs, other, strict=True)):
            try:
                equal = same(read_literal(got), read_literal(want))
            except ValueError:
                equal = False
            if not equal:
                return {"reason": reason, "detail": f"input {index}: {got[:80]}, but {want[:80]} {label}"}
    return {"reason": "", "detail": "", "outputs": outputs}


def judge(p):
    """{'outcome': 'correct' | 'wrong' | 'format', 'detail': ...} for one solver answer."""
    kind, answer = p["type"], p["answer"]
    if kind == "deduction":
        try:
            value = read_literal(answer)
        except ValueError:
            return {"outcome": "format", "detail": "the answer is not a Python literal"}
        right = same(value, read_literal(p["outputs"][0]))
        return {"outcome": "correct" if right else "wrong", "detail": "" if right else f"answered {answer[:80]}"}
    if kind == "abduction":
        program, inputs = p["program"], [answer]
    else:
        problem = static_problem(answer, frozenset(p["allowed_imports"]))
        if problem:
            outcome = "format" if problem[0] in ("syntax", "structure") else "wrong"
            return {"outcome": outcome, "detail": f"{problem[0]}: {problem[1]}"}
        program, inputs = answer, p["inputs"]
    for text in inputs:
        try:
            parse_call(text)
        except ValueError as exc:
            return {"outcome": "format", "detail": str(exc)}
    results = run_calls(program, inputs, p["max_output_chars"], p["timeout_s"])
    if results == "sandbox_error":
        return {"outcome": "error", "detail": "no interpreter could start"}
    if isinstance(results, str):
        return {"outcome": "wrong", "detail": f"the run ended: {results}"}
    for index, ((status, text), want) in enumerate(zip(results, p["outputs"], strict=True)):
        if status != "ok":
            return {"outcome": "wrong", "detail": f"input {index}: {status}: {text}"}
        if not same(read_literal(text), read_literal(want)):
            return {"outcome": "wrong", "detail": f"input {index}: got {text[:80]}"}
    return {"outcome": "correct", "detail": ""}


def main(payload_json):
    """Entry point in the sandbox. The program azr sends sets `_HARNESS_SOURCE` to this file's text, runs it, and
    calls `main` with the payload."""
    payload = json.loads(payload_json)
    report = validate(payload) if payload["mode"] == "validate" else judge(payload)
    line = json.dumps([payload["nonce"], report]) + "\n"
    os.write(REPORT_FD, line.encode())
