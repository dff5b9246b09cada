"""Reading verdicts: the nonce-tagged lines the harness wrote on descriptor 3, turned into one verdict per test (None
when it passed, else why not). Lines without this run's nonce are ignored, a second line for a test fails it as
forged, and a value test's values (or a statement test's checked values) are decoded and judged here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from azr.inputs import load_json
from azr.rewards.plans import TestPlan
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
