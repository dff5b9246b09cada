"""Absolute Zero's checks as run inside the sandbox (standard library only, with `static` and `calls`; azr sends
their text to a sandbox worker and never runs them in the trainer): `validate` a proposed program (static rules,
literal inputs, two interpreters with different hash seeds that must agree) and `judge` a solver's answer by task
type. Never runs model code itself; writes the verdict to descriptor 3, tagged with the payload's nonce
(docs/absolute-zero.md has the rules).
"""

import json
import os

from azr.absolute_zero.calls import REPORT_FD, parse_call, read_literal, run_calls, same
from azr.absolute_zero.static import static_problem

HASH_SEEDS = (0, 1)  # validation runs a program in two fresh interpreters, one with each


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
