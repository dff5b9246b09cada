"""Seed triplets from the shipped training tasks (entry point renamed `f`, test inputs as inputs) and the paper's
zero triplet, each through the same validation as a proposal."""

from __future__ import annotations

import json

import pytest

from azr.absolute_zero import Rules, Validator, task_candidates, valid_seeds, zero_candidates
from azr.data import Task, load_tasks
from azr.sandbox import Limits

FIB = Task(
    "fib",
    "Write `fib(n)`, the n-th Fibonacci number. It is used widely.",
    ["assert fib(0) == 0", "assert fib(7) == 13", "assert fib(n=3) == 2", "x = [1]\nassert fib(*x) == 1"],
    solution="def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)",
    entry_point="fib",
)


def test_a_task_becomes_triplets_of_f():
    singles, sets = task_candidates([FIB], n_inputs=3)
    assert [t.input for t in singles] == ["0", "7", "n=3"]  # *x is not a literal argument list
    assert singles[0].program == "def f(n):\n    return n if n < 2 else f(n - 1) + f(n - 2)"  # recursion too
    assert singles[0].origin == "seed:fib" and singles[0].outputs is None
    (many,) = sets
    assert many.inputs == ("0", "7", "n=3") and many.message == "Write `f(n)`, the n-th Fibonacci number."
    assert task_candidates([FIB], n_inputs=4) == (singles, [])


def test_a_solution_that_already_names_f_is_left_out():
    task = Task("t", "p", ["assert g(1) == 1"], solution="def g(x):\n    f = x\n    return f", entry_point="g")
    assert task_candidates([task], 1) == ([], [])


@pytest.fixture(scope="module")
def validator(az_pool) -> Validator:
    return Validator(az_pool, Limits(), Rules(), max_rate=0.5)


def test_zero_seeds_are_valid(validator):
    seeds = valid_seeds("zero", [], 4, validator)
    assert [(t.program, t.input, t.output) for t in seeds if not t.many] == [
        ("def f(x):\n    return x", "'Hello World'", "'Hello World'")
    ]
    assert [len(t.inputs) for t in seeds if t.many] == [4]
    assert zero_candidates(20)[1][0].inputs == tuple(str(i) for i in range(20))


def test_most_shipped_training_tasks_seed(validator):
    tasks = load_tasks("train")[:12]
    seeds = valid_seeds("tasks", tasks, 4, validator)
    programs = {t.program for t in seeds}
    assert len(programs) >= 9, len(programs)  # helpers at the top level or other imports leave a few out
    assert all(t.outputs and len(t.outputs) == len(t.inputs) for t in seeds)


def test_seed_files_in_absolute_zero_reasoners_shapes_give_their_valid_triplets(validator, tmp_path):
    """A deduction/abduction file and an induction file as Absolute-Zero-Reasoner writes them: every triplet is
    validated (given outputs must reproduce) and only the valid ones seed."""
    io = tmp_path / "seed_io.jsonl"
    rows = [
        {"snippet": "def f(input):\n    return input * 2", "input": "3", "output": "6", "imports": []},
        {"snippet": "def f(a):\n    return a", "input": "1", "output": "2", "imports": []},  # wrong output
        {"snippet": "def f(a):\n    print(a)\n    return a", "input": "1", "output": "1", "imports": []},
    ]
    io.write_text("".join(json.dumps(r) + "\n" for r in rows))
    induction = tmp_path / "code_f_seed_io.jsonl"
    many = {"snippet": "def f(x):\n    return -x", "inputs": ["1", "2"], "outputs": ["-1", "-2"], "message": "negate"}
    induction.write_text(json.dumps({**many, "imports": [], "_input_types": ["int", "int"]}) + "\n")
    seeds = valid_seeds([str(io), str(induction)], [], 2, validator)
    assert [(t.program, t.outputs, t.many, t.origin) for t in seeds] == [
        ("def f(input):\n    return input * 2", ("6",), False, "seed:seed_io.jsonl"),
        ("def f(x):\n    return -x", ("-1", "-2"), True, "seed:code_f_seed_io.jsonl"),
    ]


def test_the_seed_field_takes_files(tmp_path):
    from azr.config import AbsoluteZeroConfig, ConfigError, load_config

    assert AbsoluteZeroConfig().seed_files == [] and AbsoluteZeroConfig(seed="zero").seed_files == []
    assert AbsoluteZeroConfig(seed=["a.jsonl", "b.jsonl"]).seed_files == ["a.jsonl", "b.jsonl"]
    with pytest.raises(ConfigError, match="stand alone"):
        AbsoluteZeroConfig(seed=["zero", "a.jsonl"])
    recipe = tmp_path / "r.yaml"
    recipe.write_text("model: {name_or_path: /m}\nabsolute_zero: {seed: [seeds/io.jsonl, seeds/ind.jsonl]}\n")
    assert load_config(recipe).absolute_zero.seed == [
        str(tmp_path / "seeds/io.jsonl"),
        str(tmp_path / "seeds/ind.jsonl"),
    ]
    recipe.write_text("model: {name_or_path: /m}\nabsolute_zero: {seed: zero}\n")
    assert load_config(recipe).absolute_zero.seed == "zero"
