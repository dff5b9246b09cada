"""Forging module tests, in the real bwrap sandbox: a program that writes passing reports instead of passing, or that
patches a standard module at load so the test checks less. Module tests run each test first in a twin that never
loads the solution, and the solution's process has no descriptor 3 (SPEC_FUNCTIONS.md section 5), so these fail;
what still holds for the program is pinned by strict xfails.
"""

from __future__ import annotations

import pytest

from azr.data import task_from_row
from azr.rewards.grading import grade_many
from azr.rewards.harness import harness_preload
from azr.sandbox import Limits, open_pool

QUICK = Limits(wall_s=10.0)

# KodCode's shape: the expected value bound to a name, compared with `==`.
KODCODE = """
from solution import max_subarray

def test_mixed():
    result = max_subarray([-2, 1, -3, 4, -1, 2, 1, -5, 4])
    expected = 6
    assert result == expected

def test_all_negative():
    result = max_subarray([-3, -1, -2])
    expected = -1
    assert result == expected

def test_cases():
    for nums, want in [([1], 1), ([5, -1, 5], 9)]:
        assert max_subarray(nums) == want
"""
KADANE = (
    "def max_subarray(nums):\n    best = cur = nums[0]\n    for x in nums[1:]:\n"
    "        cur = max(x, cur + x)\n        best = max(best, cur)\n    return best\n"
)
# BigCodeBench's shape: a unittest TestCase comparing the function's result with an expected value it built.
BIGCODEBENCH = """
import unittest

class TestCases(unittest.TestCase):
    def test_case_1(self):
        result = task_func("a b a c")
        expected = {"a": 2, "b": 1, "c": 1}
        self.assertEqual(result, expected)

    def test_case_2(self):
        result = task_func("")
        expected = {}
        self.assertEqual(result, expected)
"""
WORD_COUNT = "import collections\ndef task_func(text):\n    return dict(collections.Counter(text.split()))\n"

# At load: find the harness's payload through the frames, write one passing line per test on descriptor 3, with
# equal sides for every `A == B` it reports (and the rewritten sites' value for every other check, and one case
# run), then end as the harness would.
FRAME_WALK = """
import json, os, re, sys
frame, P = sys._getframe(1), None
while frame is not None and P is None:
    P = next((v for v in frame.f_locals.values() if isinstance(v, dict) and "nonce" in v and "tests" in v), None)
    frame = frame.f_back
lines = []
for i, (kind, sent) in enumerate(P["tests"]):
    module = P["modules"][sent[0]]
    sites = sorted({int(k) for k in re.findall(r"__azr_(?:check|pair)__\\((\\d+)", module)})
    same = ["t", [["i", "0"], ["i", "0"], ["b", True]]]
    counted = kind == "pytest" and "__azr_pair__" in module  # a harness that counts cases: say one ran
    seen = [[k, same] for k in sites for _ in range(3)] + ([[-1, 1]] if counted else [])
    lines.append(json.dumps([P["nonce"], i, "ok", seen]))
os.write(3, ("\\n".join(lines) + "\\n\\x00end\\n").encode())  # and the end, as the harness says it
os.close(3)
try:
    os.wait()  # for the twin, if there is one, to copy the lines
except ChildProcessError:
    pass
os._exit(0)
"""


@pytest.fixture(scope="module")
def pool():
    with open_pool("bwrap", workers=2, preload=harness_preload()) as p:
        yield p


def task(tests, **fields):
    return task_from_row({"id": "t", "prompt": "p", "tests": tests, **fields}, "row")


def grades(pool, pairs):
    return grade_many(pairs, pool, QUICK)


def test_a_frame_walk_forgery_fails_a_kodcode_style_pytest_module(pool):
    t = task([{"pytest": KODCODE}])
    right, forged, wrong = grades(pool, [(t, KADANE), (t, FRAME_WALK), (t, KADANE.replace("nums[0]", "0"))])
    assert right.passed, right.failures
    assert forged.tests_passed == 0, forged.failures
    assert wrong.tests_passed < wrong.tests_total


def test_a_frame_walk_forgery_fails_a_bigcodebench_style_unittest_module(pool):
    t = task([{"unittest": BIGCODEBENCH}])
    right, forged = grades(pool, [(t, WORD_COUNT), (t, FRAME_WALK)])
    assert right.passed, right.failures
    assert forged.tests_passed == 0, forged.failures


