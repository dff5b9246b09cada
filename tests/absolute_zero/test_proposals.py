"""Proposer and solver prompts, and reading a proposal back from a completion (text only: nothing is parsed as code
in the trainer)."""

from __future__ import annotations

import random

from azr.absolute_zero import (
    Triplet,
    parse_proposal,
    proposal_text,
    proposer_messages,
    rules_text,
    solver_answer,
    solver_messages,
    warm_start_pairs,
)
from azr.config import DEFAULT_IMPORTS
from azr.prompts import SYSTEM_PROMPT, parse_answer

RULES = rules_text(DEFAULT_IMPORTS, 1000)
ADD = Triplet("def f(a, b):\n    return a + b", ("1, 2",), ("3",))
SQUARES = Triplet("def f(n):\n    return n * n", ("1", "2", "3", "4"), ("1", "4", "9", "16"), "squares", True)


def test_a_proposal_is_read_from_its_blocks():
    text = "<think>hmm ```input\nnot this\n```</think>\n```python\ndef f(x):\n    return x\n```\n```input\n[1, 2]\n```"
    assert parse_proposal("deduction", text, None, 4) == Triplet("def f(x):\n    return x", ("[1, 2]",))
    assert parse_proposal("abduction", proposal_text("abduction", ADD), None, 4) == Triplet(ADD.program, ADD.inputs)


def test_a_proposal_out_of_format_is_none():
    program = "```python\ndef f(x):\n    return x\n```\n"
    for text in (program, program + "```input\n1\n```\n```input\n2\n```", "```input\n1\n```", "<think>```python"):
        assert parse_proposal("deduction", text, None, 4) is None, text


def test_an_induction_proposal_is_about_the_program_it_was_shown():
    text = proposal_text("induction", SQUARES)
    found = parse_proposal("induction", text, SQUARES.program, 4)
    assert found == Triplet(SQUARES.program, SQUARES.inputs, message="squares", many=True)
    assert parse_proposal("induction", text, SQUARES.program, 5) is None  # four inputs where five were asked
    assert parse_proposal("induction", text.replace("squares", " "), SQUARES.program, 4) is None  # no message


def test_prompts_show_what_each_role_and_type_needs():
    proposer = proposer_messages("deduction", [ADD], RULES, 4, 2)[1]["content"]
    assert ADD.program in proposer and "Output: 3" in proposer and "bisect" in proposer
    induction = proposer_messages("induction", [ADD], RULES, 4, 2)[1]["content"]
    assert ADD.program in induction and "4 ```input blocks" in induction
    deduction = solver_messages("deduction", ADD, 2, RULES)
    assert deduction[0]["content"] == SYSTEM_PROMPT and "f(1, 2)" in deduction[1]["content"]
    assert "3" not in deduction[1]["content"].split("Input:")[1]  # the answer is not in the question
    abduction = solver_messages("abduction", ADD, 2, RULES)[1]["content"]
    assert "```python\n3\n```" in abduction and "f(1, 2)" not in abduction
    induction_solver = solver_messages("induction", SQUARES, 2, RULES)[1]["content"]
    assert "f(1) == 1\nf(2) == 4" in induction_solver and "f(3)" not in induction_solver
    assert "squares" in induction_solver and SQUARES.program not in induction_solver


def test_reference_answers_are_in_the_house_format():
    for kind, task, code in (("deduction", ADD, "3"), ("abduction", ADD, "1, 2"), ("induction", SQUARES, None)):
        read = parse_answer(solver_answer(kind, task))
        assert read.format_ok and read.code.strip() == (code or task.program)


def test_the_warm_start_teaches_both_roles_of_every_type():
    pairs = warm_start_pairs(["deduction", "induction"], [ADD], [SQUARES], 2, 4, 2, RULES, random.Random(0))
    assert len(pairs) == 4
    answers = [answer for _, answer in pairs]
    assert answers[0] == solver_answer("deduction", ADD) and answers[1] == proposal_text("deduction", ADD)
    assert answers[3] == proposal_text("induction", SQUARES)
