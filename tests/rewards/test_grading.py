"""Grading in the sandbox: test plans, verdicts decided by the harness (never by exit codes or printed text), partial
credit, one fork per test, typed values compared outside the sandbox, limits and the shipped reference solutions.

Every test that runs code uses real sandbox runs on one module-wide `bwrap` pool with short wall limits.
"""

from __future__ import annotations

import importlib.util
import json
import math
import secrets

import pytest

from azr.data import AssertTest
from azr.data.tasks import Task, load_tasks
from azr.rewards.grading import grade, grade_many, grade_stream, task_limits, validate_references, verdict_check
from azr.rewards.harness import build_program
from azr.rewards.plans import TestPlan, ValueCheck
from azr.rewards.plans import plan_test as plan_of
from azr.rewards.values import decode_value
from azr.rewards.verdicts import read_verdicts
from azr.sandbox import Limits, open_pool


def plan_test(source: str) -> TestPlan:
    """The plan of an assert test given as its source."""
    return plan_of(AssertTest(source))


QUICK = Limits(wall_s=2.0)  # programs that end by themselves
HANG = Limits(wall_s=1.0)  # programs that are meant to run into the wall clock

INC = Task(
    "t-inc", "Write `f(x)` returning x + 1.", ["assert f(1) == 2", "assert f(2) == 3", "r = f(3)\nassert r == 4"]
)
RIGHT = "def f(x):\n    return x + 1\n"
WRONG = "def f(x):\n    return 0\n"
LIES = "class Yes(int):\n    def __eq__(self, other):\n        return True\ndef f(x):\n    return Yes(0)\n"


@pytest.fixture(scope="module")
def pool():
    with open_pool("bwrap", workers=2) as p:
        yield p


def run(pool, task: Task, code: str, limits: Limits = QUICK):
    return grade(task, code, pool, limits)


# ------------------------------------------------------------------------------------------------- basic verdicts
def test_correct_solution_passes_every_test(pool):
    g = run(pool, INC, RIGHT)
    assert (g.status, g.passed, g.tests_passed, g.tests_total, g.failures) == ("passed", True, 3, 3, [])
    assert g.backend == "bwrap" and g.fraction == 1.0


def test_partial_credit_counts_the_tests_that_pass(pool):
    g = run(pool, INC, "def f(x):\n    return x + 1 if x != 2 else 7\n")
    assert (g.status, g.tests_passed, g.tests_total) == ("failed", 2, 3)
    assert len(g.failures) == 1 and g.failures[0].startswith("test 1: AssertionError: f(2) = 7, expected == 3")


def test_right_answers_larger_than_the_report_channel_all_pass(pool):
    """Three 400 kB strings come back on the report channel (1 MiB by default): it is sized from the tests' own text,
    so a right answer is not cut off after the first large ones (EvalPlus's HumanEval/15 failed so)."""
    big = Task("big", "p", [f"assert f({n}) == {'x' * n!r}" for n in (400_000, 400_001, 400_002)])
    g = run(pool, big, "def f(n):\n    return 'x' * n\n")
    assert (g.status, g.tests_passed) == ("passed", 3), g.failures[:1]
    assert task_limits(big, QUICK).report_bytes > 2 * 1_200_000
    assert task_limits(INC, QUICK) is QUICK  # the usual task: the base limits as they are


def test_state_mutated_by_one_test_is_invisible_to_the_next(pool):
    code = "SEEN = []\ndef push(x):\n    SEEN.append(x)\n    return len(SEEN)\n"
    task = Task("t", "p", ["assert push(1) == 1", "assert push(2) == 1", "SEEN.append(3)\nassert SEEN == [3]"] * 2)
    g = run(pool, task, code)
    assert (g.status, g.tests_passed) == ("passed", 6), g.failures


@pytest.mark.parametrize(
    "dies",
    ["import os\n        os._exit(0)", "import ctypes\n        ctypes.string_at(0)", "import os\n        os.abort()"],
    ids=["os._exit", "segfault", "abort"],
)
def test_a_test_that_kills_its_fork_does_not_stop_later_tests(pool, dies):
    code = f"def f(x):\n    if x == 1:\n        {dies}\n    return x + 1\n"
    g = run(pool, INC, code)
    assert (g.status, g.tests_passed) == ("crashed", 2)
    assert g.failures[0].startswith("test 0: no verdict")


def test_an_exception_in_one_test_fails_only_that_test(pool):
    g = run(pool, INC, "def f(x):\n    return x + 1 if x != 3 else 1 // 0\n")
    assert (g.status, g.tests_passed) == ("failed", 2)
    assert g.failures == ["test 2: ZeroDivisionError: integer division or modulo by zero"]


def test_a_failure_text_with_a_lone_surrogate_comes_back_as_valid_text(pool):
    """A program in plain ASCII can raise ValueError(chr(0xD800)): its failure text reaches logs, so it is read as
    valid text (U+FFFD), the same at load time."""
    g = run(pool, INC, "def f(x):\n    raise ValueError(chr(0xD800) + 'x' + chr(0xDFFF))\n")
    assert g.status == "failed" and g.failures[0] == "test 0: ValueError: \ufffdx\ufffd"
    loading = run(pool, INC, "raise ValueError(chr(0xDC00))\n")
    assert all("\ufffd" in f and "\udc00" not in f for f in loading.failures)


def test_a_solution_that_fails_to_load_fails_every_test(pool):
    g = run(pool, INC, "def f(x):\n    return x + 1\nraise ValueError('broken import')\n")
    assert (g.status, g.tests_passed) == ("failed", 0)
    assert all("solution failed to load: ValueError: broken import" in f for f in g.failures)


# ------------------------------------------------------------------------------------------------- anti-forging
GUESS = secrets.token_hex(16)  # a nonce of the right shape; the harness's own is fresh per run


def _fake_lines(kind: str = "ok", payload=None) -> str:
    """Source of a bytes literal: fake verdicts for tests 0-2 in the harness's own line format."""
    lines = "".join(json.dumps([nonce, i, kind, payload]) + "\n" for nonce in (GUESS, "0" * 32, "") for i in range(3))
    return repr(lines.encode())


