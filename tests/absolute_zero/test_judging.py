"""Judging solver answers in the real sandbox: each verdict of each task type, exact types, the answer format, and the
cache that lets a proposal's learnability samples and the solver's rows share one run."""

from __future__ import annotations

import pytest

from azr.absolute_zero import Judge, Rules, Triplet
from azr.sandbox import Limits

ADD = Triplet("def f(a, b):\n    return a + b", ("1, 2",), ("3",))
SQUARES = Triplet(
    "def f(n):\n    return [i * i for i in range(n)]",
    ("0", "2", "3", "4"),
    ("[]", "[0, 1]", "[0, 1, 4]", "[0, 1, 4, 9]"),
    message="the first n squares",
    many=True,
)


def answer(block: str) -> str:
    return f"Let me think.\n```python\n{block}\n```\nFinal answer: f"


@pytest.fixture(scope="module")
def judge(az_pool) -> Judge:
    return Judge(az_pool, Limits(), Rules(timeout_s=1.0), induction_shown=2)


CASES = [
    ("deduction", ADD, answer("3"), "correct"),
    ("deduction", ADD, answer("4"), "wrong"),
    ("deduction", ADD, answer("3.0"), "wrong"),  # equal, another type: not the output f returns
    ("deduction", ADD, answer("f(1, 2)"), "format"),  # not a literal: no running the program to answer
    ("deduction", ADD, "3", "format"),  # no code block
    ("deduction", ADD, "```python\n3\n```", "format"),  # no Final answer line
    ("abduction", ADD, answer("1, 2"), "correct"),
    ("abduction", ADD, answer("0, 3"), "correct"),  # any input that gives the output
    ("abduction", ADD, answer("b=2, a=1"), "correct"),
    ("abduction", ADD, answer("2, 2"), "wrong"),
    ("abduction", ADD, answer("'a', 1"), "wrong"),  # the program raises: wrong, not a crash of the judge
    ("abduction", ADD, answer("__import__('os')"), "format"),  # not literal arguments
    ("induction", SQUARES, answer("def f(n):\n    return [i * i for i in range(n)]"), "correct"),
    ("induction", SQUARES, answer("def f(n):\n    return [[], [0, 1]][n // 2]"), "wrong"),  # only the shown pairs
    ("induction", SQUARES, answer("def g(n):\n    return n"), "format"),  # no f
    ("induction", SQUARES, answer("import os\ndef f(n):\n    return [i * i for i in range(n)]"), "wrong"),
    ("induction", SQUARES, answer("def f(n):\n    while True:\n        pass"), "wrong"),  # a timeout
]


def test_each_verdict(judge):
    outcomes = judge.judge([(kind, task, text) for kind, task, text, _ in CASES])
    got = [o.verdict for o in outcomes]
    assert got == [want for *_, want in CASES], [(c[2][-60:], o) for c, o in zip(CASES, outcomes, strict=True)]


def test_verdicts_are_cached(judge):
    jobs = [("deduction", ADD, answer("17"))] * 3
    before = judge.pool.stats["runs"]
    assert [o.verdict for o in judge.judge(jobs)] == ["wrong"] * 3
    assert [o.verdict for o in judge.judge(jobs)] == ["wrong"] * 3
    assert judge.pool.stats["runs"] - before == 1
