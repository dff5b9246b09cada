"""Inputs for the audit: the calls the tests make, and new ones made from them in the tests' own domain."""

from __future__ import annotations

import ast

from azr.audit.cases import calls_in_tests, compares_values, generated_inputs, inputs_in_tests
from azr.data import StdioCase, Task

SOLUTION = "def f(xs, k):\n    return sorted(xs)[:k]\n"


def test_the_calls_of_the_reference_functions_with_literal_arguments_are_found():
    task = Task("t", "p", ["assert f([3, 1], 1) == [1]", "x = 2\nassert f([x], 1) == [2]", "assert g(1)"], SOLUTION)
    assert [c.source() for c in calls_in_tests(task)] == ["f([3, 1], 1)"]


def test_humaneval_check_candidate_calls_count_as_calls_of_the_entry_point():
    test = "def check(candidate):\n    assert candidate([2, 1], 1) == [1]\n\ncheck(f)\n"
    assert inputs_in_tests(Task("t", "p", [test], SOLUTION)) == ["f([2, 1], 1)"]


def test_generated_inputs_are_new_deterministic_literal_and_in_the_tests_domain():
    task = Task("t", "p", ["assert f([3, 1, 2], 2) == [1, 2]", "assert f([5], 1) == [5]"], SOLUTION)
    made = generated_inputs(task, 40)
    assert made == generated_inputs(task, 40) and len(made) == len(set(made)) > 10
    assert not set(made) & set(inputs_in_tests(task))
    for source in made:
        call = ast.parse(source, mode="eval").body
        values = [ast.literal_eval(a) for a in call.args]
        assert isinstance(values[0], list) and isinstance(values[1], int)
        assert values[1] >= 0 and all(x >= 0 for x in values[0])  # the tests use no negative number


def test_stdin_inputs_change_one_integer_and_keep_its_sign():
    task = Task("io", "p", [StdioCase("2\n0 7\n", "7")], "input()\nprint(max(map(int, input().split())))\n")
    made = generated_inputs(task, 20)
    assert "3\n0 7\n" in made and "2\n1 7\n" in made and "2\n0 6\n" in made
    assert all("-" not in m for m in made)


def test_stdin_inputs_of_words_only_get_word_edits_of_the_same_length_and_alphabet():
    task = Task("w", "p", [StdioCase("WBWB\nBBWW\n", "2")], "print(input().count('W'))\n")
    made = generated_inputs(task, 30)
    assert made == generated_inputs(task, 30) and len(made) == len(set(made)) >= 10
    assert "WBWB\nBBWW\n" not in made and "BWBW\nBBWW\n" in made  # a word reversed
    for text in made:
        assert [len(w) for w in text.split()] == [4, 4] and set(text) <= set("WB\n")


def test_a_generator_call_inside_list_is_an_input_with_its_wrapper():
    task = Task("g", "p", ["assert list(gen([1, 2], 1)) == [1]"], "def gen(xs, n):\n    yield from xs[:n]\n")
    assert inputs_in_tests(task) == ["list(gen([1, 2], 1))"]
    assert all(m.startswith("list(gen(") for m in generated_inputs(task, 10))


def test_tests_that_check_only_a_property_do_not_compare_values():
    exact = Task("e", "p", ["assert sorted(f([2, 1], 1)) == [1]"], SOLUTION)
    prop = Task("p", "p", ["r = f([2, 1], 1)\nassert len(r) == 1 and r[0] in (1, 2)"], SOLUTION)
    assert compares_values(exact) and not compares_values(prop)
