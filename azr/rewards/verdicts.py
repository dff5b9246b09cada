"""Reading verdicts: the nonce-tagged lines the harness wrote on descriptor 3, turned into one verdict per test (None
when it passed, else why not). Lines without this run's nonce are ignored, a second line for a test fails it as
forged, and a value test's values (or a statement test's checked values) are decoded and judged here. On request,
each test's `TestOutcome` too: what the test gave the program, what it expected, what the program gave back, and
its error (what execution feedback shows).
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from azr.data import AssertTest, CallCase, ModuleTest
from azr.inputs import load_json
from azr.rewards.plans import TestPlan, ValueCheck
from azr.rewards.stdio import judge_output, ran_cleanly
from azr.rewards.values import decode_value

CHECKER_PENDING = "the checker has not judged this case"


def harness_lines(report: str, nonce: str, count: int) -> tuple[dict[int, list[tuple[str, Any]]], str | None]:
    """The lines of a report that carry `nonce`, as (kind, payload) per test index below `count`, and the program's
    load error if the harness reported one. Every other line is ignored: the program can write anything there (deep
    nesting, wrong shapes, huge lines), and a program's `\\ud800` comes back as U+FFFD. Twins' lines are not
    among them (`report_lines`)."""
    seen, load_error, _twins = report_lines(report, nonce, count)
    return seen, load_error


def report_lines(
    report: str, nonce: str, count: int
) -> tuple[dict[int, list[tuple[str, Any]]], str | None, dict[int, Any] | None]:
    """`harness_lines`, and each module test's twin line: only those written before the twin's separator (nothing
    else writes on descriptor 3 before it), the first per test; None when there is no separator."""
    seen: dict[int, list[tuple[str, Any]]] = {}
    twins: dict[int, Any] = {}
    load_error = None
    separated = False
    for line in report.splitlines():
        try:
            tag, index, kind, payload = load_json(line)
        except Exception:
            continue
        if tag != nonce or not isinstance(index, int):
            continue
        if kind == "twin" or kind == "twins_end":
            if kind == "twins_end":
                separated = True
            elif not separated and 0 <= index < count:
                twins.setdefault(index, payload)
        elif index == -1 and kind == "load_error":
            load_error = str(payload)
        elif 0 <= index < count:
            seen.setdefault(index, []).append((kind, payload))
    return seen, load_error, twins if separated else None


def read_verdicts(
    report: str, nonce: str, plans: Sequence[TestPlan], outputs: dict[int, str] | None = None
) -> list[str | None]:
    """Per test: None when it passed, else why not. Lines without the nonce are ignored; a test with more than
    one verdict fails (something other than the harness wrote one). With `outputs` (a task with a checker), a
    stdin/stdout case that ran cleanly gets `CHECKER_PENDING`, and its output goes into `outputs` for the checker's
    run."""
    seen, load_error, twins = report_lines(report, nonce, len(plans))
    twinned = any(plan.twin for plan in plans)  # then the harness ran a twin, and its separator must be there
    verdicts: list[str | None] = []
    for index, plan in enumerate(plans):
        got = seen.get(index)
        if plan.kind == "none":  # a module that collected no test, or a test that cannot be read: never a pass
            verdicts.append(NO_TESTS_RAN)
        elif load_error is not None:
            verdicts.append(f"solution failed to load: {load_error}")
        elif not got:
            verdicts.append("no verdict: the program ended or was stopped before this test finished")
        elif len(got) > 1:
            verdicts.append("more than one verdict for this test: forged")
        else:
            kind, payload = got[0]
            if plan.kind in ("pytest", "unittest") and kind == "ok":
                if twinned and twins is None:  # the twin was stopped or killed before it finished
                    verdicts.append("the test's twin never finished (no separator line): not judged")
                    continue
                payload = with_twin(payload, (twins or {}).get(index))
                if isinstance(payload, str):  # the twin ran a check more often than the program reported it
                    verdicts.append(payload)
                    continue
            verdicts.append(_judge(plan, kind, payload))
            if plan.stdio is not None and outputs is not None and kind == "stdout":
                why = ran_cleanly(payload)
                verdicts[-1] = why or CHECKER_PENDING
                if why is None:
                    outputs[index] = payload["out"]
    return verdicts


NO_CHECKER_VERDICT = "no verdict from the checker"


def read_checks(report: str, nonce: str, count: int) -> list[str | None]:
    """A checker run's verdicts, one per case it was given: None when `check` returned True."""
    seen, load_error = harness_lines(report, nonce, count)
    verdicts: list[str | None] = []
    for index in range(count):
        got = seen.get(index)
        if load_error is not None:
            verdicts.append(f"the checker failed to load: {load_error}")
        elif not got or len(got) > 1:
            verdicts.append(NO_CHECKER_VERDICT if not got else "more than one checker verdict: forged")
        elif got[0][0] == "checked":
            verdicts.append(None if got[0][1] is True else "wrong answer: the checker rejected the output")
        else:
            verdicts.append(str(got[0][1])[:500])
    return verdicts


