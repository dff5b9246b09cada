"""stdin/stdout cases and setup code, graded in the real sandbox: one run of the program per case, its output compared
outside the sandbox as judges compare, per-case time limits, partial credit, and the tricks that must not pass.

Every test that runs code uses one module-wide `bwrap` pool whose workers preload the harness, as training's do.
"""

from __future__ import annotations

import pytest

from azr.data import StdioCase, Task
from azr.rewards.grading import grade, grade_many, task_limits
from azr.rewards.harness import harness_preload
from azr.rewards.stdio import compare_output, judge_output, output_cap
from azr.sandbox import Limits, open_pool

QUICK = Limits(wall_s=2.0)


def cases(*pairs: tuple[str, str], **options) -> list[StdioCase]:
    return [StdioCase(i, o, **options) for i, o in pairs]


ADD = Task("add", "Read two integers, print their sum.", cases(("1 2\n", "3\n"), ("5 5\n", "10\n"), ("-1 1\n", "0\n")))
RIGHT = "a, b = map(int, input().split())\nprint(a + b)\n"


@pytest.fixture(scope="module")
def pool():
    with open_pool("bwrap", workers=2, preload=harness_preload()) as p:
        yield p


def run(pool, task: Task, code: str, limits: Limits = QUICK):
    return grade(task, code, pool, limits)


# ------------------------------------------------------------------------------------------------- comparison
@pytest.mark.parametrize(
    ("expected", "actual", "compare", "tol", "ok"),
    [
        ("3\n", "3", "lines", None, True),
        ("1 2\n3\n", "1 2   \n3\n\n\n", "lines", None, True),  # trailing whitespace of lines and of the whole
        ("1 2\n", "1  2\n", "lines", None, False),  # inner whitespace counts line-wise
        ("1 2\n", "1\n2", "tokens", None, True),
        ("0.333333\n", "0.3333331", "tokens", 1e-6, True),
        ("0.333333\n", "0.34", "tokens", 1e-6, False),
        ("1e9\n", "1000000001", "tokens", 1e-6, True),  # relative for large values
        ("YES\n", "yes", "lines", None, False),
        ("nan\n", "nan", "tokens", 1e-6, True),  # equal text is equal
        ("1\n", "inf", "tokens", 1e9, False),
    ],
)
def test_outputs_compare_as_judges_do(expected, actual, compare, tol, ok):
    assert (compare_output(StdioCase("", expected, compare, tol), actual) is None) == ok


def test_a_report_fails_on_time_runtime_error_or_too_much_output():
    case = StdioCase("", "3")
    assert judge_output(case, {"out": "3", "exit": 0}) is None
    assert judge_output(case, {"out": "3", "exit": 1}).startswith("runtime error")
    assert judge_output(case, {"out": "3", "timeout": True, "limit_s": 2}).startswith("time limit exceeded")
    assert judge_output(case, {"out": "3", "exit": 0, "cut": True}) == "output limit exceeded"
    assert judge_output(case, ["3"]).startswith("malformed")


def test_the_output_cap_hides_the_expected_length():
    assert output_cap(StdioCase("", "YES")) == output_cap(StdioCase("", "NO")) == 64 * 1024
    assert output_cap(StdioCase("", "x" * 100_000)) == 1 << 18


# ------------------------------------------------------------------------------------------------- verdicts
def test_a_right_program_passes_every_case(pool):
    g = run(pool, ADD, RIGHT)
    assert (g.status, g.tests_passed, g.tests_total) == ("passed", 3, 3), g.failures


def test_stdin_read_every_way_and_exit_0_pass(pool):
    for code in (
        "import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)\nsys.exit(0)",
        "import sys\na, b = map(int, sys.stdin.buffer.readline().split())\nsys.stdout.write(f'{a + b}\\n')",
        "a, b = map(int, open(0).read().split())\nprint(a + b, end='   \\n\\n')\nexit()",
    ):
        g = run(pool, ADD, code)
        assert g.passed, (code, g.failures)


def test_partial_credit_counts_cases(pool):
    g = run(pool, ADD, "a, b = map(int, input().split())\nprint(a + b if a != 5 else 11)")
    assert (g.status, g.tests_passed, g.per_test) == ("failed", 2, [True, False, True])
    assert g.failures == ["test 1: wrong answer: line 1: expected '10', got '11'"]


