"""Every test kind a task row may hold, graded in the real sandbox on rows of our own making: pytest-style and
unittest-style modules (one test per collected test), class-method calls, special judges, preludes and float
tolerances; and for each kind the wrong programs that must fail: another task's solution, one operator changed, a
program that defines nothing, exits at import or inside the function, and one that tampers with the test module,
pytest, unittest or the builtins before the tests run.

Every test uses one module-wide `bwrap` pool whose workers preload the harness, as training's do.
"""

from __future__ import annotations

import pytest

from azr.data import task_from_row
from azr.rewards.grading import grade_many
from azr.rewards.harness import harness_preload
from azr.sandbox import Limits, open_pool

QUICK = Limits(wall_s=5.0)

PYTEST_MODULE = """
import pytest
from solution import add

def test_small():
    assert add(1, 2) == 3

def test_against_a_name():
    expected = 10
    assert add(4, 6) == expected

class TestAdd:
    def setup_method(self, method):
        self.base = 100

    def test_negative(self):
        assert add(-1, -2) == -3

    def test_setup_ran(self):
        assert add(self.base, 1) == 101

@pytest.mark.parametrize("a, b, total", [(1, 1, 2), (2, 3, 5), (0, 0, 0)])
def test_cases(a, b, total):
    assert add(a, b) == total

@pytest.fixture
def pair():
    return (20, 22)

def test_fixtures(pair, tmp_path, capsys, monkeypatch):
    (tmp_path / "note.txt").write_text("x")
    print(add(*pair))
    assert capsys.readouterr().out == "42\\n"
    monkeypatch.setenv("AZR_TEST", "1")
    with pytest.raises(TypeError, match="unsupported|must be"):
        add(1, "x")
    assert add(0.1, 0.2) == pytest.approx(0.3)
"""
UNITTEST_MODULE = """
import unittest

class TestCases(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.shared = 7

    def setUp(self):
        self.x = 2

    def test_setup(self):
        self.assertEqual(add(self.x, self.shared), 9)

    def test_names(self):
        expected = [3, 4]
        self.assertEqual([add(1, 2), add(2, 2)], expected)

    def test_raises(self):
        with self.assertRaises(TypeError):
            add(1, "x")
"""
ADD = "def add(a, b):\n    return a + b\n"
OTHER_TASK = "def add(a, b):\n    return a * b\n"  # a solution of another task, with the same name
ONE_OPERATOR = "def add(a, b):\n    return a - b\n"
WRONG = {
    "another task's solution": OTHER_TASK,
    "one operator changed": ONE_OPERATOR,
    "defines nothing": "x = 1\n",
    "empty": "",
    "sys.exit(0) at import": "import sys\nsys.exit(0)\n",
    "os._exit(0) at import": "import os\nos._exit(0)\n",
    "sys.exit(0) in the function": "import sys\ndef add(a, b):\n    sys.exit(0)\n",
    "os._exit(0) in the function": "import os\ndef add(a, b):\n    os._exit(0)\n",
    "always-equal result": (
        "class A:\n    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return A()\n"
    ),
    "a fake pytest in sys.modules": (
        "import sys, types\nfake = types.ModuleType('pytest')\nfake.raises = lambda *a, **k: None\n"
        "fake.approx = lambda *a, **k: True\nfake.fixture = lambda f=None, **k: f\nsys.modules['pytest'] = fake\n"
        + ONE_OPERATOR
    ),
    "unittest patched": (
        "import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\n"
        "unittest.TestCase.assertRaises = lambda *a, **k: __import__('contextlib').suppress(Exception)\n" + ONE_OPERATOR
    ),
    "unittest's code patched": (
        "import unittest\nunittest.TestCase.assertEqual.__code__ = (lambda *a, **k: None).__code__\n" + ONE_OPERATOR
    ),
    "builtins patched": (
        "import builtins\nreal = builtins.__import__\n"
        "def fake(name, *a, **k):\n    m = real(name, *a, **k)\n"
        "    if name == 'solution':\n        m.add = lambda a, b: a + b if isinstance(a, int) else 0\n    return m\n"
        "builtins.__import__ = fake\n" + ONE_OPERATOR
    ),
    "the test module's names taken": "test_small = test_cases = lambda *a, **k: None\nTestCases = object\n"
    + ONE_OPERATOR,
}


@pytest.fixture(scope="module")
def pool():
    with open_pool("bwrap", workers=2, preload=harness_preload()) as p:
        yield p


