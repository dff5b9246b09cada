"""Checks over a set of tasks that `azr data validate` reports and the split tests rely on: near-duplicate prompts
(and, optionally, equal reference solutions) between or within sets, tasks sharing one reference solution, and tests
that check nothing, test modules in which no test can run, each task's tests counted by kind, and their split into
public and hidden tests. Nothing here runs code.
"""

from __future__ import annotations

import ast
import collections
import re
from collections.abc import Iterable

from azr.data.tasks import Task
from azr.data.tests_model import KINDS, AssertTest, ModuleTest, Test, test_kind


def near_duplicates(
    a: Iterable[Task], b: Iterable[Task] | None = None, threshold: float = 0.7, solutions: bool = True
) -> list[tuple[Task, Task, float]]:
    """Pairs whose prompts overlap by word-trigram Jaccard >= threshold, or (with `solutions`) whose reference
    solutions are equal once whitespace is removed (similarity 1.0). With `b`, pairs across a and b; else pairs
    within a.

    Candidates come from an inverted index over trigrams, leaving out trigrams found in more than 2% of the tasks
    (boilerplate like "write a function"), so a 10k-task file takes seconds; candidates get the exact Jaccard."""
    left = list(a)
    right = left if b is None else list(b)
    sigs = {id(t): _signature(t, solutions) for t in left + right}
    index: dict[str, list[int]] = collections.defaultdict(list)
    for j, task in enumerate(right):
        shingles, code = sigs[id(task)]
        for key in shingles | ({"\0" + code} if code else set()):
            index[key].append(j)
    common = max(50, len(right) // 50)
    found = []
    for i, x in enumerate(left):
        shingles, code = sigs[id(x)]
        keys = [k for k in shingles if len(index[k]) <= common] + (["\0" + code] if code else [])
        for j in sorted({j for key in keys for j in index.get(key, ())}):
            if b is None and j <= i:
                continue
            other, other_code = sigs[id(right[j])]
            score = 1.0 if code and code == other_code else len(shingles & other) / len(shingles | other)
            if score >= threshold:
                found.append((x, right[j], score))
    return found


def _signature(task: Task, solutions: bool = True) -> tuple[set[str], str]:
    words = re.findall(r"[a-z0-9_]+", task.prompt.lower())
    shingles = {" ".join(words[i : i + 3]) for i in range(max(1, len(words) - 2))}
    return shingles, _code(task) if solutions else ""


def _code(task: Task) -> str:
    return re.sub(r"\s+", "", task.solution or "")


def identical_solutions(tasks: Iterable[Task]) -> list[list[Task]]:
    """Groups (two or more, in file order) of tasks whose reference solutions are equal once whitespace is
    removed: one group per solution, however many tasks share it."""
    groups: dict[str, list[Task]] = collections.defaultdict(list)
    for task in tasks:
        if code := _code(task):
            groups[code].append(task)
    return [group for group in groups.values() if len(group) > 1]


def without_checks(tasks: Iterable[Task]) -> list[Task]:
    """Tasks with an assert-style test that checks nothing (no `assert` and no `raise` anywhere in it): any
    program that loads passes such a test."""
    found = []
    for task in tasks:
        for test in task.tests:
            if not isinstance(test, AssertTest):  # a case or a module test: judged by its kind, not as a statement
                continue
            try:
                nodes = ast.walk(ast.parse(test.source))
            except (SyntaxError, ValueError):
                continue
            if not any(isinstance(node, (ast.Assert, ast.Raise)) for node in nodes):
                found.append(task)
                break
    return found


def without_tests(tasks: Iterable[Task]) -> list[Task]:
    """Tasks with a test module in which no test was collected (no `test_*` function, no TestCase method): its
    verdict is always `no tests ran`, so `azr data validate` refuses the file."""
    found = []
    for task in tasks:
        for test in task.tests:
            if isinstance(test, ModuleTest) and test.test is None:
                found.append(task)
                break
    return found


def kinds_of(tests: Iterable[Test]) -> collections.Counter[str]:
    """How many tests of each kind (`azr.data.iotests.KINDS`), in that order."""
    counts = collections.Counter(test_kind(t) for t in tests)
    return collections.Counter({k: counts[k] for k in KINDS if counts[k]})


def split_counts(tasks: Iterable[Task]) -> tuple[int, int, list[Task]]:
    """(public tests, hidden tests, tasks without a hidden test) over `tasks`, by each task's split
    (`Task.split_tests`): what execution feedback shows and what it scores."""
    public = hidden = 0
    without: list[Task] = []
    for task in tasks:
        shown, scored = task.split_tests()
        public, hidden = public + len(shown), hidden + len(scored)
        if not scored:
            without.append(task)
    return public, hidden, without


def show_split(tasks: list[Task]) -> str:
    """`public/hidden: 93/455 tests (1 public per task); 2 tasks without hidden tests: a, b`: the line `azr data
    validate` prints."""
    public, hidden, without = split_counts(tasks)
    counts = sorted({len(task.split_tests()[0]) for task in tasks})
    per = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
    line = f"public/hidden: {public}/{hidden} tests ({per} public per task)"
    if without:
        ids = ", ".join(t.id for t in without[:3]) + (f", ... ({len(without) - 3} more)" if len(without) > 3 else "")
        line += f"; {len(without)} tasks without hidden tests (no feedback episode can score them): {ids}"
    return line


def show_kinds(counts: collections.Counter[str]) -> str:
    """`3 assert, 8 pytest`: a count per kind, in `KINDS` order."""
    return ", ".join(f"{n} {kind}" for kind, n in counts.items()) or "no tests"