NO_TESTS_RAN = "no tests ran"


def _judge(plan: TestPlan, kind: str, payload: Any) -> str | None:
    if kind == "error":
        return str(payload)
    if plan.kind in ("pytest", "unittest"):
        if kind == "skipped":
            return f"skipped ({str(payload)[:300]}): a skipped test is not a pass"
        return _judge_statement(plan, payload) if kind == "ok" else f"unexpected verdict {kind!r}"
    if plan.kind == "stdio":
        case = plan.stdio
        return judge_output(case, payload) if kind == "stdout" and case else f"unexpected verdict {kind!r}"
    if plan.kind == "statement":
        return _judge_statement(plan, payload) if kind == "ok" else f"unexpected verdict {kind!r}"
    if kind != "value" or not isinstance(payload, list) or len(payload) != len(plan.checks):
        return f"unexpected verdict {kind!r}"
    try:
        for check, encoded in zip(plan.checks, payload, strict=True):
            failure = check.judge(decode_value(encoded))
            if failure:
                return failure
    except Exception as exc:  # a malformed value or an impossible comparison fails this test, nothing else
        return f"{type(exc).__name__}: {exc}"[:500]
    return None


def _judge_statement(plan: TestPlan, payload: Any) -> str | None:
    """A statement test completed; its reported check values must each pass, and every top-level check report."""
    if not plan.checks:
        return None
    if not isinstance(payload, list):
        return "a statement test with checks reported no values: forged"
    seen = set()
    try:
        for site, encoded in payload:
            failure = plan.checks[site].judge(decode_value(encoded))
            if failure:
                return failure
            seen.add(site)
    except Exception as exc:  # a malformed report or an impossible comparison fails this test, nothing else
        return f"{type(exc).__name__}: {exc}"[:500]
    missing = [site for site in plan.required if site not in seen]
    return f"check {missing[0]} never reported a value: forged or skipped" if missing else None


def with_twin(payload: Any, twin: Any) -> Any:
    """A module test's reported checks with its twin's word put in: as many parametrized cases as the twin ran
    (the report's site -1, always taken out here), every pass of a countable check the twin
    vouched for must be among the program's reports (the n-th pass of a site matched with the n-th report of it),
    and each pure side the twin computed replaces what the program reported for it. A reason (str) when a pass is
    missing; the payload unchanged without a twin."""
    if not isinstance(payload, list):
        return payload
    counts = [e[1] for e in payload if isinstance(e, list) and len(e) == 2 and e[0] == -1]
    payload = [e for e in payload if not (isinstance(e, list) and len(e) == 2 and e[0] == -1)]
    if not isinstance(twin, dict) or not isinstance(twin.get("checks"), list):
        return payload
    cases = twin.get("cases")
    if isinstance(cases, int) and counts != [cases]:
        got = counts[0] if len(counts) == 1 else counts
        return f"the test runs {cases} parametrized case(s) without the solution but {got} with it"
    reports: dict[int, list[int]] = {}
    for position, entry in enumerate(payload):
        if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], int):
            reports.setdefault(entry[0], []).append(position)
    merged = list(payload)
    passes: dict[int, int] = {}
    for entry in twin["checks"]:
        if not (isinstance(entry, list) and len(entry) == 4 and isinstance(entry[0], int)):
            continue
        site, left, right, vouched = entry
        n = passes[site] = passes.get(site, -1) + 1
        if vouched is not True:
            continue
        found = reports.get(site, [])
        if n >= len(found):
            ran = sum(1 for e in twin["checks"] if isinstance(e, list) and e and e[0] == site and e[-1] is True)
            return (
                f"check {site} ran {ran} time(s) without the solution but was reported {len(found)} time(s) "
                "with it: forged or skipped"
            )
        if left is None and right is None:
            continue
        at = found[n]
        reported = merged[at][1]
        if not (isinstance(reported, list) and len(reported) == 2 and reported[0] == "t" and len(reported[1]) == 3):
            continue  # not a pair's report: judged as it is (and fails)
        sides = list(reported[1])
        if left is not None:
            sides[0] = left
        if right is not None:
            sides[1] = right
        merged[at] = [site, ["t", sides]]
    return merged


