"""Answers checked on a weak task's hardened cases, through the real sandbox: an answer that passes the weak test
but not the case `--harden` added is found, with the case it failed and what it gave; the reference is not; only
weak tasks' added cases are kept."""

from __future__ import annotations

import pytest

from azr.audit import check_answers, hardened_cases
from azr.data import AssertTest, StdioCase, Task
from azr.sandbox import Limits, open_pool

REFERENCE = "def f(x):\n    return x * 2\n"
HACK = "def f(x):\n    return 0\n"  # what the weak test does not rule out
WEAK = Task("weak", "Double x.", ["assert f(0) == 0"], REFERENCE)
STRONG = Task("strong", "Double x.", ["assert f(0) == 0", "assert f(2) == 4"], REFERENCE)
IO_SOLUTION = "print(int(input()) * 2)\n"
IO_WEAK = Task("io", "Double n.", [StdioCase("0\n", "0")], IO_SOLUTION)
RECORDS = {
    "weak": {"id": "weak", "kill_rate": 0.2, "probes_passed": []},
    "strong": {"id": "strong", "kill_rate": 1.0, "probes_passed": []},
    "io": {"id": "io", "kill_rate": 0.5, "probes_passed": []},
}
HARDENED = [
    Task("weak", "Double x.", [*WEAK.tests, "assert f(3) == 6"], REFERENCE),
    Task("strong", "Double x.", [*STRONG.tests, "assert f(5) == 10"], REFERENCE),  # added, yet not weak
    Task("io", "Double n.", [*IO_WEAK.tests, StdioCase("7\n", "14")], IO_SOLUTION),
]


@pytest.fixture(scope="module")
def pool():
    pool = open_pool("bwrap", workers=2)
    yield pool
    pool.close()


def test_only_weak_tasks_keep_only_the_cases_their_own_tests_lack():
    cases = hardened_cases([WEAK, STRONG, IO_WEAK], HARDENED, RECORDS, 1.0)
    assert sorted(cases) == ["io", "weak"]  # strong: kill rate 1.0 is not under 1.0
    assert cases["weak"].tests == [AssertTest("assert f(3) == 6")]
    assert cases["io"].tests == [StdioCase("7\n", "14")] and cases["io"].stdio
    assert sorted(hardened_cases([WEAK, STRONG, IO_WEAK], HARDENED, RECORDS, 0.3)) == ["weak"]


def test_a_hack_that_passes_the_weak_test_fails_the_hardened_case_and_the_reference_does_not(pool):
    cases = hardened_cases([WEAK, IO_WEAK], HARDENED, RECORDS, 1.0)
    jobs = [(cases["weak"], HACK), (cases["weak"], REFERENCE), (cases["io"], "input()\nprint(0)\n")]
    jobs.append((cases["io"], IO_SOLUTION))
    hack, reference, io_hack, io_reference = check_answers(jobs, pool, Limits(wall_s=10.0))
    assert hack.hacked and (hack.failed, hack.total) == (1, 1)
    assert hack.case == {"input": "f(3)", "expected": "6", "got": "0"}
    assert not reference.hacked and reference.status == "passed" and reference.case == {}
    assert io_hack.hacked and io_hack.case == {"input": "7\n", "expected": "14", "got": "0\n"}
    assert not io_reference.hacked


def test_a_case_of_another_shape_shows_the_graders_reason_and_long_text_is_cut(pool):
    long_list = list(range(300))
    task = Task("t", "", [f"assert f({long_list})[0] == 1"])  # not `call == value`
    (verdict,) = check_answers([(task, "def f(x):\n    return x\n")], pool, Limits(wall_s=10.0))
    assert verdict.hacked and verdict.case["expected"] == ""
    assert len(verdict.case["input"]) == 200 and verdict.case["input"].endswith("…")
    assert "AssertionError" in verdict.case["got"]