FORGERIES = {
    "sys.exit(0) at load": "import sys\nsys.exit(0)\n",
    "exit(0) at load": "exit(0)\n",
    "os._exit(0) at load": "import os\nos._exit(0)\n",
    "exit(0) in the function": "def f(x):\n    exit(0)\n",
    "os._exit(0) in the function": "def f(x):\n    import os\n    os._exit(0)\n",
    "SystemExit in the function": "def f(x):\n    raise SystemExit(0)\n",
    "KeyboardInterrupt in the function": "def f(x):\n    raise KeyboardInterrupt\n",
    "BaseException in the function": "class Out(BaseException):\n    pass\ndef f(x):\n    raise Out('ok')\n",
    "prints passed": "print('passed')\nprint('3/3 tests passed')\nimport os\nos._exit(0)\n",
    "prints harness lines": f"import os\nos.write(1, {_fake_lines()})\nos.write(2, {_fake_lines()})\n" + WRONG,
    "prints harness lines then exits": f"import os\nos.write(1, {_fake_lines()})\nos._exit(0)\n",
    "fake ok verdicts on fd 3": f"import os\nos.write(3, {_fake_lines()})\nos._exit(0)\n",
    "fake ok verdicts on fd 3 in f": f"def f(x):\n    import os\n    os.write(3, {_fake_lines()})\n    return 0\n",
    "fake value verdicts on fd 3": f"import os\nos.write(3, {_fake_lines('value', ['i', '2'])})\n" + WRONG,
    "junk on fd 3": "import os\nos.write(3, b'\\x00\\xff junk\\n[1, 2\\nnull\\n{}\\n\\n')\n" + WRONG,
    "closes stdout": "import os\nos.close(1)\n" + WRONG,
    "closes fd 3": "import os\nos.close(3)\n" + WRONG,
    "closes fd 3 in f": "def f(x):\n    import os\n    os.close(3)\n    return 0\n",
    "atexit prints": "import atexit, sys\natexit.register(lambda: print('passed'))\n" + WRONG + "sys.exit(0)\n",
    "atexit writes fd 3": f"import atexit, os\natexit.register(lambda: os.write(3, {_fake_lines()}))\n" + WRONG,
    "thread writes fd 3": (
        "import os, threading, time\n"
        "def spam():\n    while True:\n"
        f"        os.write(3, {_fake_lines()})\n        time.sleep(0.001)\n"
        "threading.Thread(target=spam, daemon=True).start()\ntime.sleep(0.01)\n" + WRONG
    ),
}


def test_no_trick_marks_a_test_passed(pool):
    grades = grade_many([(INC, code) for code in FORGERIES.values()], pool, QUICK)
    forged = {name: (g.status, g.tests_passed) for name, g in zip(FORGERIES, grades, strict=True) if g.tests_passed}
    assert not forged
    assert all(g.status in ("failed", "crashed") for g in grades), [g.status for g in grades]


STEAL_NONCE = """
import gc, json, os
P = next(o for o in gc.get_objects() if isinstance(o, dict) and 'nonce' in o and 'tests' in o)
os.write(3, b''.join((json.dumps([P['nonce'], i, 'ok', None]) + '\\n').encode() for i in range(len(P['tests']))))
os._exit(0)
"""


def test_a_stolen_nonce_does_not_forge_value_tests(pool):
    task = Task("t", "p", ["assert f(1) == 2", "assert not f(2)", "assert f(3) is None"])
    g = run(pool, task, STEAL_NONCE)
    assert (g.status, g.tests_passed) == ("failed", 0), g.failures


@pytest.mark.xfail(
    strict=True,
    reason="known gap: a program that finds the nonce in the harness's memory can forge statement-test verdicts",
)
def test_a_stolen_nonce_does_not_forge_statement_tests(pool):
    task = Task("t", "p", ["assert abs(f(1) - 2.0) < 1e-9", "r = f(2)\nassert r == 3"])
    assert run(pool, task, STEAL_NONCE).tests_passed == 0


def test_the_harness_still_passes_a_right_answer_after_the_same_noise(pool):
    """The tricks fail because of the verdicts, not because noise breaks grading: with a right `f` they pass."""
    noisy = [name for name in FORGERIES if name.startswith(("prints harness lines", "junk", "closes stdout"))]
    noisy += ["thread writes fd 3", "atexit writes fd 3"]
    codes = [FORGERIES[name].replace(WRONG, RIGHT) for name in noisy if name != "prints harness lines then exits"]
    grades = grade_many([(INC, code) for code in codes], pool, QUICK)
    assert [(g.status, g.tests_passed) for g in grades] == [("passed", 3)] * len(codes)


@pytest.mark.parametrize(
    "code",
    [
        "class A:\n    def __eq__(self, other):\n        return True\n    __hash__ = None\ndef f(x):\n    return A()\n",
        "class I(int):\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n"
        "        return False\n    __hash__ = int.__hash__\ndef f(x):\n    return I(7)\n",
        "class S(str):\n    def __eq__(self, other):\n        return True\n    __hash__ = str.__hash__\n"
        "def f(x):\n    return S('nope')\n",
        "class L(list):\n    def __eq__(self, other):\n        return True\ndef f(x):\n    return L([0])\n",
    ],
    ids=["always-equal object", "lying int subclass", "lying str subclass", "lying list subclass"],
)
def test_objects_with_lying_eq_fail_value_tests(pool, code):
    task = Task("t", "p", ["assert f(1) == 2", "assert 3 == f(2)", "assert f(3) == 'yes'", "assert f(4) == [1]"])
    g = run(pool, task, code)
    assert g.tests_passed == 0 and g.status == "failed", g.failures


def test_verdict_check_holds(pool):
    check = verdict_check(pool)
    assert check.ok, check.detail


