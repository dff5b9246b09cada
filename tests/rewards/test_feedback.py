"""Execution feedback on the real bwrap sandbox: a program graded on a task's public tests, and the message that
shows its failures (input, expected output, its output, its error or "timeout"), capped in count and length; a
passing program gets none; nothing of a hidden test ever appears in a message."""

from __future__ import annotations

import json
import re

import pytest

from azr.config import FeedbackConfig
from azr.data import Task, encode_all, load_tasks
from azr.rewards import grade, hidden_task, public_feedback_many, public_task
from azr.rewards.feedback import CUT, NO_CODE
from azr.sandbox import Limits, open_pool

LIMITS = Limits(wall_s=3.0)


@pytest.fixture(scope="module")
def pool():
    with open_pool("bwrap", workers=2) as p:
        yield p


def _task(tmp_path, row):
    path = tmp_path / f"{row['id']}.jsonl"
    path.write_text(json.dumps(row) + "\n")
    return load_tasks(path)[0]


def test_the_outcomes_carry_input_expected_and_actual_for_each_kind(pool, tmp_path):
    calls = _task(tmp_path, {"id": "c", "prompt": "p", "entry_point": "f", "tests": [{"args": [2, [3]], "output": 5}]})
    (outcome,) = grade(calls, "def f(a, b):\n    return a * b[0]\n", pool, LIMITS, detail=True).outcomes
    assert (outcome.input, outcome.expected, outcome.actual, outcome.error) == ("f(2, [3])", "5", "6", None)
    asserts = Task("a", "p", ["assert sorted(f(2)) == [1, 2]", "y = f(0)\nassert y == [0]"])
    first, second = grade(asserts, "def f(n):\n    return [n, 7]\n", pool, LIMITS, detail=True).outcomes
    assert (first.input, first.expected, first.actual) == ("sorted(f(2))", "[1, 2]", "[2, 7]")
    assert (second.input, second.expected, second.actual) == ("y = f(0)\nassert y == [0]", "[0]", "[0, 7]")
    cases = _task(tmp_path, {"id": "s", "prompt": "p", "tests": [{"input": "2 3\n", "output": "5\n"}]})
    (outcome,) = grade(cases, "print(sum(map(int, input().split())) + 1)", pool, LIMITS, detail=True).outcomes
    assert (outcome.input, outcome.expected, outcome.actual, outcome.error) == ("2 3\n", "5\n", "6\n", None)
    module = "from solution import f\n\ndef test_one():\n    assert f(1) == 2\n"
    tests = _task(tmp_path, {"id": "m", "prompt": "p", "tests": [{"pytest": module}]})
    (outcome,) = grade(tests, "def f(x):\n    return 0\n", pool, LIMITS, detail=True).outcomes
    assert (outcome.input, outcome.expected, outcome.actual) == ("def test_one():\n    assert f(1) == 2", "2", "0")
    assert grade(tests, "def f(x):\n    return 0\n", pool, LIMITS).outcomes == []  # only when asked


def test_failures_are_shown_with_input_expected_output_and_error(pool):
    task = Task("t", "p", ["assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(0, 0) == 0"], public_tests=2)
    passed, text, _ = public_feedback_many(
        [(task, "def add(a, b):\n    return a * b\n")], FeedbackConfig(), pool, LIMITS
    )[0]
    assert not passed
    assert text.startswith("Your program failed 1 of the 2 public tests:")
    assert "Test 1\nInput: add(1, 2)\nExpected output: 3\nYour output: 2" in text
    assert "Test 2" not in text.split("Test 1")[0] and "Input: add(2, 2)" not in text  # add(2, 2) passes: not shown
    raised, text, _ = public_feedback_many(
        [(task, "def add(a, b):\n    return a / 0\n")], FeedbackConfig(), pool, LIMITS
    )[0]
    assert not raised and "Error: ZeroDivisionError: division by zero" in text and "Your output" not in text
    assert public_feedback_many([(task, "def add(a, b):\n    return a + b\n")], FeedbackConfig(), pool, LIMITS)[0] == (
        True,
        "",
        1.0,
    )
    _, text, _ = public_feedback_many([(task, "def add(a, b)\n    return a + b\n")], FeedbackConfig(), pool, LIMITS)[0]
    assert text.startswith("Your program failed to load, so none of the 2 public tests ran.\nError: SyntaxError: ")
    assert "Input" not in text