def task(tests, **fields):
    return task_from_row({"id": "t", "prompt": "p", "tests": tests, **fields}, "row")


def grades(pool, pairs):
    return grade_many(pairs, pool, QUICK)


# --------------------------------------------------------------------------------------------------- pytest style
def test_a_pytest_module_is_one_test_per_collected_test(pool):
    t = task([{"pytest": PYTEST_MODULE}])
    assert len(t.tests) == 8  # 3 functions, 2 methods, 3 parametrized cases
    g = grades(pool, [(t, ADD)])[0]
    assert (g.status, g.tests_passed, g.tests_total) == ("passed", 8, 8), g.failures


def test_each_parametrized_case_counts_for_partial_credit(pool):
    t = task([{"pytest": PYTEST_MODULE}])
    g = grades(pool, [(t, "def add(a, b):\n    return 0 if a == b == 0 else a - b + 2 * b * (a != 1)\n")])[0]
    assert 0 < g.tests_passed < g.tests_total
    assert g.per_test[6] is True  # the (0, 0, 0) case alone


@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_programs_fail_a_pytest_module(pool, name):
    t = task([{"pytest": PYTEST_MODULE}])
    g = grades(pool, [(t, WRONG[name])])[0]
    assert not g.passed
    # nothing but what a wrong answer earns honestly: the (0, 0, 0) case and the TypeError for add(1, "x")
    assert g.tests_passed <= 2, (name, g.per_test, g.failures)


def test_a_right_answer_whose_values_are_100_000_characters_long_passes(pool):
    """KodCode's large-input tests build their values as they run (`"a" * 100_000`): each check reports both sides
    and the twin its pure one, far more than the module's own text, and none may be cut off the report channel."""
    module = "from solution import *\n" + "".join(
        f"\ndef test_large_{c}():\n    s = {c!r} * 100_000\n    assert echo(s) == {c!r} * 100_000\n" for c in "abcdef"
    )
    t = task([{"pytest": module}])
    right, wrong = "def echo(s):\n    return s\n", "def echo(s):\n    return s[:-1]\n"
    g, bad = grades(pool, [(t, right), (t, wrong)])
    assert (g.status, g.tests_passed, g.tests_total) == ("passed", 6, 6), g.failures
    assert (bad.status, bad.tests_passed) == ("failed", 0)


def test_a_plain_string_that_only_defines_tests_is_read_as_a_module(pool):
    t = task(PYTEST_MODULE)  # as a column map would give it: one string
    assert len(t.tests) == 8
    assert [g.tests_passed for g in grades(pool, [(t, ADD), (t, OTHER_TASK)])] == [8, 1]


def test_the_solution_of_a_module_test_is_imported_not_run_as_main(pool):
    t = task([{"pytest": "from solution import add\ndef test_a():\n    assert add(1, 2) == 3\n"}])
    main = ADD + "if __name__ == '__main__':\n    print(add(int(input()), 1))\n"  # would fail on empty stdin
    assert grades(pool, [(t, main)])[0].passed


def test_a_module_with_no_tests_never_passes(pool):
    t = task([{"pytest": "from solution import add\nassert add(1, 2) == 3\n"}])
    g = grades(pool, [(t, ADD)])[0]
    assert (g.status, g.tests_total, g.failures) == ("failed", 1, ["test 0: no tests ran"])


def test_a_skipped_test_is_not_a_pass(pool):
    module = "import pytest\n@pytest.mark.skip(reason='later')\ndef test_a():\n    pass\n"
    module += "def test_b():\n    pytest.skip('no')\n"
    g = grades(pool, [(task([{"pytest": module}]), ADD)])[0]
    assert g.tests_passed == 0 and all("skipped" in f for f in g.failures)


# ------------------------------------------------------------------------------------------------- unittest style
def test_a_unittest_module_is_one_test_per_method(pool):
    t = task([{"unittest": UNITTEST_MODULE}])
    assert len(t.tests) == 3
    g = grades(pool, [(t, ADD)])[0]
    assert (g.status, g.tests_passed) == ("passed", 3), g.failures


@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_programs_fail_a_unittest_module(pool, name):
    t = task([{"unittest": UNITTEST_MODULE}])
    g = grades(pool, [(t, WRONG[name])])[0]
    assert g.tests_passed <= 1, (name, g.per_test, g.failures)  # the TypeError test alone may pass


