"""`AbsoluteZeroTrainer` on TRL's step: a scripted policy drives every branch of one generation batch (each rejection
reason a proposal can have; proposals solved always, never and partly; each solver outcome; a solver group filled
from the buffer) through TRL's `_generate_and_score_completions`, and the rewards and advantages are checked exactly
against values worked out here, under both baselines. Also: the contract of the private TRL methods the rollout
calls, and sampling at the training temperature.

Real parts: the tiny model, TRL's trainer, the bwrap sandbox. Only the policy's text is scripted (`ScriptedGenerator`
replaces the trainer's sampling and nothing else)."""

from __future__ import annotations

import copy
import math
import random

import pytest
import torch

from azr.absolute_zero import (
    Buffers,
    Judge,
    Rollout,
    Rules,
    Triplet,
    Validator,
    build_az_rewards,
    slot_rows,
)
from azr.config import AbsoluteZeroConfig
from azr.rollouts import Episode, Turn
from azr.sandbox import Limits

G = 4  # completions per prompt group, and learnability samples per proposal (so solver groups reuse them)
ADD = Triplet("def f(a, b):\n    return a + b", ("1, 2",), ("3",), origin="seed")
ADD_SET = Triplet(ADD.program, ("1, 1", "2, 3", "4, 4", "0, 9"), ("2", "5", "8", "9"), "adds", True, "seed")


def block(text: str, final: bool = True) -> str:
    return f"```python\n{text}\n```" + ("\nFinal answer: f" if final else "")


def proposal(program: str, given: str) -> str:
    return f"```python\n{program}\n```\n```input\n{given}\n```"


def induction(inputs: list[str], message: str | None) -> str:
    blocks = "".join(f"```input\n{i}\n```\n" for i in inputs)
    return blocks + (f"```message\n{message}\n```" if message is not None else "")


NO_BLOCK = "I am not sure."
# Each proposer group's four completions, in the order the groups of a type are served: (text, expected reason).
PROPOSALS = {
    "deduction": [
        [
            (proposal("def f(x):\n    # d-partly\n    return x * 3", "2"), ""),
            (proposal("def f(x):\n    # d-always\n    return x - 1", "5"), ""),
            (proposal("def f(s):\n    # d-never\n    return s[::-1]", "'abc'"), ""),
            (proposal("def f(x)\n    return x", "1"), "syntax"),
        ],
        [
            (proposal("def g(x):\n    return x\ndef f(x):\n    return g(x)", "1"), "structure"),
            (proposal("import os.path\ndef f(x):\n    return x", "1"), "banned_import"),
            (proposal("def f(x):\n    print(x)\n    return x", "1"), "banned_name"),
            (proposal("def f(x):\n    while True:\n        pass", "1"), "timeout"),
        ],
    ],
    "abduction": [
        [
            (proposal("def f(a, b):\n    # a-partly\n    return a * b", "3, 4"), ""),
            (NO_BLOCK, "format"),
            (proposal("def f(x):\n    return x", "y"), "bad_input"),
            (proposal("def f(x):\n    return 1 // x", "0"), "error"),
        ],
        [
            (proposal("def f(x):\n    return [0] * (10 ** 10)", "0"), "memory"),
            (proposal("def f(n):\n    return 'a' * n", "5000"), "output_too_long"),
            (proposal("def f(x):\n    return object()", "0"), "output_not_literal"),
            (proposal("def f(w):\n    return list(set(w))", str([f"word{i}" for i in range(12)])), "nondeterministic"),
        ],
    ],
    "induction": [  # about ADD's program, the only one in the deduction and abduction buffers
        [
            (induction(["1, 2", "3, 4", "5, 6", "7, 8"], "adds i-partly"), ""),
            (induction(["0, 0", "1, 1", "2, 2", "3, 3"], "adds i-always"), ""),
            (induction(["1, 2", "3, 4", "5, 6"], "three"), "format"),
            (induction(["1, 2", "1, 2", "5, 6", "7, 8"], "repeats"), "bad_input"),
        ],
        [
            (induction(["10, 1", "20, 2", "30, 3", "40, 4"], "adds i-never"), ""),
            (induction(["'a', 1", "3, 4", "5, 6", "7, 8"], "mixes"), "error"),
            (induction(["1, 2", "3, 4", "5, 6", "7, 8"], None), "format"),
            (induction(["x, 1", "3, 4", "5, 6", "7, 8"], "names"), "bad_input"),
        ],
    ],
}
SUM = "def f(a, b):\n    return a + b"
# The solver's answers to each task, by the marker its prompt shows: (text, expected verdict), G of them.
ANSWERS = {
    "d-partly": [(block("6"), "correct"), (block("6"), "correct"), (block("7"), "wrong"), (NO_BLOCK, "format")],
    "d-always": [(block("4"), "correct")] * 4,
    "d-never": [(block("'abc'"), "wrong")] * 2 + [(block("'bca'"), "wrong"), (block("'cba'", False), "format")],
    "a-partly": [
        (block("2, 6"), "correct"),
        (block("1, 1"), "wrong"),
        (block("5, 5"), "wrong"),
        (block("x"), "format"),
    ],
    "i-partly": [(block(SUM), "correct")] * 3 + [(block("def f(a, b):\n    return 3 if a == 1 else 7"), "wrong")],
    "i-always": [(block(SUM), "correct")] * 4,
    "i-never": [(block("def f(a, b):\n    return a - b"), "wrong")] * 3
    + [(block("def g(a):\n    return a"), "format")],
    # ADD from the buffer, as an abduction task (the abduction proposers have one valid proposal for two groups)
    "seed-abduction": [
        (block("1, 2"), "correct"),
        (block("0, 3"), "correct"),
        (block("3, 3"), "wrong"),
        (NO_BLOCK, "format"),
    ],
}
CONFIG = AbsoluteZeroConfig(learnability_samples=G, timeout_s=1.0, propose_unlearnable=-0.1)
VALUES = {"correct": 1.0, "wrong": -0.5, "format": -1.0}
SOLVED = {
    marker: sum(v == "correct" for _, v in answers) / len(answers)
    for marker, answers in ANSWERS.items()
    if not marker.startswith("seed")
}