# ------------------------------------------------------------------------------------------------- test plans
@pytest.mark.parametrize(
    ("source", "plan"),
    [
        ("assert f(1) == 2", ("f(1)", "==", 2)),
        ("assert 2 == f(1)", ("f(1)", "==", 2)),
        ("assert f(1) != 2", ("f(1)", "!=", 2)),
        ("assert 3 > f(1)", ("f(1)", "<", 3)),
        ("assert 3 >= f(1)", ("f(1)", "<=", 3)),
        ("assert 0 < f(1)", ("f(1)", ">", 0)),
        ("assert f(1) <= 3", ("f(1)", "<=", 3)),
        ("assert f(1)", ("f(1)", "truthy", None)),
        ("assert not f(1)", ("f(1)", "falsy", None)),
        ("assert f(1) is None", ("f(1)", "is", None)),
        ("assert f(1) is not None", ("f(1)", "is not", None)),
        ("assert None is f(1)", ("f(1)", "is", None)),
        ("assert f(1) is True", ("f(1)", "is", True)),
        ("assert f(x=1, ys=[2, 3]) == {'a': (1,)}", ("f(x=1, ys=[2, 3])", "==", {"a": (1,)})),
        ("assert f(-1, 'a', b'x', None) == -2.5", ("f(-1, 'a', b'x', None)", "==", -2.5)),
        ("assert Solution().m(1) == 2", ("Solution().m(1)", "==", 2)),
        ("assert obj.m(1) == 2", ("obj.m(1)", "==", 2)),
        ("assert f(1) == 2, 'message'", ("f(1)", "==", 2)),
        ("assert f(y) == 2", ("f(y)", "==", 2)),  # any arguments: they only feed the solution's own function
        ("assert f([].__getitem__, 5) == -1", ("f([].__getitem__, 5)", "==", -1)),
        ("assert sorted(f([3, 1])) == [1, 3]", ("f([3, 1])", "==", [1, 3], "sorted")),
        ("assert list(gen(3)) == [0, 1, 2]", ("gen(3)", "==", [0, 1, 2], "list")),
        ("assert set(f(1)) == {1}", ("f(1)", "==", {1}, "set")),
    ],
)
def test_value_tests(source, plan):
    assert plan_test(source) == TestPlan("value", source, (ValueCheck(*plan),))


def test_a_conjunction_of_value_checks_is_one_value_test():
    plan = plan_test("assert f(1) == 2 and not g(0) and 3 <= h(x=1)")
    assert plan.kind == "value"
    assert plan.checks == (ValueCheck("f(1)", "==", 2), ValueCheck("g(0)", "falsy"), ValueCheck("h(x=1)", ">=", 3))
    assert plan_test("assert f(1) == 2 and f(2) + 1 == 4").kind == "statement"  # one conjunct is not a value check
    assert plan_test("assert f(1) == 2 or f(2) == 3").kind == "statement"


def test_a_conjunction_passes_only_when_every_check_passes(pool):
    task = Task("and", "", ["assert f(1) == 2 and f(2) == 3", "assert f(1) == 2 and f(2) == 4"])
    g = grade(task, RIGHT, pool, QUICK)
    assert (g.tests_passed, g.tests_total) == (1, 2) and "f(2) = 3, expected == 4" in g.failures[0]


def test_wrappers_are_applied_outside_with_the_real_builtins(pool):
    """A solution that shadows `sorted` cannot make `sorted(f(x)) == [...]` pass: the wrap happens outside."""
    liar = "def sorted(x):\n    return [1, 2, 3]\ndef f(x):\n    return [3, 2]\n"
    honest = "def f(x):\n    return iter([3, 1, 2])\n"
    task = Task("wrap", "", ["assert sorted(f(0)) == [1, 2, 3]"])
    assert [g.tests_passed for g in grade_many([(task, liar), (task, honest)], pool, QUICK)] == [0, 1]


@pytest.mark.parametrize(
    "source",
    [
        "assert abs(f(1) - 2.0) < 1e-9",
        "assert sorted(f([3, 1]), key=len) == [1, 3]",
        "assert len(f(3)) == 3",
        "assert print(1) is None",
        "r = f(1)\nassert r in (2, 3)",
        "for i in range(2):\n    assert f(i) == 2",  # no check at the top level: nothing has to report
        "assert 2 in f(1)",
        "assert f(1) not in (1, 2)",
        "assert 1 < f(1) < 3",
        "assert f(1) is 5",
        "assert f(1) == g(2)",
        "assert f(1) + 1 == 3",
        "assert f(1)[0] == 2",
        "x = f(1)",
        "f(1) == 2",
        "assert f(1 ==",
    ],
)
def test_statement_tests(source):
    assert plan_test(source) == TestPlan("statement", source)


def test_the_expected_value_never_reaches_the_program():
    plans = [
        plan_test(s) for s in ("assert f(1) == 918273645", "assert 918273646 >= g(2)", "assert h(k=3) == 'SECRET'")
    ]
    assert [p.kind for p in plans] == ["value"] * 3
    program = build_program("def f(x):\n    return x\n", plans, "n" * 32)
    assert "f(1)" in program and "g(2)" in program and "h(k=3)" in program
    assert "918273645" not in program and "918273646" not in program and "SECRET" not in program


def test_value_comparisons_follow_python_with_mirrored_operators(pool):
    tests = [
        "assert f(1) == 2",
        "assert 2 == f(1)",
        "assert 3 > f(1)",
        "assert 2 >= f(1)",
        "assert 1 < f(1)",
        "assert f(1) != 5",
        "assert f(1)",
        "assert not f(-1)",
        "assert g() is None",
        "assert f(1) == 2.0",
    ]
    task = Task("t", "p", tests)
    code = "def f(x):\n    return x + 1\ndef g():\n    pass\n"
    assert run(pool, task, code).tests_passed == len(tests)
    g = run(pool, task, "def f(x):\n    return 9 * x\ndef g():\n    return 0\n")
    assert [f.split(":")[0] for f in g.failures] == [f"test {i}" for i in (0, 1, 2, 3, 7, 8, 9)]


@pytest.mark.parametrize(
    ("returned", "test", "passes"),
    [
        ("[1, 2]", "assert f() == (1, 2)", False),
        ("(1, 2)", "assert f() == [1, 2]", False),
        ("(1, 2)", "assert f() == (1, 2)", True),
        ("[1, 2]", "assert f() == [1, 2]", True),
        ("{1, 2}", "assert f() == frozenset({1, 2})", True),
        ("'1'", "assert f() == 1", False),
        ("b'ab'", "assert f() == 'ab'", False),
        ("True", "assert f() is True", True),
        ("1", "assert f() is True", False),
        ("[]", "assert not f()", True),
    ],
)
def test_types_compare_as_in_python(pool, returned, test, passes):
    g = run(pool, Task("t", "p", [test]), f"def f():\n    return {returned}\n")
    assert g.passed is passes, g.failures