TIMEOUT = "timeout"


@dataclass(frozen=True)
class TestOutcome:
    """One test as the program met it: `input` (its stdin, or the call or statement it ran), `expected` (the output
    or value it wanted; None where a statement says it only by passing), `actual` (the program's stdout, or the
    repr of the value it gave; None where it gave none), `error` (the last line of its exception, or "timeout");
    `why` is the verdict (None: passed). Texts are whole: whoever shows them cuts them."""

    __test__ = False  # not a pytest test class

    why: str | None
    input: str
    expected: str | None = None
    actual: str | None = None
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.why is None


def read_outcomes(
    report: str, nonce: str, plans: Sequence[TestPlan], verdicts: Sequence[str | None], timed_out: bool
) -> list[TestOutcome]:
    """Each test's outcome, beside its verdict (`read_verdicts`, checker verdicts applied). `timed_out`: the program
    ran past its wall clock, so a test left without a report ran out of time."""
    seen, load_error, twins = report_lines(report, nonce, len(plans))
    outcomes = []
    for index, (plan, why) in enumerate(zip(plans, verdicts, strict=True)):
        got = seen.get(index)
        line = got[0] if got and len(got) == 1 else None
        if line is None or load_error is not None:
            missing = TIMEOUT if timed_out and load_error is None else _error_line(load_error or why)
            outcomes.append(_shown(plan, why, None, missing))
        elif plan.kind == "stdio":
            outcomes.append(_case_outcome(plan, why, line))
        else:
            kind, payload = line
            if plan.kind in ("pytest", "unittest") and kind == "ok":
                payload = with_twin(payload, (twins or {}).get(index))
            outcomes.append(_checked_outcome(plan, why, kind, payload))
    return outcomes


def _case_outcome(plan: TestPlan, why: str | None, line: tuple[str, Any]) -> TestOutcome:
    case = plan.stdio
    kind, report = line
    if case is None or kind != "stdout" or not isinstance(report, dict):
        return _shown(plan, why, None, _error_line(why))
    actual = report.get("out") if isinstance(report.get("out"), str) else None
    error = None
    if report.get("timeout"):
        error = TIMEOUT
    elif report.get("exit") != 0 or report.get("cut"):
        error = report.get("error") if isinstance(report.get("error"), str) and report.get("error") else None
        error = error or _error_line(ran_cleanly(report))
    return TestOutcome(why, case.input, case.output, actual, error)


