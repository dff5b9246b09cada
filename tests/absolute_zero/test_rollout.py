"""The rollout without a trainer: slot rows, solver groups filled from the buffer when the batch has too few valid
proposals (and drawn fresh when there are fewer learnability samples than a group), and what it refuses."""

from __future__ import annotations

import pytest

from azr.absolute_zero import Buffers, Rollout, Rules, Triplet, Validator, read_slots, slot_rows
from azr.config import AbsoluteZeroConfig
from azr.rollouts import Episode, Turn
from azr.sandbox import Limits

ADD = Triplet("def f(a, b):\n    return a + b", ("1, 2",), ("3",))
DOUBLE = "```python\ndef f(x):\n    return 2 * x\n```\n```input\n4\n```"


def fake(texts_for):
    calls = []

    def generate(conversations, n, role):
        calls.append((len(conversations), n))
        said = [(c, t) for c in conversations for t in texts_for(c, n)]
        return [
            Episode("az", list(c), [1], [Turn("policy", [{"role": "assistant", "content": t}], [2, 3], t)], role=role)
            for c, t in said
        ]

    return generate, calls


def test_slot_rows_split_a_batch_over_roles_and_types():
    rows = slot_rows(["deduction", "abduction"], 8)
    assert [r["prompt"][0]["content"].split(": ")[1] for r in rows[:4]] == [
        "propose deduction",
        "solve deduction",
        "propose abduction",
        "solve abduction",
    ]
    assert read_slots([r["prompt"] for r in rows for _ in range(2)], 2)[1] == ("solve", "deduction")
    with pytest.raises(ValueError, match="do not split evenly"):
        slot_rows(["deduction"], 3)
    with pytest.raises(ValueError, match="not one slot group"):
        read_slots([rows[0]["prompt"], rows[1]["prompt"]], 2)


def test_solvers_take_the_batchs_proposals_then_the_buffer(az_pool):
    cfg = AbsoluteZeroConfig(types=["deduction"], learnability_samples=2)
    buffers = Buffers(8, ["deduction"])
    buffers["deduction"].add(ADD)
    rollout = Rollout(cfg, buffers, Validator(az_pool, Limits(), Rules(), 0.5), None, seed=0)

    served = []

    def texts(conversation, n):  # one valid proposal in the batch, from the first proposer group
        if "design Python" not in conversation[0]["content"]:
            return ["```python\n8\n```\nFinal answer: f"] * n
        served.append(1)
        return ([DOUBLE] if len(served) == 1 else ["not a proposal"]) + ["not a proposal"] * (n - 1)

    generate, calls = fake(texts)
    rows = [r["prompt"] for r in slot_rows(["deduction"], 4) for _ in range(4)]
    out = rollout.run(rows, generate, 4)
    assert calls == [(2, 4), (1, 2), (2, 4)]  # proposals; 2 samples of the one valid proposal; both solver groups
    assert out["az_reason"][:4] == ["", "format", "format", "format"]
    solver_tasks = [out["az_task"][i]["program"] for i in range(4, 8)] + [out["az_task"][i]["program"] for i in (12,)]
    assert solver_tasks[0] == "def f(x):\n    return 2 * x"  # the batch's valid proposal comes first
    assert solver_tasks[4] == ADD.program  # then the buffer
    assert len(out["completion_ids"]) == len(out["prompt_ids"]) == 16 and out["logprobs"] is None
    assert rollout.metrics()["absolute_zero/deduction/solve/from_buffer"] == 0.5
    assert len(buffers["deduction"]) == 2


def test_state_round_trip(az_pool):
    cfg = AbsoluteZeroConfig()
    first = Rollout(cfg, Buffers(4), Validator(az_pool, Limits(), Rules(), 0.5), None, seed=3)
    first.rng.random()
    second = Rollout(cfg, Buffers(4), Validator(az_pool, Limits(), Rules(), 0.5), None, seed=9)
    second.load_state(first.state())
    assert [second.rng.random() for _ in range(3)] == [first.rng.random() for _ in range(3)]


def test_a_seeding_round_only_proposes(az_pool):
    """The paper's seeding from the zero triplet: proposals validated and added, nothing solved."""
    cfg = AbsoluteZeroConfig(types=["deduction", "induction"], induction_inputs=2, induction_shown=1)
    buffers = Buffers(8, cfg.types)
    buffers["deduction"].add(ADD)
    buffers["induction"].add(Triplet(ADD.program, ("1, 1", "2, 2"), ("2", "4"), "adds", True))
    rollout = Rollout(cfg, buffers, Validator(az_pool, Limits(), Rules(), 0.5), None, seed=0)
    induction = "```input\n3, 4\n```\n```input\n5, 6\n```\n```message\nadds\n```"
    generate, calls = fake(lambda c, n: [DOUBLE if "one input" in c[-1]["content"] else induction] * n)
    assert rollout.seed_round(generate, 2) == {"deduction": 2, "induction": 2}
    assert calls == [(2, 2)]  # the proposals only: no learnability samples, no solver
    assert len(buffers["deduction"]) == 2 and len(buffers["induction"]) == 2  # one distinct task each