def test_a_bigcodebench_style_test_string_runs_its_test_cases(pool):
    t = task(
        "import unittest\nclass TestCases(unittest.TestCase):\n    def test_one(self):\n"
        "        self.assertEqual(task_func(2), 4)\n    def test_two(self):\n"
        "        self.assertTrue(task_func(0) == 0)\n"
    )
    right, wrong = "def task_func(x):\n    return x * 2\n", "def task_func(x):\n    return x + 3\n"
    assert [g.tests_passed for g in grades(pool, [(t, right), (t, wrong)])] == [2, 0]


# ------------------------------------------------------------------------------------------- calls and tolerances
def test_class_method_calls_get_a_fresh_instance_and_json_equality(pool):
    t = task(
        [{"args": [[2, 7, 11], 9], "output": [0, 1]}, {"args": [[3, 3], 6], "output": [0, 1]}],
        entry_point="Solution.twoSum",
        prelude="from typing import List",
    )
    right = (
        "class Solution:\n    def __init__(self):\n        self.calls = 0\n"
        "    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        self.calls += 1\n"
        "        assert self.calls == 1\n        seen = {}\n        for i, n in enumerate(nums):\n"
        "            if target - n in seen:\n                return (seen[target - n], i)\n            seen[n] = i\n"
    )
    g = grades(pool, [(t, right), (t, right.replace("(seen[target - n], i)", "(i, seen[target - n])"))])
    assert [x.tests_passed for x in g] == [2, 0], g[0].failures


def test_tolerance_per_case_and_per_task(pool):
    close = "def area(r):\n    return 3.14159 * r * r\n"
    t = task(
        [{"args": [1], "output": 3.141592653589793}, {"args": [2], "output": 12.566370614359172, "atol": 0}],
        entry_point="area",
        rtol=1e-4,
    )
    exact = task([{"args": [1], "output": 3.141592653589793}], entry_point="area")
    asserts = task(["assert area(1) == 3.141592653589793", "assert abs(area(1)) > 3"], atol=1e-3)
    g = grades(pool, [(t, close), (exact, close), (asserts, close), (asserts, "def area(r):\n    return 3.0\n")])
    assert [x.tests_passed for x in g] == [2, 0, 2, 0]  # atol 0 in a case: the task's rtol still applies


def test_a_prelude_runs_before_the_solution(pool):
    t = task(["assert f([1, 2]) == 2"], prelude="from collections import Counter\nfrom typing import List")
    g = grades(pool, [(t, "def f(xs: List[int]) -> int:\n    return len(Counter(xs))\n")])[0]
    assert g.passed, g.failures


# ------------------------------------------------------------------------------------------------- special judge
CHECKER = "def check(input, expected, output):\n    a, b = map(int, output.split())\n    return a + b == int(input)\n"


def test_a_checker_accepts_any_valid_answer_and_runs_in_the_sandbox(pool):
    t = task([{"input": "5\n", "output": "2 3\n"}, {"input": "8\n", "output": "4 4\n"}], checker=CHECKER)
    answers = {
        "another valid answer": "n = int(input())\nprint(1, n - 1)\n",
        "wrong": "n = int(input())\nprint(1, n)\n",
        "the expected text": "print('2 3')\n",
        "a crash": "raise ValueError('nope')\n",
    }
    g = grades(pool, [(t, code) for code in answers.values()])
    assert [x.tests_passed for x in g] == [2, 0, 1, 0]
    assert "rejected" in g[1].failures[0] and "ValueError: nope" in g[3].failures[0]


def test_a_checker_that_fails_rejects_and_cannot_read_the_host(pool):
    broken = task(
        [{"input": "1\n", "output": "1\n"}],
        checker="def check(i, e, o):\n    return open('/etc/passwd').read() != ''\n",
    )
    g = grades(pool, [(broken, "print(1)\n")])[0]
    assert not g.passed and "checker" in g.failures[0]


# ----------------------------------------------------------------------------------------------- stdin programs
def test_a_runtime_error_shows_the_exception(pool):
    t = task([{"input": "1\n", "output": "1\n"}])
    g = grades(pool, [(t, "x = int(input())\nraise KeyError('missing')\n")])[0]
    assert g.failures[0] == "test 0: runtime error (exit 1): KeyError: 'missing'"