def _checked_outcome(plan: TestPlan, why: str | None, kind: str, payload: Any) -> TestOutcome:
    """A value, statement or module test: the failing check's call, wanted and given values where a check failed;
    else the test itself with its error."""
    if kind == "error":
        return _shown(plan, why, None, _error_line(str(payload)))
    values: list[tuple[ValueCheck, Any]] = []
    if plan.kind == "value" and isinstance(payload, list) and len(payload) == len(plan.checks):
        values = list(zip(plan.checks, payload, strict=True))
    elif isinstance(payload, list):  # a statement or module test's reported checks: [site, value] each
        for entry in payload:
            site = entry[0] if isinstance(entry, list) and len(entry) == 2 else None
            if isinstance(site, int) and 0 <= site < len(plan.checks):
                values.append((plan.checks[site], entry[1]))
    for check, encoded in values:
        try:
            value = decode_value(encoded)
            if check.judge(value) is None and why is not None:
                continue  # this check held: the failing one comes later
        except Exception:  # a malformed value or an impossible comparison: shown by the verdict alone
            continue
        return _value_outcome(plan, why, check, value)
    return _shown(plan, why, None, _error_line(why))


def _value_outcome(plan: TestPlan, why: str | None, check: ValueCheck, value: Any) -> TestOutcome:
    """A check that compared a value: no exception, so no error; the value given and the one wanted."""
    if check.op.startswith("pair"):  # a module test's `A == B`: A is the program's side, B the wanted one
        with contextlib.suppress(Exception):
            return TestOutcome(why, check.expr, repr(value[1]), repr(value[0]))
    with contextlib.suppress(Exception):
        value = _WRAPPED[check.wrap](value) if check.wrap else value
    if plan.kind == "value":
        shown = _call_shown(plan) or _expr(check)
    elif plan.kind == "statement" and isinstance(_node(check.expr), ast.Call):
        shown = _expr(check)  # the call that gave the value (HumanEval's `f(...)` inside its check), not the module
    else:
        shown = _test_source(plan)
    return TestOutcome(why, shown, _wanted(check), repr(value))


def _node(expr: str) -> ast.expr | None:
    try:
        return ast.parse(expr, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _expr(check: ValueCheck) -> str:
    return f"{check.wrap}({check.expr})" if check.wrap else check.expr


_WRAPPED = {"list": list, "tuple": tuple, "sorted": sorted, "set": set, "frozenset": frozenset}


def _wanted(check: ValueCheck) -> str:
    if check.op in ("==", "json"):
        return repr(check.expected)
    if check.op in ("truthy", "falsy"):
        return "a true value" if check.op == "truthy" else "a false value"
    return f"a value {check.op} {check.expected!r}"


def _shown(plan: TestPlan, why: str | None, actual: str | None, error: str | None) -> TestOutcome:
    """A test shown as what it runs (its stdin, call, statement or test function), with the error it met."""
    case = plan.stdio
    if case is not None:
        return TestOutcome(why, case.input, case.output, actual, error)
    if plan.kind == "value" and plan.checks:
        check = plan.checks[0]
        shown = _call_shown(plan) or _expr(check)
        return TestOutcome(why, shown, _wanted(check), actual, error if why is not None else None)
    return TestOutcome(why, _test_source(plan), None, actual, error if why is not None else None)


def _test_source(plan: TestPlan) -> str:
    """A statement test as written, or a module test's function as its module has it."""
    test = plan.origin
    if isinstance(test, ModuleTest):
        return _function_source(test.module, plan.test)
    return (test.source if isinstance(test, AssertTest) else plan.source).strip()


def _call_shown(plan: TestPlan) -> str | None:
    """A call case as its call reads (`f(1, [2])`, `Solution.f(1)`), not as the harness evaluates it."""
    case = plan.origin
    if not isinstance(case, CallCase):
        return None
    pieces = [repr(a) for a in case.args] + [f"{k}={v!r}" for k, v in case.kwargs.items()]
    return f"{case.call}({', '.join(pieces)})"


def _function_source(module: str, test: str) -> str:
    """The source of test `test` (`test_f`, `Cls::test_m`, `Cls.test_m`) in a module; the name where not found."""
    name = test.replace("::", ".").split(".")[-1]
    with contextlib.suppress(SyntaxError, ValueError, RecursionError, MemoryError):
        for node in ast.walk(ast.parse(module)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                return ast.get_source_segment(module, node) or test
    return test


def _error_line(text: str | None) -> str | None:
    """An exception as the harness reported it, `Type: message`, to the end of its first line: a traceback's last
    line (`ZeroDivisionError: division by zero`)."""
    if not text:
        return None
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else None
