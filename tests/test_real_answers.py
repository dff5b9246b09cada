"""Answers as SmolLM2-135M-Instruct really writes them (captured from `azr eval` on the held-out split, greedy, 320
tokens, and `solution_then_usage` from the first step of `azr train --config examples/smollm2-135m.yaml`;
tests/smollm2_answers.json), read as azr reads them: prose after a closed fence, a solution followed by a block of
example calls (the solution runs), a repetition loop that runs a function's body to the token budget (never run
half-written), whole definitions before the cut (kept), and the strict format, which such a model never meets."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from azr.prompts import parse_answer

ANSWERS = json.loads((Path(__file__).parent / "smollm2_answers.json").read_text())


def test_prose_after_a_closed_fence_is_not_code():
    answer = parse_answer(ANSWERS["closed_then_prose"]["completion"], "relaxed")
    assert answer.code.startswith("def longest_run(") and "This function" not in answer.code
    ast.parse(answer.code)


def test_a_solution_followed_by_a_block_of_example_calls_runs_the_solution():
    text = ANSWERS["solution_then_usage"]["completion"]
    assert text.count("```") == 4 and "print(Catalan(2))" in text  # the function's block, then the calls' block
    code = parse_answer(text, "relaxed").code
    assert code.startswith("def Catalan(n: int) -> int:") and "print(" not in code


def test_a_loop_cut_off_inside_a_function_body_gives_no_code():
    text = ANSWERS["loop_in_body"]["completion"]
    assert "```" in text and text.count("```") == 1  # opened, never closed: the budget ran out
    assert parse_answer(text, "relaxed").code is None


def test_whole_definitions_before_the_cut_are_kept_and_the_cut_one_dropped():
    code = parse_answer(ANSWERS["whole_defs_then_cut"]["completion"], "relaxed").code
    tree = ast.parse(code)
    assert [n.name for n in tree.body] == ["Node", "bst_delete"]  # bst_delete_tree was cut mid-line: dropped


def test_the_strict_format_reads_none_of_them_and_says_why():
    for case in ANSWERS.values():
        answer = parse_answer(case["completion"], "strict")
        if case["task_id"] == "math-catalan-closed-form":  # two blocks
            assert answer.problem == "expected exactly one fenced code block, found 2"
            continue
        assert answer.code is None and not answer.format_ok
        assert answer.problem in (
            "no 'Final answer:' line after the code block",
            "expected exactly one fenced code block, found 0",
        )
