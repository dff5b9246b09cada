"""Hardening picks oracle cases that kill survivors; a stdin task is never left with cases that one printed output
passes. Audits are built by hand here: nothing runs."""

from __future__ import annotations

from azr.audit.harden import hardened
from azr.audit.strength import OracleCase, TaskAudit
from azr.data import StdioCase, Task

SOURCE = "n = int(input())\nprint(1 if n > 4 else 0)\n"


def _case(text: str, output: str) -> OracleCase:
    return OracleCase(text, StdioCase(text, output), generated=True, value=output)


def test_a_stdin_task_whose_new_cases_expect_its_one_output_gets_a_case_with_another():
    task = Task("io", "p", [StdioCase("3\n", "0\n")], SOURCE)
    oracle = [OracleCase("3\n", task.tests[0], False, "0\n"), _case("4\n", "0\n"), _case("5\n", "1\n")]
    # the survivor `n > 3` is killed by the input 4 alone, whose output is the sample's own
    audit = TaskAudit("io", kill_rate=0.5, oracle=oracle, survivor_sources=["x"], kills=[[False, True, False]])
    (strong,), added = hardened([task], [audit], threshold=0.8)
    outputs = [t.output for t in strong.tests]
    assert outputs == ["0\n", "0\n", "1\n"] and added == {"io": 2}


def test_a_stdin_task_whose_cases_already_differ_gets_only_the_killing_cases():
    task = Task("io", "p", [StdioCase("3\n", "0\n"), StdioCase("9\n", "1\n")], SOURCE)
    oracle = [_case("4\n", "0\n"), _case("5\n", "1\n")]
    audit = TaskAudit("io", kill_rate=0.5, oracle=oracle, survivor_sources=["x"], kills=[[True, False]])
    (strong,), added = hardened([task], [audit], threshold=0.8)
    assert [t.input for t in strong.tests] == ["3\n", "9\n", "4\n"] and added == {"io": 1}