def test_a_wrong_or_crashing_program_fails(pool):
    assert run(pool, ADD, "print(3)").tests_passed == 1
    g = run(pool, ADD, "print(3)\nraise ValueError")  # right output for case 0, then a runtime error
    assert (g.status, g.tests_passed) == ("failed", 0) and "runtime error (exit 1)" in g.failures[0]
    assert run(pool, ADD, "import sys\nprint(3)\nsys.exit(2)").tests_passed == 0
    g = run(pool, ADD, "def f(:\n")
    assert g.tests_passed == 0 and "SyntaxError" in g.failures[0]


def test_each_case_has_its_own_time_limit(pool):
    # 2 s a case: a wall-clock limit, so short enough to be quick but far above a case's run on a loaded machine
    # (0.5 s once failed case 3 in CI, with both cores busy)
    task = Task("slow", "p", cases(("1", "1"), ("2", "2"), ("3", "3")), timeout_s=2.0)
    code = "import time\nn = int(input())\nif n == 2:\n    time.sleep(30)\nprint(n)"
    g = grade(task, code, pool, Limits(wall_s=5.0))
    assert g.per_test == [True, False, True] and g.status == "timeout"
    assert g.failures == ["test 1: time limit exceeded (2.0 s for this case)"]
    assert task_limits(task, QUICK).wall_s == pytest.approx(7.0)  # 3 cases x 2 s, plus a second


def test_each_case_starts_fresh(pool):
    code = "import os\nopen('mark', 'a').write('x')\nprint(len(open('mark').read()))"
    task = Task("fresh", "p", cases(("", "1"), ("", "1")))
    g = run(pool, task, "import sys\nsys.modules.setdefault('seen', []).append(1)\nprint(len(sys.modules['seen']))")
    assert g.passed, g.failures  # no Python state carries over
    assert run(pool, task, code).passed  # nor files in the working folder


def test_lines_tokens_and_tolerance_apply_per_case(pool):
    task = Task("f", "p", cases(("", "0.3333333"), float_tol=1e-4) + cases(("", "1 2"), compare="tokens"))
    g = run(pool, task, "print(1 / 3 if not __import__('os').path.exists('x') else 0)\nopen('x', 'w')")
    assert g.per_test == [True, False]


def test_unicode_output_round_trips(pool):
    task = Task("u", "p", cases(("", "héllo ✓\n")))
    assert run(pool, task, "print('héllo ✓')").passed
    assert not run(pool, task, "import sys\nsys.stdout.buffer.write(b'h\\xe9llo')").passed


# ------------------------------------------------------------------------------------------------- tricks
def test_printed_verdicts_or_harness_text_pass_nothing(pool):
    code = (
        "import json\n"
        "for i in range(3):\n"
        "    print(json.dumps(['0' * 32, i, 'stdout', {'out': '3', 'exit': 0}]))\n"
        "print('passed')\n"
    )
    assert run(pool, ADD, code).tests_passed == 0


def test_a_stolen_nonce_forges_nothing(pool):
    # The case's child can read the nonce from the harness it was forked from, but descriptor 3 is closed in it and
    # the harness is not dumpable: /proc/<harness>/fd/3 (and its memory) cannot be opened by the same uid.
    code = (
        "import json, os, sys\n"
        "nonce = sys.modules['_azr_harness']._state['nonce']\n"
        "for path in ('fd/3', 'mem'):\n"
        "    try:\n"
        "        os.close(os.open(f'/proc/{os.getppid()}/{path}', os.O_WRONLY | os.O_APPEND))\n"
        "        print('opened', path)\n"
        "    except OSError as e:\n"
        "        print(type(e).__name__)\n"
    )
    task = Task("steal", "p", cases(("", "PermissionError\nPermissionError\n")))
    g = run(pool, task, code)
    assert g.passed, g.failures