CALL_WRONG = {
    "another task's solution": "class Solution:\n    def twoSum(self, nums, t):\n        return sorted(nums)[:2]\n",
    "one operator changed": (
        "class Solution:\n    def twoSum(self, nums, target):\n        for i in range(len(nums)):\n"
        "            for j in range(i + 1, len(nums)):\n                if nums[i] - nums[j] == target:\n"
        "                    return [i, j]\n"
    ),
    "defines nothing": "",
    "a function, not the class": "def twoSum(nums, target):\n    return [0, 1]\n",
    "sys.exit(0) at import": "import sys\nsys.exit(0)\n",
    "os._exit(0) in the method": "import os\nclass Solution:\n    def twoSum(self, nums, t):\n        os._exit(0)\n",
    "SystemExit in the method": "class Solution:\n    def twoSum(self, nums, target):\n        raise SystemExit(0)\n",
    "always-equal result": (
        "class A(list):\n    def __eq__(self, other):\n        return True\n"
        "class Solution:\n    def twoSum(self, nums, target):\n        return A()\n"
    ),
}


@pytest.mark.parametrize("name", list(CALL_WRONG))
def test_wrong_programs_fail_class_method_calls(pool, name):
    t = task([{"args": [[2, 7, 11], 9], "output": [0, 1]}], entry_point="Solution.twoSum")
    g = grades(pool, [(t, CALL_WRONG[name])])[0]
    assert g.tests_passed == 0, (name, g.failures)


CHECKER_WRONG = {
    "sys.exit(0) before printing": "import sys\nsys.exit(0)\n",
    "os._exit(0) after printing": "import os\nn = int(input())\nprint(1, n - 1, flush=True)\nos._exit(3)\n",
    "prints harness-looking text": "print('True')\nprint('[\"nonce\", 0, \"checked\", true]')\n",
    "one operator changed": "n = int(input())\nprint(1, n + 1)\n",
    "defines nothing": "",
}


@pytest.mark.parametrize("name", list(CHECKER_WRONG))
def test_wrong_programs_fail_a_special_judge(pool, name):
    t = task([{"input": "5\n", "output": "2 3\n"}], checker=CHECKER)
    g = grades(pool, [(t, CHECKER_WRONG[name])])[0]
    assert g.tests_passed == 0, (name, g.failures)


TESTLIB_CHECKER = """
import sys
data, output, answer = (open(name).read() for name in sys.argv[1:4])
try:
    a, b = map(int, output.split())
except ValueError:
    sys.exit(2)  # presentation error
sys.exit(0 if a + b == int(data) else 1)
"""


def test_a_testlib_style_checker_program_judges_by_its_exit_code(pool):
    t = task([{"input": "5\n", "output": "2 3\n"}, {"input": "8\n", "output": "4 4\n"}], checker=TESTLIB_CHECKER)
    answers = ["n = int(input())\nprint(1, n - 1)\n", "n = int(input())\nprint(1, n)\n", "print('x')\n"]
    g = grades(pool, [(t, code) for code in answers])
    assert [x.tests_passed for x in g] == [2, 0, 0]
    failing = task([{"input": "1\n", "output": "1\n"}], checker="import sys\nsys.exit(3)\n")
    assert "checker failed (exit 3)" in grades(pool, [(failing, "print(1)\n")])[0].failures[0]


@pytest.mark.xfail(
    strict=True,
    reason="known gap: a program that rewrites the harness's own functions in its process (through sys.modules or "
    "its frames) can forge a module test whose checks are not required, e.g. one made only of pytest.raises",
)
def test_rewriting_the_harness_does_not_forge_a_module_test(pool):
    module = "import pytest\nfrom solution import f\ndef test_a():\n    with pytest.raises(ValueError):\n        f(1)\n"
    code = (
        "import sys\nsys.modules['_azr_harness']._module_test = lambda *a: ('ok', [[-1, 1]])\ndef f(x):\n    return 0\n"
    )
    assert grades(pool, [(task([{"pytest": module}]), code)])[0].tests_passed == 0


def test_objects_compared_inside_a_module_keep_their_own_equality(pool):
    module = (
        "from solution import Point, origin\n"
        "def test_same():\n    expected = [Point(0, 0)]\n    assert [origin()] == expected\n"
        "def test_plain():\n    assert origin().x == 0\n"
        "def test_not_plain():\n    assert origin() != (0, 0)\n"
    )
    right = (
        "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
        "    def __eq__(self, other):\n"
        "        return isinstance(other, Point) and (self.x, self.y) == (other.x, other.y)\n"
        "def origin():\n    return Point(0, 0)\n"
    )
    liar = right.replace("return isinstance(other, Point) and", "return True or")
    g = grades(pool, [(task([{"pytest": module}]), right), (task([{"pytest": module}]), liar)])
    assert g[0].passed, g[0].failures
    assert g[1].per_test == [True, True, True]  # objects on both sides: their own comparison stands (documented)