class Script:
    """The scripted policy: proposer groups of a type are served in order; a solver's answers depend on its task."""

    def __init__(self):
        self.served = {kind: 0 for kind in PROPOSALS}

    def __call__(self, conversation: list[dict[str, str]], n: int) -> list[str]:
        system, user = conversation[0]["content"], conversation[-1]["content"]
        if "design Python code-reasoning tasks" in system:
            kind = next(
                k
                for k, words in (
                    ("induction", "Here is a Python function"),
                    ("abduction", "its output"),
                    ("deduction", "predict the output"),
                )
                if words in user
            )
            texts = [text for text, _ in PROPOSALS[kind][self.served[kind]]]
            self.served[kind] += 1
            return texts
        return [text for text, _ in ANSWERS[marker_of(user)]][:n]


def marker_of(prompt: str) -> str:
    for marker in ANSWERS:
        if marker in prompt:
            return marker
    if "Find an input" in prompt:
        return "seed-abduction"
    raise AssertionError(f"no script for {prompt[:200]!r}")


class ScriptedGenerator:
    """`Generate` with scripted text: the prompts go through the trainer's own tokenisation, the text is tokenised
    and ended with EOS as the model would end it."""

    def __init__(self, trainer, script: Script):
        self.trainer, self.script = trainer, script

    def __call__(self, conversations, n, role):
        tokenizer = self.trainer.processing_class
        rows = [c for c in conversations for _ in range(n)]
        prompt_ids, _, _ = self.trainer._tokenize_prompts(rows)
        texts = [t for c in conversations for t in self.script(c, n)]
        ids = [tokenizer(t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for t in texts]
        decoded = tokenizer.batch_decode(ids, skip_special_tokens=True)
        return [
            Episode("az", list(c), list(p), [Turn("policy", [{"role": "assistant", "content": d}], i, d)], role=role)
            for c, p, i, d in zip(rows, prompt_ids, ids, decoded, strict=True)
        ]


def build_trainer(model_dir, pool, out, baseline: str, rollout_seed: int = 0):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from azr.training.trl.absolute_zero import AbsoluteZeroTrainer

    cfg = copy.deepcopy(CONFIG)
    cfg.baseline = baseline
    buffers = Buffers(cfg.buffer_size)
    for kind, triplet in (("deduction", ADD), ("abduction", ADD), ("induction", ADD_SET)):
        buffers[kind].add(triplet)
    rules = Rules.from_config(cfg)
    validator = Validator(pool, Limits(), rules, max_rate=0.5)
    judge = Judge(pool, Limits(), rules, cfg.induction_shown)
    script = Script()
    rollout = Rollout(cfg, buffers, validator, lambda trainer: ScriptedGenerator(trainer, script), rollout_seed)
    args = GRPOConfig(
        output_dir=str(out), use_cpu=True, bf16=False, report_to="none", num_generations=G,
        per_device_train_batch_size=12 * G, max_completion_length=64, logging_steps=1, disable_tqdm=True,
    )  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    trainer = AbsoluteZeroTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        reward_funcs=build_az_rewards(judge, cfg),
        args=args,
        train_dataset=Dataset.from_list(slot_rows(cfg.types, 12)),
        processing_class=tokenizer,
        rollout=rollout,
        baseline=baseline,
    )
    trainer.model.train()
    return trainer, buffers


def one_batch(trainer) -> tuple[list[dict], dict]:
    """One generation batch as TRL's sampler gives it (each slot row G times, shuffled), through TRL's step."""
    rows = slot_rows(CONFIG.types, 12)
    random.Random(1).shuffle(rows)
    inputs = [dict(row) for row in rows for _ in range(G)]
    return inputs, trainer._generate_and_score_completions(inputs)