def test_a_helper_outside_the_case_cannot_write_its_verdicts(pool):
    # A helper in a session of its own escapes the case's process group, stops the harness, writes one right line per
    # case to the harness's descriptor 3 (through /proc, or the report file's path in the scratch folder) and kills
    # the harness: no line but the harness's own may count.
    code = (
        "import json, os, signal, sys, time\n"
        "harness = os.getppid()\n"
        "nonce = sys.modules['_azr_harness']._state['nonce']\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    os.kill(harness, signal.SIGSTOP)\n"
        "    lines = ''.join(json.dumps([nonce, i, 'stdout', {'out': o, 'exit': 0}]) + '\\n'\n"
        "                    for i, o in enumerate(['3', '10', '0'])).encode()\n"
        "    targets = [f'/proc/{harness}/fd/3'] + [os.path.join('../..', n) for n in os.listdir('../..')\n"
        "                                          if n.startswith('.report-')]\n"
        "    for path in targets:\n"
        "        try:\n"
        "            fd = os.open(path, os.O_WRONLY | os.O_APPEND)\n"
        "        except OSError:\n"
        "            continue\n"
        "        os.write(fd, lines)\n"
        "        break\n"
        "    os.kill(harness, signal.SIGKILL)\n"
        "    os._exit(0)\n"
        "time.sleep(1)\n"
    )
    g = run(pool, ADD, code)
    assert g.tests_passed == 0, g.failures


def test_a_helper_that_stops_the_harness_gains_no_time(pool):
    # The case stops the harness and exits at once; a helper in a session of its own works on past the case's limit,
    # prints the answer and wakes the harness, which finds the case long over: a time limit exceeded, not a pass.
    code = (
        "import os, signal, time\n"
        "harness = os.getppid()\n"
        "os.kill(harness, signal.SIGSTOP)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    time.sleep(1.5)\n"
        "    a, b = map(int, input().split())\n"
        "    print(a + b, flush=True)\n"
        "    os.kill(harness, signal.SIGCONT)\n"
        "    os._exit(0)\n"
    )
    task = Task("stop", "p", cases(("1 2\n", "3\n")), timeout_s=1.0)
    g = grade(task, code, pool, Limits(wall_s=5.0))
    assert g.per_test == [False] and g.status == "timeout", g.failures
    assert g.failures == ["test 0: time limit exceeded (1.0 s for this case)"]


def test_a_case_leaves_no_process_behind_in_a_session_of_its_own(pool):
    # A helper that left the case's process group is still found and killed before the next case starts.
    code = (
        "import os, time\n"
        "n = int(input())\n"
        "if n == 1 and os.fork() == 0:\n"
        "    os.setsid()\n"
        "    time.sleep(1)\n"  # a second for the harness to find it, even on a loaded machine
        "    open('../late', 'w').write('x')\n"
        "    os._exit(0)\n"
        "time.sleep(1.5 if n == 2 else 0)\n"
        "print('late' if os.path.exists('../late') else n)\n"
    )
    task = Task("stray", "p", cases(("1", "1"), ("2", "2")), timeout_s=5.0)
    assert grade(task, code, pool, Limits(wall_s=5.0)).per_test == [True, True]


def test_descriptor_3_is_closed_in_a_case(pool):
    task = Task("fd3", "p", cases(("", "closed")))
    code = "import os\ntry:\n    os.write(3, b'x')\n    print('open')\nexcept OSError:\n    print('closed')"
    assert run(pool, task, code).passed


def test_killing_the_harness_fails_the_cases_left(pool):
    code = "import os, signal\na, b = map(int, input().split())\nprint(a + b, flush=True)\nif a == 5:\n"
    code += "    os.kill(os.getppid(), signal.SIGKILL)\n"
    g = run(pool, ADD, code)
    assert g.per_test == [True, False, False] and g.status == "crashed"


def test_a_case_cannot_leave_a_process_behind_for_the_next(pool):
    code = (
        "import os, time\n"
        "n = int(input())\n"
        "if n == 1 and os.fork() == 0:\n"
        "    time.sleep(0.3)\n"
        "    open('late', 'w').write('x')\n"
        "    os._exit(0)\n"
        "time.sleep(0.5 if n == 2 else 0)\n"
        "print('late' if os.path.exists('late') else n)\n"
    )
    task = Task("stray", "p", cases(("1", "1"), ("2", "2")))
    assert run(pool, task, code).per_test == [True, True]