# ------------------------------------------------------------------------------------------------- typed values
VALUES = (
    "[None, True, False, 0, -7, 10 ** 5001 + 3, -(2 ** 200), 1.5, -0.0, float('nan'), float('inf'), -float('inf'), "
    "1e308, 2 + 3.5j, complex(0, -0.0), '', 'héllo\\n\\x00\\u2028', b'\\x00\\xff', bytearray(b'ab'), [], [1, [2, []]], "
    "(), (1,), ((1, 2), [3]), set(), {1, 'a', (2, 3)}, frozenset({frozenset({1})}), {}, {(1, 2): [None], 3: {'k': "
    "b'v'}, 'x': {4.5}, None: (True,), frozenset({1}): 1.25}, True + 0]"
)


def _same(a, b) -> bool:
    """Equal, of the same type all the way down, with nan equal to nan and the sign of zero respected."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, complex):
        return _same(a.real, b.real) and _same(a.imag, b.imag)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def test_values_come_back_from_the_sandbox_with_their_types(pool):
    expected = eval(VALUES)
    expected[expected.index(bytearray(b"ab"))] = b"ab"  # bytearray travels as bytes
    plans = [TestPlan("value", "", (ValueCheck(f"f({i})", "=="),)) for i in range(len(expected))]
    nonce = secrets.token_hex(16)
    result = pool.run(build_program(f"V = {VALUES}\ndef f(i):\n    return V[i]\n", plans, nonce), QUICK)
    assert result.status == "ok", result
    got = {}
    for line in result.report.splitlines():
        tag, index, kind, payload = json.loads(line)
        assert (tag, kind) == (nonce, "value"), line
        got[index] = decode_value(payload[0])
    assert sorted(got) == list(range(len(expected)))
    bad = [(i, expected[i], got[i]) for i in range(len(expected)) if not _same(expected[i], got[i])]
    assert not bad


@pytest.mark.parametrize(
    ("encoded", "value"),
    [
        (["N"], None),
        (["b", True], True),
        (["b", False], False),
        (["i", format(10**5001, "x")], 10**5001),
        (["i", "-ff"], -255),
        (["f", "-0.0"], -0.0),
        (["f", "inf"], math.inf),
        (["f", "-inf"], -math.inf),
        (["f", "0.1"], 0.1),
        (["c", ["1.0", "-2.5"]], complex(1, -2.5)),
        (["s", "a\u2028b"], "a\u2028b"),
        (["y", "00ff"], b"\x00\xff"),
        (["l", [["i", "1"], ["t", []]]], [1, ()]),
        (["t", [["s", "a"], ["l", []]]], ("a", [])),
        (["S", [["i", "1"], ["s", "1"]]], {1, "1"}),
        (["F", [["F", []]]], frozenset({frozenset()})),
        (["d", [[["t", [["i", "1"], ["i", "2"]]], ["l", [["N"]]]]]], {(1, 2): [None]}),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else "",
)
def test_decode_value(encoded, value):
    assert _same(decode_value(encoded), value)


def test_decode_value_nan_and_rejects_malformed():
    assert math.isnan(decode_value(["f", "nan"]))
    for bad in ([], "i", None, [1], ["?", 1], ["i", "zz"], ["f", "x"], ["y", "0"]):
        with pytest.raises(ValueError):
            decode_value(bad)


def test_values_and_literal_expectations_round_trip_through_grading(pool):
    literal = "{(1, 2): [b'x', {3}, frozenset({4})], 'k': (1.5, None, -0.0, 2j), 10: [[[]]]}"
    task = Task("t", "p", [f"assert f() == {literal}", f"assert g() == {10**300}", "assert h() == -0.0"])
    g = run(pool, task, f"def f():\n    return {literal}\ndef g():\n    return 10 ** 300\ndef h():\n    return 0.0\n")
    assert (g.status, g.tests_passed) == ("passed", 3), g.failures


def test_a_value_that_cannot_travel_fails_only_its_test(pool):
    task = Task("t", "p", ["assert f(1) == 2", "assert g() == 1", "assert h() == []"])
    code = RIGHT + "def g():\n    return object()\ndef h():\n    x = []\n    x.append(x)\n    return x\n"
    g = run(pool, task, code)
    assert (g.status, g.tests_passed) == ("failed", 1)
    assert "g() = <object object>, expected == 1" in g.failures[0] and "nested too deeply" in g.failures[1]


# --------------------------------------------------------------------------- values that are not plain data
VALUE_TYPES = """
import re, enum, datetime, dataclasses
from fractions import Fraction
from decimal import Decimal
def m(s):
    return re.match('a', s)
def many(s):
    return [m(c) for c in s]
def fr(n, d):
    return Fraction(n, d)
def de(s):
    return Decimal(s)
def day(y, mo, d):
    return datetime.date(y, mo, d)
def at(h, mi):
    return datetime.datetime(2024, 1, 2, h, mi, tzinfo=datetime.timezone(datetime.timedelta(hours=2)))
def dt(s):
    return datetime.timedelta(seconds=s)
def tm(h):
    return datetime.time(h, 30)
def rg(*a):
    return range(*a)
def gen(n):
    return (i for i in range(n))
class Color(enum.Enum):
    RED = 1
def color():
    return Color.RED
@dataclasses.dataclass
class Point:
    x: int
def point():
    return Point(1)
class Empty:
    def __len__(self):
        return 0
def empty():
    return Empty()
class Broken:
    def __bool__(self):
        raise ValueError('no truth here')
def broken():
    return Broken()