EXERCISM_TEST = """import unittest

from leap import leap_year


class LeapTest(unittest.TestCase):
    def test_century(self):
        self.assertIs(leap_year(1900), False)

    def test_four_hundred(self):
        self.assertIs(leap_year(2000), True)
"""
LEAP = "def leap_year(year):\n    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n"


def shown_names(source):
    return [[module, list(symbols)] for module, symbols in task([{"pytest": source}]).tests[0].names]


def test_a_test_module_imports_the_program_under_the_name_it_uses(pool):
    t = task([{"unittest": EXERCISM_TEST}])
    pytest_style = "import numpy\nfrom leap import leap_year\n\ndef test_it():\n    assert leap_year(2000)\n"
    assert shown_names(pytest_style) == [["leap", ["leap_year"]]]  # numpy is installed here: a library
    p = task([{"pytest": pytest_style.replace("import numpy\n", "")}])
    good, wrong, nothing, good_p = grade_many(
        [(t, LEAP), (t, LEAP.replace("!= 0 or", "== 0 or")), (t, "pass"), (p, LEAP)], pool, QUICK
    )
    assert good.passed and good.tests_total == 2, good.failures
    assert not wrong.passed and nothing.failures[0].startswith("test 0: ModuleNotFoundError: No module named 'leap'")
    assert good_p.passed, good_p.failures


# ------------------------------------------------------------------------------------- the pytest stand-in's reach
STANDIN_MODULE = """
import os, subprocess, sys
import pytest
from solution import add

class TestWithFixtures:
    @pytest.fixture
    def numbers(self):
        return (2, 3)

    @pytest.fixture(autouse=True)
    def base(self):
        self.base = 10
        yield
        self.base = None

    def test_class_fixture(self, numbers):
        assert add(*numbers) == 5
        assert add(self.base, 1) == 11

def test_capfd(capfd):
    print(add(1, 1))
    os.write(1, b"raw\\n")
    subprocess.run([sys.executable, "-c", "print('child')"], check=True)
    out, err = capfd.readouterr()
    assert out.splitlines() == ["2", "raw", "child"]
    assert err == ""

def test_tmpdir(tmpdir):
    p = tmpdir.join("data.txt")
    p.write("1 2")
    sub = tmpdir.mkdir("sub")
    assert sub.check(dir=1) and p.check(file=1)
    assert add(*map(int, p.read().split())) == 3
    assert os.path.exists(str(tmpdir / "data.txt")) and os.fspath(p) == p.strpath
    assert [x.basename for x in tmpdir.listdir()] == ["data.txt", "sub"]
"""


def test_the_standin_offers_class_fixtures_capfd_and_a_py_path_tmpdir(pool):
    g = grades(pool, [(task([{"pytest": STANDIN_MODULE}]), ADD), (task([{"pytest": STANDIN_MODULE}]), ONE_OPERATOR)])
    assert g[0].passed, g[0].failures
    assert g[1].tests_passed == 0, g[1].failures


def test_an_empty_parameter_set_is_not_a_pass(pool):
    module = (
        "import itertools, pytest\nfrom solution import add\n"
        "@pytest.mark.parametrize('a, b', list(itertools.product([], [1])))\n"
        "def test_none(a, b):\n    assert add(a, b) == a + b\n"
    )
    g = grades(pool, [(task([{"pytest": module}]), ADD)])[0]
    assert g.tests_passed == 0 and "empty parameter set" in g.failures[0], g.failures


def test_every_kind_has_its_planner():
    """A kind of the `Test` union is judged only once it has a planner (and the planner's verdict rule)."""
    from azr.data import KINDS
    from azr.rewards.plans import PLANNERS

    assert set(PLANNERS) == set(KINDS)


def test_a_plan_carries_the_test_it_was_planned_from():
    """Readers of verdicts (feedback, audits) get the test itself from its plan, never a string to parse again."""
    from azr.data import CallCase, StdioCase
    from azr.rewards.plans import plan_test

    case, call = StdioCase("1\n", "2\n"), CallCase("f", [1], 2)
    assert plan_test(case).origin is case and plan_test(case).stdio is case
    assert plan_test(call, 0.1).origin == call and plan_test(call).stdio is None