def test_the_solution_cannot_reach_the_report_file(pool):
    """Its own descriptor 3 is a pipe to the twin, and no other process's descriptors (the twin's, the worker's) can
    be opened: none is dumpable."""
    probe = (
        "import os, stat\n"
        "assert stat.S_ISFIFO(os.fstat(3).st_mode)\n"
        "for pid in [p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]:\n"
        "    try:\n        fds = os.listdir(f'/proc/{pid}/fd')\n    except OSError:\n        continue\n"
        "    for fd in [fd for fd in fds if fd == '3']:\n"
        "        try:\n            f = os.open(f'/proc/{pid}/fd/{fd}', os.O_WRONLY)\n        except OSError:\n"
        "            continue\n"
        "        if stat.S_ISREG(os.fstat(f).st_mode):\n            raise SystemExit(f'reached {pid}/{fd}')\n"
        "        os.close(f)\n" + KADANE
    )
    g = grades(pool, [(task([{"pytest": KODCODE}]), probe)])[0]
    assert g.passed, g.failures


KILL_THE_TWIN = (
    "import os, signal\n"
    "for pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
    "    try:\n        stat = open(f'/proc/{pid}/stat').read()\n    except OSError:\n        continue\n"
    "    if int(stat[stat.rfind(')') + 2 :].split()[1]) == os.getpid():\n"
    "        os.kill(int(pid), signal.SIGKILL)\n"
) + FRAME_WALK


def test_killing_the_twin_passes_no_module_test(pool):
    """Without the twin's separator line nothing vouches for a module test, so none passes."""
    t = task([{"pytest": KODCODE}])
    assert grades(pool, [(t, KILL_THE_TWIN)])[0].tests_passed == 0


def test_signals_to_the_twin_do_not_cut_it_short(pool):
    """The solution's process may signal the twin: an interrupt is ignored and a timer signal before the test's
    time is up changes nothing, so the twin still vouches for every check."""
    signal_it = KILL_THE_TWIN.replace(
        "os.kill(int(pid), signal.SIGKILL)",
        "for _ in range(50):\n"
        "            os.kill(int(pid), signal.SIGINT)\n            os.kill(int(pid), signal.SIGALRM)",
    )
    assert signal_it != KILL_THE_TWIN
    t = task([{"pytest": KODCODE}])
    assert grades(pool, [(t, signal_it)])[0].tests_passed == 0


@pytest.mark.xfail(
    strict=True,
    reason="known gap: a test whose twin runs past its time (1 s each, 2 s for all) has no twin line, and then its "
    "checks are the program's word",
)
def test_a_forged_report_fails_even_where_the_twin_ran_out_of_time(pool):
    slow = "import time\nfrom solution import total\n" + "".join(
        f"def test_{i}():\n    time.sleep(1.1)\n    expected = 6\n    assert total([1, 2, 3]) == expected\n"
        for i in range(3)
    )
    assert grades(pool, [(task([{"pytest": slow}]), FRAME_WALK)])[0].tests_passed == 0


PARAMETRIZED = """
import itertools
import pytest
from solution import add

CASES = list(itertools.combinations(range(4), 2))

@pytest.mark.parametrize("a, b", CASES)
def test_add(a, b):
    assert abs(add(a, b) - (a + b)) < 1e-9
"""


@pytest.mark.parametrize(
    "patch",
    ["lambda *a, **k: iter(())", "lambda *a, **k: iter([(0, 0)])"],
    ids=["no cases", "one easy case"],
)
def test_a_load_time_patch_of_a_standard_module_does_not_shrink_the_tests(pool, patch):
    cheat = f"import itertools\nitertools.combinations = {patch}\ndef add(a, b):\n    return 0\n"
    t = task([{"pytest": PARAMETRIZED}])
    right, cheated = grades(pool, [(t, "def add(a, b):\n    return a + b\n"), (t, cheat)])
    assert right.passed, right.failures
    assert cheated.tests_passed == 0, cheated.failures


@pytest.mark.xfail(
    strict=True,
    reason="known gap: the solution runs in the test's process, so a function may read its caller's frame (or the "
    "test's source) and return the expected value it finds there",
)
def test_a_solution_that_reads_its_callers_expected_value_fails(pool):
    module = (
        "from solution import total\n"
        "def test_sum():\n    expected = 6\n    result = total([1, 2, 3])\n    assert result == expected\n"
    )
    peek = "import sys\ndef total(xs):\n    return sys._getframe(1).f_locals['expected']\n"
    assert grades(pool, [(task([{"pytest": module}]), peek)])[0].tests_passed == 0


@pytest.mark.xfail(
    strict=True,
    reason="known gap: a check the twin cannot count (inside an `if`, a `while`, a `try` or a `with`, or in a test "
    "that returns early) may be left out of a forged report",
)
def test_a_forged_report_without_a_check_inside_a_branch_fails(pool):
    module = (
        "from solution import total\n"
        "def test_sum():\n    expected = 6\n    if expected:\n        assert total([1, 2, 3]) == expected\n"
    )
    assert grades(pool, [(task([{"pytest": module}]), FRAME_WALK)])[0].tests_passed == 0