"""
VALUE_TYPE_TESTS = [
    "assert m('ab')",
    "assert not m('ba')",
    "assert m('ba') is None",
    "assert m('ab') is not None",
    "assert m('ab') is None",
    "assert not m('ab')",
    "assert m('ab') == 'a'",
    "assert m('ab') != 'a'",
    "assert m('ab') < 1",
    "assert many('ab')[1] is None",
    "assert many('ab')",
    "assert many('ab') == [None, None]",
    "assert fr(1, 2) == 0.5",
    "assert fr(2, 4) == 0.5 and fr(1, 3) < 0.34 and fr(3, 1) == 3",
    "assert fr(1, 3) == 0.333",
    "assert 1 > fr(1, 3) >= 0",
    "assert fr(0, 1)",
    "assert not fr(0, 1)",
    "assert [fr(1, 2)] == [0.5]",
    "assert de('0.5') == 0.5",
    "assert de('1.10') == 1.1",
    "assert de('0.1') == 0.1",
    "assert de('2') == 2 and de('2.5') > 2",
    "assert de('NaN') != 1",
    "assert de('NaN') < 1",
    "assert day(2024, 1, 2) == '2024-01-02'",
    "assert day(2024, 1, 2) != '2024-01-02'",
    "assert day(2024, 1, 2)",
    "assert at(1, 2) is not None",
    "assert not dt(0)",
    "assert dt(1)",
    "assert tm(1) != 1",
    "assert rg(3) == [0, 1, 2]",
    "assert list(rg(3)) == [0, 1, 2]",
    "assert rg(0)",
    "assert not rg(0)",
    "assert sorted(rg(5, 0, -2)) == [1, 3, 5]",
    "assert gen(0)",
    "assert list(gen(3)) == [0, 1, 2]",
    "assert gen(3) == [0, 1, 2]",
    "assert color() != 1",
    "assert color() == 1",
    "assert color()",
    "assert point() == 1",
    "assert point() != 1",
    "assert point() is not None",
    "assert not empty()",
    "assert empty()",
    "assert broken()",
    "assert broken() is not None",
    "r = m('ab')\nassert r",
    "r = fr(1, 4)\nassert r == 0.25\nassert r is not None",
]


def _python_verdicts(code: str, tests: list[str]) -> list[bool]:
    """What CPython itself says of each test (our own code, run here)."""
    verdicts = []
    for test in tests:
        ns: dict = {}
        exec(code, ns)
        try:
            exec(test, ns)
            verdicts.append(True)
        except Exception:
            verdicts.append(False)
    return verdicts


def test_values_that_are_not_plain_data_are_judged_as_python_judges_them(pool):
    """re.Match, Fraction, Decimal, dates and times, range, generators, enum members and the solution's own objects:
    every value test and check comes out as CPython says (value tests and checked asserts alike), except where the
    only way to pass would be an object's own `__eq__` (here: none of these values' tests needs one)."""
    g = run(pool, Task("types", "", VALUE_TYPE_TESTS), VALUE_TYPES, Limits(wall_s=10.0))
    expected = _python_verdicts(VALUE_TYPES, VALUE_TYPE_TESTS)
    differ = [
        (t, want, g.failures)
        for t, want, got in zip(VALUE_TYPE_TESTS, expected, g.per_test, strict=True)
        if want != got
    ]
    assert not differ
    assert all(plan_test(t).kind == "value" for t in VALUE_TYPE_TESTS[:9])  # judged outside, not run inside


def test_a_value_that_is_not_plain_data_says_why_it_failed(pool):
    task = Task("t", "", ["assert point() == 1", "assert broken()", "assert m('ab') < 1"])
    g = run(pool, task, VALUE_TYPES)
    assert "point() = <Point object>, expected == 1 (a Point is compared here as itself" in g.failures[0]
    assert "ValueError: no truth here" in g.failures[1]
    assert "'<' not supported between instances of 'Match' and 'int'" in g.failures[2]


LYING_VALUES = {
    "Fraction subclass with lying __eq__ and __bool__": (
        "from fractions import Fraction\nclass F(Fraction):\n    def __eq__(self, o):\n        return True\n"
        "    __ne__ = __lt__ = __gt__ = __eq__\n    def __bool__(self):\n        return True\n"
        "    numerator = 5\n    denominator = 1\ndef f(x):\n    return F(1, 3)\n"
    ),
    "Decimal subclass with lying __eq__ and __str__": (
        "from decimal import Decimal\nclass D(Decimal):\n    def __eq__(self, o):\n        return True\n"
        "    __ne__ = __lt__ = __gt__ = __eq__\n    def __str__(self):\n        return '5'\n"
        "    def __bool__(self):\n        return True\ndef f(x):\n    return D('0.25')\n"
    ),
    "date subclass with lying __eq__ and isoformat": (
        "import datetime\nclass D(datetime.date):\n    def __eq__(self, o):\n        return True\n"
        "    __ne__ = __eq__\n    def isoformat(self):\n        return '5'\ndef f(x):\n    return D(2020, 1, 1)\n"
    ),
    "bool-lying object": (
        "class B:\n    def __eq__(self, o):\n        return True\n    def __bool__(self):\n        return True\n"
        "    __hash__ = object.__hash__\ndef f(x):\n    return B()\n"
    ),
    "int subclass that lies about its truth and equality": (
        "class I(int):\n    def __eq__(self, o):\n        return True\n    def __bool__(self):\n        return True\n"
        "    __hash__ = int.__hash__\ndef f(x):\n    return I(0)\n"
    ),
    "fake modules that claim every value is theirs": (
        "import sys, types\nclass Meta(type):\n    def __instancecheck__(cls, o):\n        return True\n"
        "class Any(metaclass=Meta):\n    def __getattr__(self, name):\n        return self\n"
        "    def __eq__(self, o):\n        return True\n    __hash__ = object.__hash__\n"
        "for name in ('fractions', 'decimal', 'datetime', 'numpy'):\n    fake = types.ModuleType(name)\n"
        "    fake.Fraction = fake.Decimal = fake.date = fake.time = fake.timedelta = fake.ndarray = Any\n"
        "    fake.generic = fake.datetime = Any\n    sys.modules[name] = fake\ndef f(x):\n    return Any()\n"
    ),
}


@pytest.mark.parametrize("code", LYING_VALUES.values(), ids=LYING_VALUES.keys())
def test_values_that_lie_about_their_comparisons_win_nothing(pool, code):
    """Pairwise exclusive expectations: one honest value passes at most one of them, so must these."""
    tests = ["assert f(1) == 0.5", "assert f(1) == 5", "assert f(1) == True", "assert f(1) == '2020-01-01'"]
    tests += ["assert f(1) == [1]", "assert f(1) is None", "assert 6 < f(1)", "r = f(1)\nassert r == 0.5"]
    g = run(pool, Task("t", "", tests), code)
    assert sum(g.per_test[:-1]) <= 1 and not g.per_test[-1], g.failures


# ------------------------------------------------------------------------------------------------- read_verdicts
NONCE = "a" * 32
PLANS = [plan_test("assert f(1) == 2"), plan_test("r = f(2)\nassert r in (3, 4)")]


def _line(*fields) -> str:
    return json.dumps(list(fields)) + "\n"


def test_read_verdicts_judges_each_test():
    report = _line(NONCE, 0, "value", [["i", "2"]]) + _line(NONCE, 1, "ok", None)
    assert read_verdicts(report, NONCE, PLANS) == [None, None]
    report = _line(NONCE, 0, "value", [["i", "5"]]) + _line(NONCE, 1, "error", "AssertionError: ")
    assert read_verdicts(report, NONCE, PLANS) == ["AssertionError: f(1) = 5, expected == 2", "AssertionError: "]


def test_read_verdicts_fails_a_test_with_two_verdicts_as_forged():
    report = _line(NONCE, 0, "value", [["i", "2"]]) * 2 + _line(NONCE, 1, "ok", None) + _line(NONCE, 1, "error", "x")
    verdicts = read_verdicts(report, NONCE, PLANS)
    assert all(v is not None and "forged" in v for v in verdicts)


def test_read_verdicts_ignores_lines_with_another_nonce():
    report = (
        _line("b" * 32, 0, "value", [["i", "2"]]) + _line(NONCE.upper(), 1, "ok", None) + _line(None, 1, "ok", None)
    )
    assert all(v.startswith("no verdict") for v in read_verdicts(report, NONCE, PLANS))
    report += _line(NONCE, 0, "value", [["i", "2"]]) + _line(NONCE, 1, "ok", None)
    assert read_verdicts(report, NONCE, PLANS) == [None, None]  # the foreign lines did not count as duplicates


def test_read_verdicts_ignores_malformed_lines():
    junk = [
        "",
        "garbage",
        "[1, 2",
        "null",
        "{}",
        '"abcd"',
        _line(NONCE, 0, "ok"),
        _line(NONCE, 0, "ok", None, "extra"),
        _line(NONCE, "0", "ok", None),
        _line(NONCE, 0.0, "ok", None),
        _line(NONCE, 7, "ok", None),
        _line(NONCE, -2, "ok", None),
        _line(NONCE, -1, "ok", None),
    ]
    good = _line(NONCE, 0, "value", [["i", "2"]]) + _line(NONCE, 1, "ok", None)
    report = "\n".join(junk) + "\n" + good + "\n".join(junk)
    assert read_verdicts(report, NONCE, PLANS) == [None, None]


def test_read_verdicts_rejects_verdicts_of_the_wrong_kind_or_value():
    report = _line(NONCE, 0, "ok", None) + _line(NONCE, 1, "value", [["b", True]])
    assert [v.split(" ")[0] for v in read_verdicts(report, NONCE, PLANS)] == ["unexpected", "unexpected"]
    report = _line(NONCE, 0, "value", [["?"]]) + _line(NONCE, 1, "ok", None)
    assert read_verdicts(report, NONCE, PLANS)[0].startswith("ValueError: unknown value kind")


def test_read_verdicts_load_error_fails_every_test():
    report = _line(NONCE, -1, "load_error", "SyntaxError: bad") + _line(NONCE, 1, "ok", None)
    assert read_verdicts(report, NONCE, PLANS) == ["solution failed to load: SyntaxError: bad"] * 2


# ------------------------------------------------------------------------------------------------- limits and crashes
def test_timeout_keeps_the_credit_of_tests_that_finished(pool):
    code = "def f(x):\n    while x == 2:\n        pass\n    return x + 1\n"
    g = run(pool, INC, code, HANG)
    assert (g.status, g.tests_passed, g.tests_total) == ("timeout", 1, 3)
    assert g.duration_s < 3


@pytest.mark.parametrize(
    ("code", "passed"),
    [
        ("def f(x):\n    b = bytearray(1 << 30)\n    return x + 1\n", 0),
        ("def f(x):\n    if x == 2:\n        b = bytearray(1 << 30)\n    return x + 1\n", 2),
        ("b = bytearray(1 << 30)\n" + RIGHT, 0),
    ],
    ids=["every test", "one test", "at load"],
)
def test_memory_status(pool, code, passed):
    g = run(pool, INC, code)
    assert (g.status, g.tests_passed) == ("memory", passed), g.failures


@pytest.mark.parametrize("where", ["at load", "in the function"])
def test_a_program_that_kills_its_worker_is_crashed_not_an_error(pool, where):
    kill = "import os\nos.kill(os.getppid(), 9)\n"
    code = kill + RIGHT if where == "at load" else "def f(x):\n    import os\n    os.kill(os.getppid(), 9)\n"
    g = run(pool, INC, code)
    assert (g.status, g.tests_passed) == ("crashed", 0)
    assert run(pool, INC, RIGHT).passed  # the pool replaced the worker


def test_secrets_in_the_environment_never_reach_the_program(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-azr-grading-test")
    task = Task(
        "t-env",
        "p",
        [
            "import os\nassert 'OPENAI_API_KEY' not in os.environ",
            "import os\nassert not any('sk-fake' in k + v for k, v in os.environ.items())",
            "assert b'sk-fake' not in open('/proc/self/environ', 'rb').read()",
            "assert not leaked()",
        ],
    )
    code = "import os\ndef leaked():\n    return [v for v in os.environ.values() if 'sk-fake' in v]\n"
    with open_pool("bwrap", workers=1) as own:
        g = grade(task, code, own, QUICK)
    assert (g.status, g.tests_passed) == ("passed", 4), g.failures


# ------------------------------------------------------------------------------------------------- tasks and data
def test_a_task_of_many_tests_gets_wall_time_for_each_of_its_forks_unless_it_sets_its_own():
    base = Limits(wall_s=5.0)
    many = Task("t", "p", [f"assert {i} == {i}" for i in range(1200)])
    assert task_limits(many, base).wall_s == 12.0  # 10 ms a test: each runs in a fork of the program
    assert task_limits(Task("t", "p", many.tests[:400]), base) == base  # the default covers it
    assert task_limits(Task("t", "p", many.tests, timeout_s=3.0), base).wall_s == 3.0  # the task's own wins


def test_task_limits_override_the_defaults():
    base = Limits(wall_s=2.0, memory_mb=512, open_files=10)
    assert task_limits(Task("t", "p", ["assert 1"]), base) == base
    both = task_limits(Task("t", "p", ["assert 1"], timeout_s=0.5, memory_mb=100), base)
    assert (both.wall_s, both.memory_mb, both.open_files) == (0.5, 100, 10)


def test_task_limits_apply_in_the_sandbox(pool):
    alloc = "def f(x):\n    b = bytearray(120 * 1024 * 1024)\n    return x + 1\n"
    sleepy = "import time\ndef f(x):\n    time.sleep(3)\n    return x + 1\n"
    tests = ["assert f(1) == 2"]
    pairs = [
        (Task("roomy", "p", tests), alloc),
        (Task("tight", "p", tests, memory_mb=100), alloc),
        (Task("quick", "p", tests, timeout_s=0.5), sleepy),
    ]
    grades = grade_many(pairs, pool, Limits(wall_s=5.0, memory_mb=512))
    assert [g.status for g in grades] == ["passed", "memory", "timeout"]
    assert grades[2].duration_s < 4  # the task's 0.5 s, not the default 5 s


def test_validate_references_reports_broken_solutions_and_skips_missing(pool):
    broken = Task("t-broken", "p", INC.tests, solution="def f(x):\n    return x + 2\n")
    good = Task("t-good", "p", INC.tests, solution=RIGHT)
    crashing = Task("t-crash", "p", INC.tests, solution="import os\nos._exit(1)\n")
    none = Task("t-none", "p", INC.tests)
    results = validate_references([broken, none, good, crashing], pool, QUICK)
    assert [(t.id, g and g.status) for t, g in results] == [
        ("t-broken", "failed"),
        ("t-none", None),
        ("t-good", "passed"),
        ("t-crash", "crashed"),
    ]


def test_every_shipped_reference_solution_passes(pool):
    tasks = load_tasks("train") + load_tasks("held-out") + load_tasks("basics")
    assert all(t.solution for t in tasks)
    grades = grade_many([(t, t.solution) for t in tasks], pool, Limits(wall_s=5.0))
    failed = {t.id: (g.status, g.failures[:2]) for t, g in zip(tasks, grades, strict=True) if not g.passed}
    assert not failed


# ----------------------------------------------------------------------------- statement tests with checks
def test_checked_asserts_of_a_statement_test_report_their_values():
    plan = plan_test("s = Stack()\ns.push(2)\nassert s.peek() == 2 and s.size() == 1\nr = f(1)\nassert r == 2")
    assert plan.kind == "statement" and plan.required == (0, 1, 2)
    assert plan.checks == (ValueCheck("s.peek()", "==", 2), ValueCheck("s.size()", "==", 1), ValueCheck("r", "==", 2))
    assert "__azr_check__(2, r)" in plan.program and "== 2" not in plan.program  # the literals stay outside


def test_objects_the_test_constructs_are_compared_inside():
    """`Rational(7, 2) < 4` exercises the class's own __lt__: that comparison is the test, so it stays inside."""
    for source in ("assert Rational(7, 2) < 4", "v = Vector(1, 2)\nassert v != (1, 2)"):
        assert plan_test(source) == TestPlan("statement", source)


