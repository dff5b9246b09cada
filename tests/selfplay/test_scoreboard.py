"""Scoreboard: per-problem and per-completion outcome counts, Wilson intervals against hand-computed values, the
frontier, and atomic writes. Pure bookkeeping: no servers, no sandbox."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

from azr.selfplay.scoreboard import Frontier, Scoreboard, wilson_interval


def rows_for(spec: list[tuple[str, bool | None, list[bool | None]]], hint: str = ""):
    """(task id, opponent_passed, policy verdict per completion) -> rows and verdicts, one per completion."""
    rows, passed = [], []
    for task_id, opponent, verdicts in spec:
        for verdict in verdicts:
            rows.append({"task_id": task_id, "opponent_passed": opponent, "hint": hint})
            passed.append(verdict)
    return rows, passed


BATCH = [
    ("t1", False, [True, False]),  # policy only
    ("t2", True, [False, False]),  # opponent only
    ("t3", True, [True, False]),  # both
    ("t4", False, [False, False]),  # neither
    ("t5", None, [True, False]),  # opponent unavailable: not a loss, not a win
    ("t6", True, [None, None]),  # the sandbox failed on every completion: ungraded
]


def test_wilson_interval_matches_hand_computed_values():
    # 7/10, z=1.96: centre 0.89208 / 1.38416 = 0.644492; half 1.96 * sqrt(0.021 + 0.009604) / 1.38416 = 0.247719
    low, high = wilson_interval(7, 10)
    assert low == pytest.approx(0.396773, abs=1e-6) and high == pytest.approx(0.892211, abs=1e-6)
    # 0/5: centre = half = 0.38416 / 1.76832
    assert wilson_interval(0, 5) == pytest.approx((0.0, 0.217246 * 2), abs=1e-6)
    assert wilson_interval(5, 5) == pytest.approx((1 - 0.434492, 1.0), abs=1e-6)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_problem_and_completion_outcomes_are_counted():
    board = Scoreboard()
    results = board.record(3, *rows_for(BATCH))
    assert {r.task_id: r.outcome for r in results} == {
        "t1": "policy_only",
        "t2": "opponent_only",
        "t3": "both",
        "t4": "neither",
        "t5": "unavailable",
        "t6": "ungraded",
    }
    assert dict(board.problems) == {
        "policy_only": 1,
        "opponent_only": 1,
        "both": 1,
        "neither": 1,
        "unavailable": 1,
        "ungraded": 1,
    }
    assert dict(board.completions) == {
        "win": 1,  # t1's passing completion
        "both_fail": 3,  # t1's failing one, t4's two
        "loss": 3,  # t2's two, t3's failing one
        "both_pass": 1,  # t3's passing one
        "unavailable": 2,  # t5: whatever the policy did
        "ungraded": 2,  # t6
    }
    assert results[0].completions == 2 and results[0].passed == 1 and results[0].row["task_id"] == "t1"


def test_win_rate_counts_decisive_matches_only():
    board = Scoreboard()
    for step in range(1, 8):  # 7 problems won
        board.record(step, *rows_for([(f"w{step}", False, [True])]))
    for step in range(8, 11):  # 3 lost
        board.record(step, *rows_for([(f"l{step}", True, [False])]))
    board.record(11, *rows_for([("tie", True, [True]), ("gone", None, [True]), ("n", False, [False])]))
    rate = board.win_rate("problem")
    assert (rate["wins"], rate["decisive"], rate["rate"]) == (7, 10, 0.7)
    assert (rate["low"], rate["high"]) == pytest.approx((0.396773, 0.892211), abs=1e-6)
    assert board.win_rate("completion")["decisive"] == 10
    assert Scoreboard().win_rate()["rate"] is None


def test_hinted_rows_are_counted_apart_and_never_as_matches():
    board = Scoreboard()
    rows, passed = rows_for([("t1", None, [True, False, True])], hint="think about sorting")
    assert board.record(1, rows, passed) == []
    assert dict(board.hinted) == {"problems": 1, "completions": 3, "passed": 2}
    assert sum(board.problems.values()) == sum(board.completions.values()) == 0


def test_frontier_is_deduplicated_with_counts_steps_and_solves():
    board = Scoreboard()
    board.record(1, *rows_for(BATCH))
    board.record(2, *rows_for([("t2", False, [False]), ("t4", False, [False])]))
    board.record(5, *rows_for([("t4", True, [True])]))  # the policy solves t4 later
    assert board.frontier.task_ids() == ["t2", "t4"]
    assert board.frontier.entries["t2"] == {
        "count": 2,
        "first_step": 1,
        "last_step": 2,
        "last_solved_step": None,
        "outcomes": {"opponent_only": 1, "neither": 1},
    }
    assert board.frontier.entries["t4"]["last_solved_step"] == 5
    assert board.frontier.task_ids(unsolved_only=True) == ["t2"]


def test_the_trainer_observer_reads_verdicts_from_the_graders_details():
    board = Scoreboard()
    rows, _ = rows_for([("t1", False, [None, None]), ("t2", True, [None])])
    details = [{"status": "passed"}, {"status": "error"}, {"status": "timeout"}]
    results = board(SimpleNamespace(step=4, inputs=rows, details=details))
    assert [(r.outcome, r.completions, r.passed) for r in results] == [("policy_only", 1, 1), ("opponent_only", 1, 0)]
    assert board(SimpleNamespace(step=5, inputs=rows, details=[])) == []  # no verdicts: nothing counted


def test_write_is_atomic_and_round_trips(tmp_path, monkeypatch):
    board = Scoreboard()
    board.record(1, *rows_for(BATCH))
    path, frontier_path = tmp_path / "scoreboard.json", tmp_path / "frontier.json"
    board.write(path)
    board.frontier.write(frontier_path)
    first = path.read_text()
    assert json.loads(first) == board.to_json()

    board.record(2, *rows_for(BATCH))

    def crash(*args):
        raise OSError("disk gone mid-write")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        board.write(path)
    assert path.read_text() == first  # the old version, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frontier.json", "scoreboard.json"]  # no temp file left
    monkeypatch.undo()

    board.write(path)
    again = Scoreboard.from_json(json.loads(path.read_text()), json.loads(frontier_path.read_text()))
    assert again.problems == board.problems and again.completions == board.completions
    assert again.last_step == 2 and again.frontier.task_ids() == ["t2", "t4"]
    assert Frontier.from_json({}).task_ids() == []
