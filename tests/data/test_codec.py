"""The one encoding of tests as strings (azr/data/codec.py): every kind comes back equal from its string, an assert
snippet is its own string, and anything malformed is refused with a reason rather than read as something else."""

from __future__ import annotations

import pytest

from azr.data import (
    KINDS,
    TEST_TYPES,
    AssertTest,
    CallCase,
    ModuleTest,
    StdioCase,
    Task,
    decode,
    decode_all,
    encode,
    encode_all,
    module_tests,
    task_from_row,
    test_kind,
)

MODULE = "from solution import f\n\ndef test_one():\n    assert f(1) == 2\n"
EVERY_KIND = [
    AssertTest("assert f(1) == 2"),
    AssertTest("assert f(0.1) == 0.3", atol=1e-6, rtol=1e-7),
    StdioCase("1 2\n", "3\n"),
    StdioCase("x\u2028\x00y", "1.0", "tokens", 1e-3),
    StdioCase("", "", "decimals"),
    CallCase("f", [1, [2, None], {"a": "é"}], {"k": [1.5]}),
    CallCase("Solution.go", [], None, {"n": 3}, atol=0.5),
    CallCase("g", [True], 1, any_class=True, rtol=0.1),
    ModuleTest("pytest", MODULE, "test_one"),
    ModuleTest("pytest", MODULE, "test_grid", 3, shared=True, names=(("solution", ("f",)),)),
    ModuleTest("unittest", "import unittest\n", None),
]


@pytest.mark.parametrize("test", EVERY_KIND, ids=lambda t: f"{test_kind(t)}")
def test_every_kind_comes_back_equal_from_its_string(test):
    text = encode(test)
    assert isinstance(text, str) and decode(text) == test and encode(decode(text)) == text


def test_every_kind_of_the_union_is_covered_here():
    assert {test_kind(t) for t in EVERY_KIND} == set(KINDS)
    assert {type(t) for t in EVERY_KIND} == set(TEST_TYPES)


def test_an_assert_snippet_is_its_own_string_and_any_other_test_is_tagged():
    assert encode(AssertTest("assert f(1) == 2")) == "assert f(1) == 2"
    assert decode("assert f(1) == 2") == AssertTest("assert f(1) == 2")
    assert all(encode(t).startswith("\x00") for t in EVERY_KIND if t.kind != "assert" or t.atol is not None)


def test_lists_round_trip_in_order():
    assert decode_all(encode_all(EVERY_KIND)) == EVERY_KIND


def test_strings_written_before_task_options_moved_to_the_task_still_read():
    """Older strings carried the task's prelude and checker in each test: those keys are ignored now."""
    old = (
        '\x00stdio:{"input": "1", "output": "1", "checker": "def check(i, e, o): return True", "prelude": "import os"}'
    )
    assert decode(old) == StdioCase("1", "1")
    assert decode('\x00assert:{"test": "assert f() == 1", "prelude": "import math"}') == AssertTest("assert f() == 1")


@pytest.mark.parametrize(
    "text, why",
    [
        ("\x00stdio:{}", "a malformed stdin/stdout case (missing 'input')"),
        ('\x00stdio:{"input": "1", "output": "1", "compare": "bytes"}', "compare: expected one of"),
        ('\x00call:{"call": 5, "output": 1}', "a malformed function-call case (call: expected a string)"),
        ('\x00call:{"call": "f", "args": {}, "output": 1}', "args, kwargs: expected a list"),
        ('\x00assert:{"test": "assert 1", "atol": "big"}', "expected a number"),
        ('\x00pytest:{"module": 1}', "a malformed pytest test"),
        ("\x00doctest:{}", "unknown test kind 'doctest'"),
        ("\x00stdio:[1]", "not a JSON object"),
        ("\x00stdio:{", "Expecting"),
        ("\x00", "unknown test kind"),
    ],
)
def test_a_malformed_string_is_refused_with_its_reason(text, why):
    with pytest.raises(ValueError) as caught:
        decode(text)
    assert why in str(caught.value)


def test_call_cases_are_equal_as_their_json_is():
    """`[1]` and `[True]` are two cases (they build two different calls), though Python's == says they are one."""
    assert CallCase("f", [1], 1) != CallCase("f", [True], 1)
    assert len({CallCase("f", [1], 1), CallCase("f", [True], 1), CallCase("f", [1], 1)}) == 2
    assert decode(encode(CallCase("f", [1.0], 1))) == CallCase("f", [1.0], 1) != CallCase("f", [1], 1)


def test_a_task_travels_as_columns_with_its_options_once():
    row = {"id": "a", "prompt": "p", "tests": [{"args": [1], "output": 2}], "entry_point": "f", "atol": 0.1}
    row |= {"prelude": "import math"}
    task = task_from_row(row, "r")
    columns = task.grading_columns()
    assert columns["tests"] == ['\x00call:{"call": "f", "args": [1], "output": 2}']  # no option inside a test
    assert (columns["prelude"], columns["atol"], columns["rtol"], columns["checker"]) == (
        "import math",
        0.1,
        None,
        None,
    )
    again = Task(task.id, "", **columns)
    assert again.tests == task.tests and (again.prelude, again.atol) == (task.prelude, task.atol)


def test_module_tests_encode_their_module_and_name():
    tests = module_tests("pytest", MODULE, "here")
    assert [t.test for t in tests] == ["test_one"] and decode_all(encode_all(tests)) == tests
    leap = module_tests("pytest", "from leap import leap_year\n\ndef test_y():\n    assert leap_year(4)\n", "here")
    assert leap[0].names == (("leap", ("leap_year",)),) and decode(encode(leap[0])) == leap[0]