def test_a_stolen_nonce_does_not_forge_statement_tests_with_checks(pool):
    task = Task("t", "p", ["r = f(2)\nassert r == 3", "s = f(1)\nassert s == 2\nassert s + 1 == 3"])
    assert run(pool, task, STEAL_NONCE).tests_passed == 0


def test_statement_checks_compare_outside_and_must_report(pool):
    plan = plan_test("r = f(2)\nassert r == 3")
    assert read_verdicts(_line(NONCE, 0, "ok", [[0, ["i", "3"]]]), NONCE, [plan]) == [None]
    assert "expected == 3" in read_verdicts(_line(NONCE, 0, "ok", [[0, ["i", "4"]]]), NONCE, [plan])[0]
    assert "never reported" in read_verdicts(_line(NONCE, 0, "ok", []), NONCE, [plan])[0]
    assert "forged" in read_verdicts(_line(NONCE, 0, "ok", None), NONCE, [plan])[0]
    task = Task("t", "p", ["r = f(2)\nassert r == 3", "r = f(2)\nassert r == 4"])
    assert [g.tests_passed for g in grade_many([(task, RIGHT), (task, LIES)], pool, QUICK)] == [1, 0]


# ------------------------------------------------------------------------------------------- found in review
def test_a_report_line_that_breaks_the_json_parser_is_ignored(pool):
    """Deep nesting made json.loads raise RecursionError out of grading, and with it a whole reward batch."""
    code = "import os\nos.write(3, b'[' * 100000 + b'\\n')\n" + RIGHT
    g = grade(INC, code, pool, QUICK)
    assert (g.status, g.tests_passed) == ("passed", 3)