@pytest.mark.xfail(
    strict=True,
    reason="known gap: where the expected side is not pure (it reads a file, an object, a value handed to the "
    "solution, or anything the twin cannot vouch for), the comparison's sides are the program's word",
)
def test_a_forged_report_against_a_computed_expected_value_fails(pool):
    module = (
        "import json\nfrom solution import total\n"
        "def test_sum():\n    expected = json.loads('6')\n    assert total([1, 2, 3]) == expected\n"
    )
    assert grades(pool, [(task([{"pytest": module}]), FRAME_WALK)])[0].tests_passed == 0


# Shapes where the twin's run differs from the program's (values handed to the solution and changed there, fixtures
# that differ per run, callbacks, state the solution keeps, files the test makes): a right program passes each.
HONEST = """
import os, random
import pytest
from solution import sort_in_place, where, apply, record, total

STATE = []

def test_in_place():
    nums = [3, 1, 2]
    expected = [1, 2, 3]
    sort_in_place(nums)
    assert nums == expected
    assert len(nums) == 3

def test_fixture_path(tmp_path):
    assert where(tmp_path) == str(tmp_path / "out")

def test_callback():
    seen = []
    apply(lambda x: seen.append(x), [1, 2])
    assert seen == [1, 2]

def test_module_state():
    record(STATE)
    assert STATE == [1]

def test_random():
    data = [random.random() for _ in range(3)]
    assert total(data) == sum(data)

def test_makes_a_folder():
    os.mkdir("made_by_the_test")  # the twin runs this test too, in a folder of its own
    assert total([1]) == 1

@pytest.mark.parametrize("n, want", [(1, 1), (2, 3)])
def test_params(n, want):
    out = total(range(n + 1))
    assert out == want
"""
HONEST_SOLUTION = """
import os
def sort_in_place(xs):
    xs.sort()
def where(path):
    return os.path.join(str(path), "out")
def apply(f, xs):
    for x in xs:
        f(x)
def record(state):
    state.append(1)
def total(xs):
    return sum(xs)
"""


def test_a_right_program_passes_where_the_twin_cannot_vouch(pool):
    t = task([{"pytest": HONEST}])
    right, wrong = grades(pool, [(t, HONEST_SOLUTION), (t, HONEST_SOLUTION.replace("return sum(xs)", "return 0"))])
    assert right.passed, right.failures
    assert wrong.tests_passed == len(t.tests) - 4, wrong.failures  # total is wrong: its four tests fail


@pytest.mark.parametrize(
    ("body", "vouched"),
    [
        ("expected = [1, 2]\n    assert f(1) == expected", True),
        ("expected = sorted([2, 1]) + [len('ab')]\n    assert f(1) == expected", True),
        ("expected = []\n    expected.append(3)\n    assert f(1) == expected", True),
        ("expected = [1]\n    f(expected)\n    assert f(1) == expected", False),  # handed to the solution
        ("expected = open('x').read()\n    assert f(1) == expected", False),  # read from a file
        ("expected = f(0)\n    assert f(1) == expected", False),  # the solution's value
        (
            "try:\n        expected = 1\n    except ValueError:\n        expected = 2\n    assert f(1) == expected",
            False,
        ),
        ("import random\n    expected = random.random()\n    assert f(1) == expected", False),
        ("assert f(1) == str(tmp_path)", False),  # a fixture differs between the twin and the program's run
    ],
)
def test_what_the_twin_may_vouch_for(body, vouched):
    from azr.rewards.plans import instrumented_module

    program = instrumented_module(f"from solution import f\ndef test_a(tmp_path):\n    {body}\n").program
    assert "__azr_pair__(" in program
    assert program.rstrip().endswith("None)") is not vouched, program


def test_a_load_time_patch_of_a_standard_module_is_undone_before_the_test(pool):
    """`math.isclose` patched at load cannot pass a test that compares inside (a check the twin does not see); a
    name a solution adds to a standard module (a compatibility shim) stays."""
    module = (
        "import math\nfrom solution import area\n"
        "def test_area():\n    assert math.isclose(area(2.0), 12.566, rel_tol=1e-3)\n"
    )
    cheat = "import math\nmath.isclose = lambda *a, **k: True\ndef area(r):\n    return 0.0\n"
    shim = (
        "import math, fractions\nfractions.gcd = math.gcd\n"
        "def area(r):\n    return fractions.gcd(4, 2) * 0 + math.pi * r * r\n"
    )
    t = task([{"pytest": module}])
    cheated, shimmed = grades(pool, [(t, cheat), (t, shim)])
    assert cheated.tests_passed == 0, cheated.failures
    assert shimmed.passed, shimmed.failures
