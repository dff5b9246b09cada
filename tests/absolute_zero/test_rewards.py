"""The mode's reward functions on TRL's columns: learnability, the configured values, None for the other role and
for sandbox failures (counted, and the run stops past the limit)."""

from __future__ import annotations

import pytest

from azr.absolute_zero import Judge, RewardValues, Rules, SolveReward, Triplet, build_az_rewards, learnability
from azr.config import AbsoluteZeroConfig
from azr.sandbox import Limits, SandboxUnhealthy, open_pool

ADD = Triplet("def f(a, b):\n    return a + b", ("1, 2",), ("3",))
RIGHT, WRONG = "```python\n3\n```\nFinal answer: f", "```python\n4\n```\nFinal answer: f"


def test_learnability():
    assert [learnability(r) for r in (0.0, 0.25, 0.5, 1.0)] == [0.0, 0.75, 0.5, 0.0]
    assert learnability(1.0, unlearnable=-0.2) == -0.2 and learnability(0.0, unlearnable=-0.2) == -0.2


def columns(roles, reasons, samples):
    n = len(roles)
    return {
        "az_role": roles,
        "az_type": ["deduction"] * n,
        "az_task": [ADD.to_line()] * n,
        "az_reason": reasons,
        "az_samples": samples,
    }


def test_rewards_by_role(az_pool):
    judge = Judge(az_pool, Limits(), Rules(), 2)
    cfg = AbsoluteZeroConfig(solve_wrong=-0.25, propose_invalid=-2.0, propose_unlearnable=-0.5)
    propose, solve = build_az_rewards(judge, cfg)
    cols = columns(
        ["propose", "propose", "propose", "propose", "solve", "solve", "solve"],
        ["", "", "banned_import", "format", "", "", ""],
        [[RIGHT, WRONG, WRONG, WRONG], [RIGHT] * 4, [], [], [], [], []],
    )
    completions = ["p1", "p2", "p3", "p4", RIGHT, WRONG, "no block"]
    assert propose(completions=completions, **cols) == [0.75, -0.5, -2.0, -2.0, None, None, None]
    assert solve(completions=completions, **cols) == [None, None, None, None, 1.0, -0.25, -1.0]
    assert propose.last_details[0] == {"valid": True, "reason": "", "solve_rate": 0.25, "solved": "1/4"}
    assert solve.last_details[6]["verdict"] == "format"


def test_a_sandbox_failure_is_none_and_stops_the_run_past_the_limit():
    pool = open_pool("bwrap", workers=1)
    pool.close()  # every run now comes back as the sandbox's own error
    judge = Judge(pool, Limits(), Rules(), 2, max_rate=0.05)
    solve = SolveReward(judge, RewardValues())
    assert solve(completions=[RIGHT], **columns(["solve"], [""], [[]])) == [None]
    with pytest.raises(SandboxUnhealthy, match="infrastructure"):
        judge.check()
