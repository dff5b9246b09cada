"""The seams: one grading path for batches (`OutcomeCache`, shared by GRPO's CodeGrader and Absolute Zero's Judge)
and one execution provider interface (`ExecutionProvider`), under which the sandbox pool is one implementation and
grading runs unchanged on another."""

from __future__ import annotations

import pytest

from azr.data import task_from_row
from azr.rewards import OutcomeCache, grade_many
from azr.rewards.harness import harness_preload
from azr.rewards.health import InfraFailures
from azr.sandbox import ExecutionProvider, open_pool


def test_each_new_key_runs_once_and_failures_are_retried_as_asked():
    runs: list[list[str]] = []

    def run(keys):
        runs.append(keys)
        return ["error" if k.startswith("x") else f"ok {k}" for k in keys]

    health = InfraFailures(1.0)
    always = OutcomeCache(8, health, lambda v: v == "error", "always")
    found, fresh = always.resolve(["a", "b", "a", "x", "-"], run, runnable=lambda k: k != "-")
    assert found == ["ok a", "ok b", "ok a", "error", None] and runs == [["a", "b", "x"]] and len(fresh) == 3
    assert health.errors == 1
    always.resolve(["a", "x"], run)
    assert runs[-1] == ["x"]  # a failure runs again on its next request; a verdict is served from the cache

    batch = OutcomeCache(8, InfraFailures(1.0), lambda v: v == "error", "next_batch")
    batch.resolve(["a", "x"], run)
    batch.resolve(["a", "x"], run)  # the same batch again (another reward function): nothing runs
    assert runs[-1] == ["a", "x"]
    batch.resolve(["x", "a"], run)  # a new batch: the failure runs again
    assert runs[-1] == ["x"]


def test_the_cache_is_bounded():
    cache = OutcomeCache(2, InfraFailures(1.0), lambda v: False)
    cache.resolve(["a", "b", "c"], lambda keys: keys)
    assert len(cache) == 2 and "a" not in cache


class CountingProvider:
    """Another execution provider: one that forwards to a sandbox pool and counts programs (as a remote HTTP
    provider would forward them to a service)."""

    def __init__(self, inner):
        self.inner, self.programs = inner, 0

    @property
    def preload(self):
        return {}  # this provider preloads nothing: programs carry the harness themselves

    @property
    def size(self):
        return self.inner.size

    @property
    def isolation(self):
        return self.inner.isolation

    def metrics(self):
        return {"programs": self.programs}

    def run(self, code, limits=None):
        self.programs += 1
        return self.inner.run(code, limits)

    def map(self, codes, limits=None):
        return [self.run(c, limits if not isinstance(limits, list) else limits[i]) for i, c in enumerate(codes)]

    def imap(self, jobs):
        return (self.run(code, limits) for code, limits in jobs)

    def close(self):
        pass


@pytest.mark.parametrize("kind", ["sandbox pool", "another provider"])
def test_grading_runs_on_any_execution_provider(kind):
    with open_pool("bwrap", workers=1, preload=harness_preload()) as pool:
        provider = pool if kind == "sandbox pool" else CountingProvider(pool)
        assert isinstance(provider, ExecutionProvider)
        unit = "import unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(f(), 1)\n"
        task = task_from_row({"id": "t", "prompt": "p", "tests": [{"unittest": unit}, "assert f() == 1"]}, "r")
        grades = grade_many([(task, "def f():\n    return 1\n"), (task, "def f():\n    return 2\n")], provider)
        assert [g.tests_passed for g in grades] == [2, 0]
        if kind == "another provider":
            assert provider.programs == 2