def test_hashed_containers_from_the_sandbox_are_capped(pool):
    """Colliding int hashes make building a big set quadratic in the trainer: beyond the cap the test fails."""
    code = "def f(x):\n    return [k * ((1 << 61) - 1) for k in range(1, 30001)]\n"
    g = grade(Task("big", "", ["assert set(f(1)) == {1, 2}", "assert len(f(1)) == 30000"]), code, pool, QUICK)
    assert g.tests_passed == 1 and "more than the 10000" in g.failures[0]  # the cap fails only its own test


def test_a_task_without_tests_is_never_passed(pool):
    g = grade(Task("empty", "", []), RIGHT, pool, QUICK)
    assert (g.status, g.passed) == ("error", False)


# ------------------------------------------------------------------------------------ the preloaded harness
def test_the_preloaded_harness_gives_the_same_grades_as_the_one_each_program_compiles(pool):
    """Pools from `pool_from_config` preload the harness into their workers; any other pool's programs compile it
    themselves. The grades must not depend on which: every trick, crash and partial answer above, on both."""
    from azr.rewards.harness import harness_preload

    one_test = Task("t-one", "p", ["assert f(1) == 2"])  # its only test runs in the loaded process itself
    codes = [RIGHT, WRONG, LIES, "def f(x):\n    return x + 1 if x != 2 else 7\n", *FORGERIES.values()]
    dying = ["import os\n        os._exit(0)", "import ctypes\n        ctypes.string_at(0)", "raise MemoryError"]
    codes += [f"def f(x):\n    if x in (1, 3):\n        {d}\n    return x + 1\n" for d in dying]
    pairs = [(task, code) for task in (INC, one_test) for code in codes]
    with open_pool("bwrap", workers=2, preload=harness_preload()) as preloaded:
        fast = grade_many(pairs, preloaded, QUICK)
        streamed = list(grade_stream(pairs, preloaded, QUICK))
    compiled = grade_many(pairs, pool, QUICK)

    def key(g):
        return (g.status, g.tests_passed, g.per_test, [f.split(":")[0] for f in g.failures])

    assert [key(g) for g in fast] == [key(g) for g in compiled] == [key(g) for g in streamed]
    assert {g.status for g in fast} >= {"passed", "failed", "crashed", "memory"}


