"""Seed triplets, where the buffers start: from coding tasks with a reference solution (`tasks`, the default: the
solution's entry point renamed `f`, each test's call arguments an input), the paper's identity triplet (`zero`), or
seed files (`triplets`' line formats). Every candidate goes through the same validation as a proposal; only valid
ones seed the buffers. Parses the user's own task data here, never model output.
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Sequence
from pathlib import Path

from azr.absolute_zero.buffers import Buffers
from azr.absolute_zero.triplets import Triplet, read_triplets
from azr.absolute_zero.validation import Validator
from azr.data import AssertTest, Task, Test

ZERO_PROGRAM = "def f(x):\n    return x"
ZERO_INPUTS = ("'Hello World'", "[1, 2, 3]", "(4, 'five')", "{'k': 6}", "7.5", "None", "True", "'azr'")


def zero_candidates(n_inputs: int) -> tuple[list[Triplet], list[Triplet]]:
    """The identity triplet (the paper's zero triplet) and, for induction, the identity with `n_inputs` inputs."""
    single = [Triplet(ZERO_PROGRAM, (ZERO_INPUTS[0],), origin="zero")]
    inputs = tuple((ZERO_INPUTS * (n_inputs // len(ZERO_INPUTS) + 1))[:n_inputs])
    if len(set(inputs)) < n_inputs:
        inputs = tuple(str(i) for i in range(n_inputs))
    many = [Triplet(ZERO_PROGRAM, inputs, message="returns its argument unchanged", many=True, origin="zero")]
    return single, many


def task_candidates(tasks: Sequence[Task], n_inputs: int) -> tuple[list[Triplet], list[Triplet]]:
    """(one triplet per test input, one induction set per task with at least `n_inputs` distinct inputs)."""
    singles: list[Triplet] = []
    sets: list[Triplet] = []
    for task in tasks:
        program = _renamed(task.solution or "", task.entry_point or "")
        if program is None:
            continue
        inputs = list(dict.fromkeys(i for i in (_call_input(t, task.entry_point or "") for t in task.tests) if i))
        origin = f"seed:{task.id}"
        singles += [Triplet(program, (i,), origin=origin) for i in inputs]
        if len(inputs) >= n_inputs:
            message = _message(task.prompt, task.entry_point or "")
            sets.append(Triplet(program, tuple(inputs[:n_inputs]), message=message, many=True, origin=origin))
    return singles, sets


def _renamed(solution: str, entry: str) -> str | None:
    """The solution with its entry point (its definition and every use) renamed `f`; None where that cannot be
    done cleanly (no such function, or `f` already names something)."""
    if not entry:
        return None
    try:
        tree = ast.parse(solution)
    except SyntaxError:
        return None
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))
    }
    if "f" in names or not any(isinstance(n, ast.FunctionDef) and n.name == entry for n in tree.body):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == entry:
            node.name = "f"
        elif isinstance(node, ast.Name) and node.id == entry:
            node.id = "f"
    return ast.unparse(tree)


def _call_input(test: Test, entry: str) -> str | None:
    """The arguments of the first call of `entry` in an assert test, as source, when every one is a literal."""
    if not isinstance(test, AssertTest):
        return None
    try:
        tree = ast.parse(test.source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == entry:
            values = [*node.args, *(k.value for k in node.keywords)]
            if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
                return None
            try:
                for value in values:
                    ast.literal_eval(value)
            except ValueError:
                return None
            parts = [ast.unparse(a) for a in node.args] + [f"{k.arg}={ast.unparse(k.value)}" for k in node.keywords]
            return ", ".join(parts)
    return None


def _message(prompt: str, entry: str) -> str:
    """The task's first sentence with the entry point called `f`: a hint at what the program does."""
    text = re.sub(rf"\b{re.escape(entry)}\b", "f", " ".join(prompt.split()))
    first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    return first[:300]


def file_candidates(paths: Sequence[str]) -> list[Triplet]:
    """The triplets of seed files (azr's lines or Absolute-Zero-Reasoner's), each with its file as origin."""
    return [
        Triplet(t.program, t.inputs, t.outputs, t.message, t.many, t.origin or f"seed:{Path(path).name}")
        for path in paths
        for t in read_triplets(Path(path))
    ]


def valid_seeds(seed: str | list[str], tasks: Sequence[Task], n_inputs: int, validator: Validator) -> list[Triplet]:
    """The candidates of `seed` ('tasks', 'zero', or triplet files) that pass validation, with their outputs."""
    if seed in ("tasks", "zero"):
        singles, sets = task_candidates(tasks, n_inputs) if seed == "tasks" else zero_candidates(n_inputs)
        candidates = singles + sets
    else:
        candidates = file_candidates([seed] if isinstance(seed, str) else seed)
    return [v.triplet for v in validator.validate(candidates) if v.valid and v.triplet is not None]


def fill_buffers(buffers: Buffers, seeds: Sequence[Triplet], rng: random.Random) -> None:
    """Seed the buffers in a random order (so a cap keeps a random share): single-input triplets go to the
    deduction and abduction buffers, induction sets to the induction buffer."""
    order = list(seeds)
    rng.shuffle(order)
    for triplet in order:
        for kind in ("induction",) if triplet.many else ("deduction", "abduction"):
            if kind in buffers.by_type:
                buffers[kind].add(triplet)
