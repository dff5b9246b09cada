"""Absolute Zero's checks, as run inside the sandbox: validating a proposed program and judging a solver's answer.

Standard library only: azr sends this file's source to a sandbox worker with a payload (`main(PAYLOAD)` appended)
and never runs it in the trainer. Two modes:

- `validate`: the static rules on the program's syntax tree (one top-level function `f`, classes and nested
  functions allowed; imports only from an allow-list, dotted names by their top package, `__import__` and
  `importlib` refused; no I/O, eval or introspection builtins), each input read as literal arguments, `f` run on
  every input, each result required to be plain data whose repr is a literal within the size cap (too long is a
  rejection, never a truncation). With `expected` reprs the results are compared by value, which is how a second
  run on a pool with another hash seed proves determinism.
- `judge`: deduction compares the answer literal with the gold output; abduction runs the task's program on the
  answer's arguments and compares with the gold output; induction checks the answer program with the same rules
  and requires every hidden input to give its gold output.

Model code runs only in a forked child, with the report descriptor closed, and hands back text that the parent
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
import time

REPORT_FD = 3
IMPORTERS = frozenset({"__import__", "importlib"})
BANNED_NAMES = frozenset(
    {
        "open",
        "input",
        "print",
        "eval",
        "exec",
        "compile",
        "globals",
        "locals",
        "vars",
        "getattr",
        "setattr",
        "delattr",
        "breakpoint",
        "exit",
        "quit",
        "help",
        "memoryview",
        "__builtins__",
        "__loader__",
        "__spec__",
        "__file__",
    }
)
# Attributes that reach interpreter internals (and from there any module): never part of a code-reasoning task.
INTROSPECTION = frozenset(
    {
        "__class__",
        "__bases__",
        "__base__",
        "__mro__",
        "__subclasses__",
        "__globals__",
        "__builtins__",
        "__code__",
        "__closure__",
        "__dict__",
        "__getattribute__",
        "__reduce__",
        "__reduce_ex__",
        "__import__",
        "__loader__",
        "__spec__",
        "__self__",
        "__func__",
        "__module__",
        "__traceback__",
        "gi_frame",
        "gi_code",
        "cr_frame",
        "ag_frame",
        "f_globals",
        "f_locals",
        "f_builtins",
        "f_back",
        "tb_frame",
    }
)
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


def _child(program, calls, cap):
    """In the forked child: load the program and call f on each input. Returns one [status, text] per call."""
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


def run_calls(program, calls, cap, timeout_s):
    """[status, text] per call, run in a forked child; or 'timeout' / 'output_too_long' / 'crashed' for the run."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: model code runs only here, and cannot reach the report channel
        os.close(reader)
        with contextlib.suppress(OSError):
            os.close(REPORT_FD)
        try:
            data = json.dumps(_child(program, calls, cap)).encode()
        except BaseException:
            data = b"[]"
        while data:
            data = data[os.write(writer, data) :]
        os._exit(0)
    os.close(writer)
    limit = len(calls) * (cap + 512) + 4096
    chunks, size = [], 0
    deadline = time.monotonic() + timeout_s
    outcome = None
    while outcome is None:
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
    if not isinstance(results, list) or len(results) != len(calls):
        return "crashed" if os.WIFSIGNALED(status) else "error"
    return results


_RUN_REASONS = {
    "error": "error",
    "memory": "memory",
    "too_long": "output_too_long",
    "not_literal": "output_not_literal",
}


def validate(p):
    """{'reason': '' or why not, 'detail': ..., 'outputs': [repr, ...]} for the program and inputs in `p`."""
    if p["static"]:
        problem = static_problem(p["program"], frozenset(p["allowed_imports"]))
        if problem:
            return {"reason": problem[0], "detail": problem[1]}
    calls, seen = [], set()
    for index, text in enumerate(p["inputs"]):
        try:
            args, kwargs = parse_call(text)
        except ValueError as exc:
            return {"reason": "bad_input", "detail": f"input {index}: {exc}"}
        shown = repr((args, sorted(kwargs.items())))
        if shown in seen:
            return {"reason": "bad_input", "detail": f"input {index} repeats an earlier one"}
        seen.add(shown)
        calls.append((args, kwargs))
    results = run_calls(p["program"], calls, p["max_output_chars"], p["timeout_s"])
    if isinstance(results, str):
        return {"reason": "error" if results == "crashed" else results, "detail": f"the run ended: {results}"}
    outputs = []
    for index, (status, text) in enumerate(results):
        if status != "ok":
            return {"reason": _RUN_REASONS.get(status, "error"), "detail": f"input {index}: {text}"}
        outputs.append(text)
    for index, (want, got) in enumerate(zip(p.get("expected") or [], outputs, strict=False)):
        try:
            equal = same(read_literal(want), read_literal(got))
        except ValueError:
            equal = False
        if not equal:
            return {"reason": p["mismatch"], "detail": f"input {index}: {got[:80]} this run, {want[:80]} expected"}
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
    calls = []
    for text in inputs:
        try:
            calls.append(parse_call(text))
        except ValueError as exc:
            return {"outcome": "format", "detail": str(exc)}
    results = run_calls(program, calls, p["max_output_chars"], p["timeout_s"])
    if isinstance(results, str):
        return {"outcome": "wrong", "detail": f"the run ended: {results}"}
    for index, ((status, text), want) in enumerate(zip(results, p["outputs"], strict=True)):
        if status != "ok":
            return {"outcome": "wrong", "detail": f"input {index}: {status}: {text}"}
        if not same(read_literal(text), read_literal(want)):
            return {"outcome": "wrong", "detail": f"input {index}: got {text[:80]}"}
    return {"outcome": "correct", "detail": ""}


def main(payload_json):
    payload = json.loads(payload_json)
    report = validate(payload) if payload["mode"] == "validate" else judge(payload)
    line = json.dumps([payload["nonce"], report]) + "\n"
    os.write(REPORT_FD, line.encode())