def test_programs_for_a_preloading_pool_leave_the_harness_source_out(pool):
    """A pool that preloads this harness gets programs without its source (what else each would carry through the
    pipe and compile); any other pool, the self-contained program."""
    from azr.rewards.harness import harness_preload, preloads_harness, runner_source

    plans = [plan_test("assert f(1) == 2")]
    short, whole = (build_program(RIGHT, plans, "n" * 32, preloaded) for preloaded in (True, False))
    assert "def run(payload)" not in short and len(short) < len(whole) - len(runner_source()) // 2
    assert preloads_harness(harness_preload()) and not preloads_harness(pool.preload)
    assert not preloads_harness({"_azr_harness": "def run(payload):\n    pass\n"})  # another harness: not ours
    with open_pool("bwrap", workers=1, preload=harness_preload()) as preloaded:
        result = preloaded.run(short, QUICK)
    assert read_verdicts(result.report, "n" * 32, plans) == [None]


# ------------------------------------------------------------------------------ numpy, offered to programs
needs_numpy = pytest.mark.skipif(importlib.util.find_spec("numpy") is None, reason="numpy is not installed here")
NUMPY_VALUES = """
import numpy as np
def a(*v):
    return np.array(v)
def i64(v):
    return np.int64(v)
def f32(v):
    return np.float32(v)
def yes():
    return np.bool_(True)
def grid():
    return np.arange(6).reshape(2, 3)
def day():
    return np.datetime64('2024-01-02')
def words():
    return np.array(['ab', 'c'])
def objects():
    return np.array([None, 1], dtype=object)
"""
NUMPY_TESTS = [
    "assert i64(3) == 3",
    "assert i64(3) < 4 and i64(3) >= 3.0",
    "assert f32(0.1) == 0.1",
    "assert f32(0.5) == 0.5",
    "assert yes()",
    "assert yes() == True",
    "assert yes() is True",
    "assert a(5) == 5",
    "assert a(1, 2, 3) == [1, 2, 3]",
    "assert list(a(1, 2, 3)) == [1, 2, 3]",
    "assert sorted(a(3, 1)) == [1, 3]",
    "assert a(1, 2).tolist() == [1, 2]",
    "assert grid().shape == (2, 3)",
    "assert grid()[1, 2] == 5",
    "assert not a().size",
    "assert a(0)",
    "assert not a(0)",
    "assert a(1, 2) is not None",
    "assert day() == day()",
    "assert day() != 5",
    "assert words()[0] == 'ab'",
    "assert list(words()) == ['ab', 'c']",
    "assert objects() is not None",
    "r = a(1, 2, 3)\nassert list(r) == [1, 2, 3]",
]


@pytest.fixture(scope="module")
def numpy_pool():
    with open_pool("bwrap", workers=1, packages=("numpy",)) as p:
        yield p


@needs_numpy
def test_numpy_values_are_judged_as_python_judges_them(numpy_pool):
    g = run(numpy_pool, Task("np", "", NUMPY_TESTS), NUMPY_VALUES, Limits(wall_s=20.0))
    expected = _python_verdicts(NUMPY_VALUES, NUMPY_TESTS)
    differ = [
        (t, want, g.failures) for t, want, got in zip(NUMPY_TESTS, expected, g.per_test, strict=True) if want != got
    ]
    assert not differ


NUMPY_LIARS = {
    "ndarray subclass with lying __eq__, __bool__ and tobytes": (
        "import numpy as np\nclass A(np.ndarray):\n    def __eq__(self, o):\n        return np.ones((), bool)\n"
        "    __ne__ = __lt__ = __gt__ = __eq__\n    def __bool__(self):\n        return True\n"
        "    def tobytes(self, *a, **k):\n        return np.int64(5).tobytes()\n"
        "    dtype = np.dtype('<i8')\ndef f(x):\n    return np.array([7, 9]).view(A)\n"
    ),
    "numpy scalar subclass with lying __eq__": (
        "import numpy as np\nclass S(np.float64):\n    def __eq__(self, o):\n        return True\n"
        "    __ne__ = __lt__ = __gt__ = __eq__\ndef f(x):\n    return S(9.0)\n"
    ),
    "array of objects that are always equal": (
        "import numpy as np\nclass E:\n    def __eq__(self, o):\n        return True\n    __hash__ = object.__hash__\n"
        "def f(x):\n    return np.array([E()], dtype=object)\n"
    ),
}


@needs_numpy
@pytest.mark.parametrize("code", NUMPY_LIARS.values(), ids=NUMPY_LIARS.keys())
def test_numpy_values_that_lie_about_their_comparisons_win_nothing(numpy_pool, code):
    tests = ["assert f(1) == 0.5", "assert f(1) == 5", "assert f(1) == True", "assert f(1) == [7, 9]"]
    tests += ["assert f(1) is None", "assert 10 < f(1)", "r = f(1)\nassert r == 5"]
    g = run(numpy_pool, Task("t", "", tests), code, Limits(wall_s=20.0))
    assert sum(g.per_test[:-1]) <= 1 and not g.per_test[-1], g.failures


@needs_numpy
def test_a_package_that_is_installed_but_not_offered_says_so(pool):
    g = run(pool, Task("t", "", ["assert f(1) == 1"]), "import numpy\ndef f(x):\n    return x\n")
    assert g.failures == [
        "test 0: solution failed to load: ModuleNotFoundError: numpy is not offered to programs; add it to "
        "sandbox.packages"
    ]
    g = run(pool, Task("t", "", ["assert f(1) == 1"]), "import no_such_module_azr\n")
    assert g.failures == ["test 0: solution failed to load: ModuleNotFoundError: No module named 'no_such_module_azr'"]