def expected_rewards(inputs: list[dict]) -> list[float]:
    """Each row's reward, worked out from the script: the proposer's by its proposal's reason and solve rate, the
    solver's by the verdict of its answer to the task it was given."""
    rewards, served, solver_groups = [], {k: 0 for k in PROPOSALS}, {}
    for start in range(0, len(inputs), G):
        row = inputs[start]
        kind = row["az_type"]
        if row["az_role"] == "propose":
            for (text, reason), got in zip(PROPOSALS[kind][served[kind]], inputs[start : start + G], strict=True):
                assert got["az_reason"] == reason, (text[:80], got["az_reason"], got["az_detail"])
                if reason:
                    rewards.append(-1.0)
                else:
                    rate = SOLVED[marker_of(solver_prompt(text))]
                    rewards.append(-0.1 if rate in (0.0, 1.0) else 1.0 - rate)
            served[kind] += 1
        else:
            marker = marker_of(row["az_prompt"])
            solver_groups.setdefault(kind, []).append(marker)
            rewards += [VALUES[verdict] for _, verdict in ANSWERS[marker]]
    assert sorted(solver_groups["abduction"]) == ["a-partly", "seed-abduction"]  # one proposal, one from the buffer
    return rewards


def solver_prompt(proposal_text: str) -> str:
    return proposal_text  # the markers sit in the program (deduction, abduction) or the message (induction)


def group_advantages(rewards: list[float]) -> list[float]:
    out = []
    for start in range(0, len(rewards), G):
        out += normalised(rewards[start : start + G])
    return out


def normalised(values: list[float]) -> list[float]:
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return [(v - mean) / (std + 1e-4) for v in values]


def type_role_by_hand(inputs: list[dict], rewards: list[float]) -> list[float]:
    keys = [(row["az_type"], row["az_role"]) for row in inputs]
    out = [0.0] * len(rewards)
    for key in set(keys):
        indices = [i for i, k in enumerate(keys) if k == key]
        for i, value in zip(indices, normalised([rewards[i] for i in indices]), strict=True):
            out[i] = value
    return out


@pytest.mark.parametrize("baseline", ["group", "type_role"])
def test_a_scripted_batch_gets_exact_rewards_and_advantages(tiny_model_dir, az_pool, tmp_path, baseline):
    trainer, buffers = build_trainer(tiny_model_dir, az_pool, tmp_path, baseline)
    inputs, output = one_batch(trainer)
    expected = expected_rewards(inputs)
    rewards = trainer.round_rewards.nansum(dim=1)  # one role's reward per row, the other None
    assert torch.isnan(trainer.round_rewards).sum(dim=1).tolist() == [1] * len(inputs)
    assert rewards.tolist() == pytest.approx(expected, abs=1e-6)
    by_hand = group_advantages(expected) if baseline == "group" else type_role_by_hand(inputs, expected)
    assert output["advantages"].tolist() == pytest.approx(by_hand, abs=1e-5)
    assert list(trainer._logs["advantages"]) == pytest.approx(by_hand, abs=1e-5)
    if baseline == "group":  # the baselines differ on this batch: two groups per (type, role)
        assert by_hand != pytest.approx(type_role_by_hand(inputs, expected), abs=1e-3)
    # every valid proposal joined its buffer; the solvers trained on the proposals' own learnability samples
    assert buffers.sizes() == {"deduction": 4, "abduction": 2, "induction": 4}
    reused = [row for row in inputs if row["az_role"] == "solve" and row["az_type"] == "deduction"]
    assert all(row["az_task"]["program"].count("# d-") == 1 for row in reused)
    metrics = trainer.rollout.metrics()
    assert metrics["absolute_zero/deduction/proposals/valid"] == 3 / 8
    assert metrics["absolute_zero/abduction/invalid/memory"] == 1 / 8
    assert metrics["absolute_zero/abduction/solve/from_buffer"] == 1 / 2


# ------------------------------------------------------------------------------- the TRL methods the rollout calls
def test_the_trainer_generator_samples_through_trl_at_the_training_temperature(tiny_model_dir, az_pool, tmp_path):
    """Pins the private TRL contract the rollout relies on: `_tokenize_prompts(conversations)` gives one id list
    per conversation, `_generate_single_turn(ids, None, fields, n)` one completion per row, sampled with the
    trainer's generation config (the training temperature; the public implementation's greedy samples made
    learnability 0 for most proposals)."""
    from azr.training.trl.absolute_zero import TrainerGenerator

    trainer, _ = build_trainer(tiny_model_dir, az_pool, tmp_path, "group")
    assert trainer.generation_config.do_sample and trainer.generation_config.temperature == trainer.args.temperature
    conversation = [{"role": "user", "content": "Predict the output of f."}]
    drawn = TrainerGenerator(trainer)([conversation, conversation[:1]], 4, "solve")
    assert len(drawn) == 8 and all(e.role == "solve" and len(e.policy_turns) == 1 for e in drawn)
    assert len({tuple(e.prompt_ids) for e in drawn}) == 1 and all(e.logprobs is None for e in drawn)
    assert all(isinstance(t, int) for e in drawn for t in e.completion_ids)
    assert len({tuple(e.completion_ids) for e in drawn}) > 1  # sampled, not greedy
