"""The harness: the program grading sends to the sandbox for one solution. Its sandbox side (`azr.rewards.runner`)
loads the solution once, then runs every test in its own forked copy of that state, and writes one nonce-tagged
JSON line per test to descriptor 3; this module ships that source (or has pools preload it) with a payload of the
solution, the nonce and what each test's plan sends, never an expected value (a special judge's checker runs as a
program of its own, `build_checker_program`, after the program it judges has ended). Plans are `azr.rewards.plans`'s,
reading the lines `azr.rewards.verdicts`'s (SPEC_FUNCTIONS.md says what a deliberate attack can still forge).
"""

from __future__ import annotations

import ast
import functools
import json
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from azr.rewards.plans import TestPlan

# The program sent for each solution: the harness's sandbox side (`azr.rewards.runner`), preloaded by the worker as
# this module or else compiled from its source, given the payload (solution, nonce, what each test sends) as data.
RUNNER_MODULE = "_azr_harness"
SHIM_MODULE = "_azr_pytest"  # preloaded too: the pytest stand-in's code, compiled once per worker (about 10 ms)
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
    """What a pool preloads into its workers (`open_pool(preload=...)`) so that no program compiles the harness:
    its sandbox side, and the pytest stand-in's compiled code (each module test runs it afresh from that code)."""
    return {RUNNER_MODULE: runner_source(), SHIM_MODULE: shim_preload_source()}


@functools.cache
def shim_preload_source() -> str:
    """The preloaded module holding the pytest stand-in: its source and its code object (immutable, compiled at the
    worker's start; a program reads it before its solution loads). The modules it imports are imported by a program
    with module tests, once, before its tests fork (`runner._prepare_modules`), not by every worker: a worker that
    holds them makes every program's fork and exit slower, module tests or not (about 10% of HumanEval's grading)."""
    return f"SOURCE = {pytest_shim_source()!r}\nCODE = compile(SOURCE, '<pytest>', 'exec')\n"


def build_program(
    code: str,
    plans: Sequence[TestPlan],
    nonce: str,
    preloaded: bool = False,
    setup: str | None = None,
    case_s: float | None = None,
    prelude: str | None = None,
) -> str:
    """The harness with its payload: the solution, the nonce and what each test sends; no expected value.
    `preloaded`: for a pool whose workers preload `harness_preload()`, the program leaves out the harness's source
    (about 5 KB that every program would otherwise carry through the pipe and compile). `setup` runs after the
    solution loads; `case_s` (stdin/stdout tasks) is each case's time limit; `prelude` runs before the solution, in
    its namespace."""
    tests, modules = [], {}  # a module's source travels once, however many of its tests there are
    for plan in plans:
        sent = plan.sent()
        if plan.kind in ("pytest", "unittest"):
            sent = [modules.setdefault(sent[0], len(modules)), *sent[1:]]
        tests.append([plan.kind, sent])
    body: dict[str, Any] = {"code": code, "nonce": nonce, "tests": tests}
    if modules:
        body["modules"] = list(modules)
    if not preloaded and any(p.kind == "pytest" for p in plans):
        body["pytest_shim"] = pytest_shim_source()
    if prelude:
        body["prelude"] = prelude
    if setup:
        body["setup"] = setup
    if case_s is not None:
        body["case_s"] = case_s
    return _program(json.dumps(body), preloaded)


def build_checker_program(checker: str, cases: Sequence[tuple[str, str, str]], nonce: str, preloaded: bool) -> str:
    """A special judge's run: the checker's source and, per case, (input, expected output, the program's output);
    each case's verdict comes back on descriptor 3 as a program's tests' do."""
    body = {"checker": checker, "cases": [list(c) for c in cases], "nonce": nonce, "style": checker_style(checker)}
    return _program(json.dumps(body), preloaded)


def checker_style(source: str) -> str:
    """`function` for a checker that defines `check(input, expected, output)` at its top level, else `program` (a
    testlib-style program given the files of the input, the program's output and the expected answer)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return "function"  # fails to load in the sandbox, with its reason
    defined = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "check" for n in tree.body)
    return "function" if defined else "program"


@functools.cache
def pytest_shim_source() -> str:
    """The `pytest` stand-in that module tests import in the sandbox (`azr.rewards.pytest_shim`)."""
    return (resources.files("azr.rewards") / "pytest_shim.py").read_text(encoding="utf-8")


def _program(payload: str, preloaded: bool) -> str:
    if preloaded:
        return _PRELOADED_PROGRAM.format(module=RUNNER_MODULE, payload=payload)
    return _PROGRAM.format(module=RUNNER_MODULE, source=runner_source(), payload=payload)


def preloads_harness(pool_preload: Mapping[str, str]) -> bool:
    """Whether a pool's `preload` holds this harness (so its programs may leave the source out)."""
    return pool_preload.get(RUNNER_MODULE) == runner_source() and pool_preload.get(SHIM_MODULE) == shim_preload_source()