# ------------------------------------------------------------------------------------------------- setup
def test_setup_runs_after_the_solution_and_before_each_test(pool):
    task = Task(
        "tree",
        "p",
        ["assert depth(root) == 2", "root.left = None\nassert depth(root) == 1", "assert depth(root) == 2"],
        setup="root = Node(Node())",
    )
    code = (
        "class Node:\n    def __init__(self, left=None):\n        self.left = left\n"
        "def depth(n):\n    return 0 if n is None else 1 + depth(n.left)\n"
    )
    g = run(pool, task, code)
    assert g.passed, g.failures


def test_a_failing_setup_fails_every_test_with_its_reason(pool):
    task = Task("s", "p", ["assert f() == 1"], setup="import no_such_module")
    g = run(pool, task, "def f():\n    return 1")
    assert g.tests_passed == 0 and "setup: ModuleNotFoundError" in g.failures[0]


def test_setup_reaches_stdin_programs_too(pool):
    task = Task("s", "p", cases(("2", "4")), setup="import math\nK = 2")
    assert run(pool, task, "print(int(input()) * K)").passed


def test_stdin_and_assert_tasks_grade_together(pool):
    asserts = Task("inc", "p", ["assert f(1) == 2"])
    grades = grade_many([(ADD, RIGHT), (asserts, "def f(x):\n    return x + 1"), (ADD, "print(0)")], pool, QUICK)
    assert [g.tests_passed for g in grades] == [3, 1, 1]


def test_cases_mixed_with_asserts_are_never_judged(pool):
    # the loader refuses such rows; a task built by hand that mixes them grades as an error, never as a pass
    for tests in ([*ADD.tests, "assert True"], ["assert True", *ADD.tests]):
        g = run(pool, Task("mixed", "p", tests), RIGHT)
        assert (g.status, g.tests_passed) == ("error", 0)


def test_each_case_sees_only_its_own_input_output_and_stderr(pool):
    """The case files are emptied between cases: a long first output or input, an error written to stderr, or a
    file left in append mode leave nothing for the next case to read or to be judged by."""
    task = Task(
        "echo",
        "Print the input.",
        cases(("x" * 5000 + "\n", "x" * 5000 + "\n"), ("y\n", "y\n"), ("fail\n", "z\n"), ("z\n", "z\n")),
    )
    code = (
        "import fcntl, os, sys\n"
        "fcntl.fcntl(1, fcntl.F_SETFL, os.O_APPEND)\n"
        "line = sys.stdin.read()\n"
        "if line == 'fail\\n':\n"
        "    print('the error line', file=sys.stderr)\n"
        "    sys.exit(3)\n"
        "print(line, end='')\n"
    )
    g = run(pool, task, code)
    assert g.tests_passed == 3 and len(g.failures) == 1, g.failures
    assert "the error line" in g.failures[0]


def test_a_checker_that_runs_out_of_time_grades_timeout_not_crashed(pool):
    slow = "def check(input, expected, output):\n    while True:\n        pass\n"
    task = Task("slow", "Print the input.", cases(("1\n", "1\n")), checker=slow)
    g = run(pool, task, "print(input())\n", Limits(wall_s=1.0))
    assert g.status == "timeout" and not g.passed, g
    assert g.failures == ["test 0: time limit exceeded: the checker ran past the time limit"]


def test_decimals_compare_as_livecodebench_grades_stdout():
    def judged(expected, actual):
        return compare_output(StdioCase("", expected, "decimals"), actual)

    assert judged("2.5\n3 1\n", "2.500000\n3 1") is None
    assert judged("2.5\n", "  2.5  \n\n") is None  # both outputs and each line stripped
    assert judged("1e3 0.10\n", "1000 0.1\n") is None
    assert judged("YES\n", "YES\n") is None  # equal as text: no decimals needed
    assert judged("2.5\n", "2.5000001\n") == "wrong answer: line 1: expected '2.5', got '2.5000001'"
    assert judged("2.5 1\n", "2.5\n") is not None  # a token fewer
    assert judged("2.5\n\n1\n", "2.5\n1\n") == "wrong answer: expected 3 lines, got 2"  # inner blank lines count
    assert judged("yes\n", "YES\n") is not None and judged("nan\n", "nan \n") is None
    assert judged("1\n", "sNaN\n") is not None and judged("NaN\n", "nan\n") is not None
    assert compare_output(StdioCase("", "2.5\n"), "2.500000\n") is not None  # lines: text only
