"""The per-turn pass rate of execution feedback, computed in one place (`azr.envs.turn_rates`) for GRPO's metrics,
the train pass rate and `azr eval --turns`, from verdicts graded after the episodes ended (`hidden_verdicts`)."""

from __future__ import annotations

import pytest

from azr.data import load_tasks
from azr.envs import hidden_verdicts, turn_rates
from azr.prompts import reference_answer

TASK = next(t for t in load_tasks("train") if t.id == "str-alternating-caps")
WRONG = reference_answer(TASK.solution.replace("upper = not upper", "upper = upper"), TASK.entry_point)
RIGHT = reference_answer(TASK.solution, TASK.entry_point)


def test_a_stopped_sample_keeps_its_last_program_and_repairs_count_turn_one_failures():
    verdicts = [[False, True], [True], [False, False, False], [False]]
    rates = turn_rates(verdicts, ["a", "a", "b", "c"], 3)
    assert [r["turn"] for r in rates] == [1, 2, 3]
    assert rates[0] == {"turn": 1, "pass_rate": pytest.approx((1 / 2 + 0 + 0) / 3), "repaired": None}
    assert rates[1]["pass_rate"] == pytest.approx((2 / 2 + 0 + 0) / 3)  # task a: both samples pass by turn 2
    assert rates[1]["repaired"] == pytest.approx(1 / 3) and rates[2]["repaired"] == pytest.approx(1 / 3)


def test_the_rate_is_a_mean_over_tasks_and_an_ungraded_verdict_is_left_out():
    # task a: 4 samples, 1 passing; task b: 1 sample, passing. Over samples 2/5; over tasks (1/4 + 1) / 2.
    rates = turn_rates([[True], [False], [False], [False], [True]], ["a", "a", "a", "a", "b"], 1)
    assert rates[0]["pass_rate"] == pytest.approx(0.625)
    rates = turn_rates([[None, True], [False, None]], ["a", "a"], 2)
    assert rates[0]["pass_rate"] == 0.0  # the first sample's turn 1 was not graded
    assert rates[1]["pass_rate"] == 1.0  # the second one's turn 2 was not graded
    assert rates[1]["repaired"] is None  # the only turn-1 failure has no verdict at turn 2
    assert turn_rates([], [], 2) == [
        {"turn": 1, "pass_rate": None, "repaired": None},
        {"turn": 2, "pass_rate": None, "repaired": None},
    ]


def test_each_turn_is_graded_on_the_hidden_tests_and_a_known_final_verdict_is_not_graded_again(grader):
    answers = [[WRONG, RIGHT], ["no code at all"], [RIGHT, WRONG]]
    assert hidden_verdicts(grader, [TASK] * 3, answers) == [[False, True], [False], [True, False]]
    # the final verdicts handed in stand, whatever the answer (GRPO's tests reward already graded it)
    known = hidden_verdicts(grader, [TASK] * 3, answers, known=[False, None, True])
    assert known == [[False, False], [None], [True, True]]