def test_stdin_cases_show_what_the_program_printed_and_its_last_error_line(pool, tmp_path):
    row = {"id": "io", "prompt": "p", "public_tests": 2, "tests": [{"input": "3\n", "output": "9\n"}] * 2}
    row["tests"] = [
        {"input": "3\n", "output": "9\n"},
        {"input": "x\n", "output": "0\n"},
        {"input": "4\n", "output": "16\n"},
    ]
    task = _task(tmp_path, row)
    _, text, _ = public_feedback_many([(task, "print(int(input()) * 2)")], FeedbackConfig(), pool, LIMITS)[0]
    assert "Test 1\nInput: 3\nExpected output: 9\nYour output: 6" in text
    assert "Test 2\nInput: x\nExpected output: 0\nYour output: (nothing)\nError: ValueError: invalid literal" in text


def test_timeouts_say_timeout(pool, tmp_path):
    loop = "def f(x):\n    while True:\n        pass\n"
    task = Task("t", "p", ["assert f(1) == 1", "assert f(2) == 2"], public_tests=1, timeout_s=1.0)
    passed, text, _ = public_feedback_many([(task, loop)], FeedbackConfig(), pool, LIMITS)[0]
    assert not passed and "Input: f(1)\nExpected output: 1\nError: timeout" in text
    cases = _task(
        tmp_path, {"id": "io", "prompt": "p", "timeout_s": 1, "tests": [{"input": "1\n", "output": "1\n"}] * 2}
    )
    passed, text, _ = public_feedback_many([(cases, "while True:\n    pass\n")], FeedbackConfig(), pool, LIMITS)[0]
    assert not passed and "Error: timeout" in text and "Test 1\nInput: 1\nExpected output: 1" in text


def test_at_most_max_failures_are_shown_and_each_field_is_cut_to_max_chars(pool, tmp_path):
    long_in = "7 " * 400
    tests = [{"input": f"{i} {long_in}\n", "output": f"{'9' * 500}{i}\n"} for i in range(5)]
    task = _task(tmp_path, {"id": "big", "prompt": "p", "public_tests": 5, "tests": tests})
    program = "print('8' * 1000)\nraise RuntimeError('e' * 900)"
    cfg = FeedbackConfig(max_failures=2, max_chars=40)
    _, text, _ = public_feedback_many([(task, program)], cfg, pool, LIMITS)[0]
    assert text.startswith("Your program failed 5 of the 5 public tests; the first 2:")
    assert [int(n) for n in re.findall(r"^Test (\d+)$", text, re.M)] == [1, 2]
    fields = re.findall(r"^(?:Input|Expected output|Your output|Error): (.*)$", text, re.M)
    assert len(fields) == 8 and all(len(f) <= 40 + len(CUT) and f.endswith(CUT) for f in fields), fields
    assert len(text) < 1200


def test_a_missing_answer_and_a_task_without_public_tests(pool):
    task = Task("t", "p", ["assert f() == 1", "assert f() == 1"], public_tests=0)
    assert public_feedback_many([(task, None)], FeedbackConfig(), pool, LIMITS)[0] == (False, NO_CODE, 0.0)
    assert public_feedback_many([(task, "def f():\n    return 2\n")], FeedbackConfig(), pool, LIMITS)[0] == (
        True,
        "",
        1.0,
    )


HIDDEN_INPUT, HIDDEN_EXPECTED = "hidden_sentinel_in_91", "hidden_sentinel_out_37"


