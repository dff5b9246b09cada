"""Grading speed of module tests (pytest- and unittest-style), this tree against another checkout, side by side.

Grades the same batch of tasks with module tests (a KodCode-style pytest module of five tests, two of them
parametrized, and a BigCodeBench-style unittest module of three) through a warm bwrap pool whose workers preload
the harness, as training does, in a fresh interpreter per tree and round, the trees in turn, and prints each tree's
median seconds per batch and the ratio of the medians. Each interpreter imports the azr of its tree (checked).

Usage: python benchmarks/module_grading.py --baseline DIR [--tasks N] [--rounds R] [--workers W]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

PYTEST_MODULE = """
import pytest
from solution import max_subarray

def test_mixed():
    result = max_subarray([-2, 1, -3, 4, -1, 2, 1, -5, 4])
    expected = 6
    assert result == expected

def test_single():
    assert max_subarray([7]) == 7

@pytest.mark.parametrize("nums, want", [([1, 2], 3), ([-1], -1), ([5, -9, 5], 5)])
def test_table(nums, want):
    assert max_subarray(nums) == want

def test_loop():
    for nums, want in [([1], 1), ([2, -1, 2], 3)]:
        assert max_subarray(nums) == want
"""
UNITTEST_MODULE = """
import unittest

class TestCases(unittest.TestCase):
    def test_case_1(self):
        result = task_func("a b a c")
        expected = {"a": 2, "b": 1, "c": 1}
        self.assertEqual(result, expected)

    def test_case_2(self):
        self.assertEqual(task_func(""), {})

    def test_case_3(self):
        result = task_func("x x x")
        self.assertEqual(len(result), 1)
"""
SOLUTION = (
    "import collections\n"
    "def max_subarray(nums):\n    best = cur = nums[0]\n    for x in nums[1:]:\n"
    "        cur = max(x, cur + x)\n        best = max(best, cur)\n    return best\n"
    "def task_func(text):\n    return dict(collections.Counter(text.split()))\n"
)


def measure(n_tasks: int, workers: int) -> dict:
    """One tree's time to grade the batch (after one warm-up batch), in this interpreter."""
    import azr
    from azr.data import task_from_row
    from azr.rewards.grading import grade_many
    from azr.rewards.harness import harness_preload
    from azr.sandbox import Limits, open_pool

    rows = [{"pytest": PYTEST_MODULE}, {"unittest": UNITTEST_MODULE}]
    tasks = [task_from_row({"id": f"t{i}", "prompt": "p", "tests": [rows[i % 2]]}, "row") for i in range(n_tasks)]
    pairs = [(t, SOLUTION) for t in tasks]
    with open_pool("bwrap", workers=workers, preload=harness_preload()) as pool:
        grade_many(pairs[: max(2, workers)], pool, Limits(wall_s=10.0))
        start = time.perf_counter()
        grades = grade_many(pairs, pool, Limits(wall_s=10.0))
        seconds = time.perf_counter() - start
    failed = sum(not g.passed for g in grades)
    return {"file": azr.__file__, "seconds": seconds, "tests": sum(g.tests_total for g in grades), "failed": failed}


def run_tree(tree: Path, args: argparse.Namespace) -> dict:
    command = [sys.executable, __file__, "--one", "--tasks", str(args.tasks), "--workers", str(args.workers)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=True).stdout
    found = json.loads(out.strip().splitlines()[-1])
    if not found["file"].startswith(str(tree)):
        raise SystemExit(f"{tree}: imported {found['file']}, not its own azr")
    if found["failed"]:
        raise SystemExit(f"{tree}: {found['failed']} task(s) failed to pass")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="another azr checkout to compare with")
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.tasks, args.workers)))
        return
    trees = {"this tree": Path(__file__).resolve().parents[1]}
    if args.baseline:
        trees["baseline"] = args.baseline.resolve()
    times: dict[str, list[float]] = {name: [] for name in trees}
    tests = 0
    for _ in range(args.rounds):
        for name, tree in trees.items():
            found = run_tree(tree, args)
            times[name].append(found["seconds"])
            tests = found["tests"]
    for name, seconds in times.items():
        median = statistics.median(seconds)
        print(f"{name:10s} {median:.3f} s for {args.tasks} tasks ({tests} module tests): {tests / median:.0f} tests/s")
    if args.baseline:
        ratio = statistics.median(times["this tree"]) / statistics.median(times["baseline"])
        paired = [a / b for a, b in zip(times["this tree"], times["baseline"], strict=True)]
        print(f"this tree / baseline: {ratio:.2f}x the time (ratio of medians)")
        print(f"per round (the trees run back to back): {', '.join(f'{r:.2f}' for r in paired)}")


if __name__ == "__main__":
    main()