def test_nothing_of_a_hidden_test_appears_in_any_feedback(pool, tmp_path):
    """Wrong programs of every sort, on tasks of each kind whose hidden tests hold marker texts: no message holds
    either marker, nor the hidden tests' own source."""
    calls = {"id": "c", "prompt": "p", "entry_point": "f", "public_tests": 1}
    calls["tests"] = [{"args": ["a"], "output": "a!"}, {"args": [HIDDEN_INPUT], "output": HIDDEN_EXPECTED}]
    cases = {"id": "s", "prompt": "p", "public_tests": 1}
    cases["tests"] = [
        {"input": "a\n", "output": "a!\n"},
        {"input": HIDDEN_INPUT + "\n", "output": HIDDEN_EXPECTED + "\n"},
    ]
    asserts = {"id": "a", "prompt": "p", "public_tests": 1}
    asserts["tests"] = ["assert f('a') == 'a!'", f"assert f({HIDDEN_INPUT!r}) == {HIDDEN_EXPECTED!r}"]
    module = "from solution import f\n\ndef test_a():\n    assert f('a') == 'a!'\n\ndef test_b():\n"
    module += f"    assert f({HIDDEN_INPUT!r}) == {HIDDEN_EXPECTED!r}\n"
    modules = {"id": "m", "prompt": "p", "tests": [{"pytest": module}]}
    tasks = [_task(tmp_path, row) for row in (calls, cases, asserts, modules)]
    function_programs = [
        "def f(s):\n    return s\n",
        "def f(s):\n    raise ValueError(s)\n",
        "def f(s):\n    import sys\n    print(sys.argv, open(__file__).read() if '__file__' in dir() else '')\n",
        "import gc\ndef f(s):\n    return [o for o in gc.get_objects() if isinstance(o, str) and 'sentinel' in o]\n",
        "import gc\ndef f(s):\n    return [str(o)[:3000] for o in gc.get_objects() if 'def test' in str(o)[:3000]]\n",
        "def f(s):\n    while True:\n        pass\n",
        "this is not python",
    ]
    stdin_programs = ["print(input())", "import sys\nprint(sys.stdin.read() * 3)\nraise SystemExit(3)", "1/0"]
    pairs = [(t, p) for t in tasks if not t.stdio for p in function_programs]
    pairs += [(t, p) for t in tasks if t.stdio for p in stdin_programs]
    results = public_feedback_many(pairs, FeedbackConfig(max_chars=10_000, max_failures=64), pool, LIMITS)
    assert all(not check.passed for check in results)
    for (task, program), (_, text, _) in zip(pairs, results, strict=True):
        assert text and HIDDEN_INPUT not in text and HIDDEN_EXPECTED not in text, (task.id, program, text)
    for task in tasks:  # the split itself: the public task holds no hidden text, the hidden task all of it
        assert HIDDEN_INPUT not in json.dumps(encode_all(public_task(task).tests))
        assert HIDDEN_INPUT in json.dumps(encode_all(hidden_task(task).tests))


def test_a_test_module_nested_700_deep_is_cut_to_its_public_tests_without_a_recursion_error(pool, tmp_path):
    """`azr eval --turns` cuts a module to its public tests before running them: by the lines each hidden test spans,
    so an expression nested hundreds deep (which `ast.unparse` recurses through) is a failed sample, not a crash.
    (Grading cannot plan a module that deep either, and says so: never a pass.)"""
    deep = "+".join(["1"] * 700)
    module = f"from solution import f\n\ndef test_a():\n    assert f(1) == {deep}\n\nclass TestB:\n"
    module += f"    def test_b(self):\n        assert f({HIDDEN_INPUT!r}) == {HIDDEN_EXPECTED!r}\n"
    task = _task(tmp_path, {"id": "m", "prompt": "p", "tests": [{"pytest": module}], "public_tests": 1})
    assert HIDDEN_INPUT not in json.dumps(encode_all(public_task(task).tests))  # the method is cut too
    ((passed, text, _),) = public_feedback_many([(task, "def f(x):\n    return 700\n")], FeedbackConfig(), pool, LIMITS)
    assert not passed and "Error: no tests ran" in text and HIDDEN_INPUT not in text
    assert grade(hidden_task(task), "def f(x):\n    return 700\n", pool, LIMITS).failures == ["test 0: no tests ran"]


def test_the_humaneval_public_check_reads_as_a_call_of_the_entry_point(pool):
    from azr.data.humaneval import load_humaneval

    problem = next(p for p in load_humaneval() if p.id == "HumanEval/0")
    wrong = problem.stub + "    return False\n"
    passed, text, _ = public_feedback_many([(problem.task, wrong)], FeedbackConfig(), pool, Limits(wall_s=6.0))[0]
    assert not passed
    assert (
        "Input: has_close_elements([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3)\nExpected output: True\nYour output: False"
        in text
    )
