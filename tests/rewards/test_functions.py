"""Rewards as TRL calls them: real programs through a real bwrap pool (module-scoped, two workers), no mocks.

A fake pool appears only where a test injects infrastructure failures (the sandbox itself failing), which a real
pool cannot be made to produce on demand. Every completion follows the strict answer format unless a test is about
the format. One property per test.
"""

from __future__ import annotations

import itertools
import logging
import textwrap
from dataclasses import replace as dataclass_replace
from pathlib import Path

import pytest

from azr.config import RewardSpec, SandboxConfig
from azr.errors import ConfigError
from azr.rewards import build_rubric
from azr.rewards.functions import REWARDS
from azr.sandbox import ExecResult, SandboxUnhealthy, open_pool

REPO = Path(__file__).resolve().parents[2]
TESTS = ["assert f(1) == 2", "assert f(2) == 3", "assert f(3) == 4"]
GOOD = "def f(x):\n    return x + 1"
PARTIAL = "def f(x):\n    return 2 if x == 1 else 3 if x == 2 else 0"  # 2 of 3
WRONG = "def f(x):\n    return 0"
LOOP = "def f(x):\n    while True:\n        pass"


def answer(code: str, final: str = "Final answer: f") -> str:
    """A completion in the strict format: one python block, then the answer line."""
    return f"Some reasoning.\n```python\n{code}\n```\n{final}"


def custom_reward(prompts=None, completions=None, **kwargs):
    """A user reward loaded by dotted path."""
    return [0.5] * len(completions)


NOT_CALLABLE = 42


@pytest.fixture(scope="module")
def pool():
    pool = open_pool("bwrap", workers=2)
    yield pool
    pool.close()


def rewards(pool, specs=None, answer_format="strict", **sandbox):
    """The rubric's functions, weights and grader over the shared pool; the sandbox defaults to a 2 s limit."""
    cfg = SandboxConfig(**{"backend": "bwrap", "timeout_s": 2.0, **sandbox})
    specs = specs if specs is not None else [RewardSpec("tests", 1.0)]
    rubric = build_rubric(specs, cfg, pool=pool, answer_format=answer_format)
    return list(rubric.funcs), list(rubric.weights), rubric.grader


def call(func, completions, tests=TESTS, **columns):
    """Call a reward the way TRL 1.16 does: every column a list with one entry per completion."""
    n = len(completions)
    columns.setdefault("tests", [list(tests)] * n)
    return func(prompts=["Write f."] * n, completions=completions, **columns)


def weighted(funcs, weights, completions, **columns):
    """TRL's per-completion weighted sum of the rewards."""
    per_func = [call(f, completions, **columns) for f in funcs]
    return [sum(w * scores[i] for w, scores in zip(weights, per_func, strict=True)) for i in range(len(completions))]


class FailingPool:
    """The sandbox itself fails (infrastructure), for every program or only for those holding `marker`."""

    def __init__(self, real=None, marker: str | None = None):
        self.real, self.marker = real, marker
        self.preload = real.preload if real else {}  # what its programs may count on: the real pool's
        self.stats = {"runs": 0}

    def run(self, code, limits=None):
        self.stats["runs"] += 1
        if self.marker is None or self.marker in code:
            return ExecResult("error", backend="fake", note="sandbox worker did not start: injected")
        return self.real.run(code, limits)

    def map(self, codes, limits=None):
        limits = limits if isinstance(limits, list) else [limits] * len(codes)
        return [self.run(c, lim) for c, lim in zip(codes, limits, strict=True)]


# --- the tests reward ------------------------------------------------------------------------------------------


def test_full_pass_scores_one(pool):
    (tests,), _, _ = rewards(pool)
    assert call(tests, [answer(GOOD)]) == [1.0]


def test_partial_credit_is_the_fraction_passed(pool):
    (tests,), _, _ = rewards(pool)
    assert call(tests, [answer(PARTIAL), answer(WRONG)]) == [pytest.approx(2 / 3), 0.0]


def test_without_partial_credit_scores_are_zero_or_one(pool):
    (tests,), _, _ = rewards(pool, [RewardSpec("tests", 1.0, {"partial_credit": False})])
    assert call(tests, [answer(PARTIAL), answer(GOOD)]) == [0.0, 1.0]


def test_strict_format_violation_scores_zero_without_running(pool):
    (tests,), _, grader = rewards(pool)
    runs = pool.stats["runs"]
    assert call(tests, [answer(GOOD, final="")]) == [0.0]  # would pass, but has no Final answer line
    assert pool.stats["runs"] == runs
    assert grader.last_details[0]["status"] == "no_code"


def test_relaxed_format_runs_the_code(pool):
    (tests,), _, _ = rewards(pool, answer_format="relaxed")
    assert call(tests, [answer(GOOD, final="")]) == [1.0]


def test_conversational_completions(pool):
    (tests,), _, _ = rewards(pool)
    messages = [[{"role": "assistant", "content": answer(GOOD)}], [{"role": "assistant", "content": answer(WRONG)}]]
    assert call(tests, messages) == [1.0, 0.0]


def test_task_timeout_column_is_honoured(pool):
    (tests,), _, grader = rewards(pool, timeout_s=60.0)
    assert call(tests, [answer(LOOP)], timeout_s=[1.0]) == [0.0]
    details = grader.last_details[0]
    assert details["status"] == "timeout" and details["duration_s"] < 30  # stopped at the row's 1 s, not at 60 s


def test_task_memory_column_is_honoured(pool):
    (tests,), _, grader = rewards(pool, memory_mb=1024, timeout_s=30)  # generous: 3 x 160 MB on a loaded machine
    code = "def f(x):\n    b = bytearray(160 * 2**20)\n    return x + 1"
    assert call(tests, [answer(code), answer(code)], memory_mb=[None, 128]) == [1.0, 0.0]
    assert grader.last_details[1]["status"] == "memory"


# --- shaping terms, through the rubric's weights ---------------------------------------------------------------


def test_format_term_moves_the_weighted_sum(pool):
    specs = [RewardSpec("tests", 1.0), RewardSpec("format", 0.25, {"ok": 1.0, "bad": -1.0})]
    funcs, weights, _ = rewards(pool, specs, answer_format="relaxed")  # both run and pass: only format differs
    ok, bad = answer(GOOD), answer(GOOD, final="")
    assert call(funcs[1], [ok, bad]) == [1.0, -1.0]
    good_sum, bad_sum = weighted(funcs, weights, [ok, bad])
    assert good_sum - bad_sum == pytest.approx(0.25 * 2.0, abs=1e-12)
    assert good_sum == pytest.approx(1.25, abs=1e-12)  # no clamping


def test_length_term_moves_the_weighted_sum(pool):
    specs = [RewardSpec("tests", 1.0), RewardSpec("length", 0.5, {"target_tokens": 10, "limit_tokens": 20})]
    funcs, weights, _ = rewards(pool, specs)
    text = answer(GOOD)
    ids = [[0] * 5, [0] * 10, [0] * 15, [0] * 20, [0] * 40]
    assert call(funcs[1], [text] * 5, completion_ids=ids) == [0.0, 0.0, -0.5, -1.0, -1.0]
    sums = weighted(funcs, weights, [text] * 5, completion_ids=ids)
    assert sums[0] == sums[1] == 1.0  # at or below target: no change
    assert sums[0] - sums[2] == pytest.approx(0.5 * 0.5, abs=1e-12)
    assert sums[4] == pytest.approx(1.0 - 0.5, abs=1e-12)  # beyond the limit: -penalty, no further


def test_length_penalty_beyond_limit_equals_minus_penalty(pool):
    specs = [RewardSpec("length", 1.0, {"target_tokens": 10, "limit_tokens": 20, "penalty": 0.3})]
    (length,), _, _ = rewards(pool, specs)
    assert call(length, [answer(GOOD)], completion_ids=[[0] * 1000]) == [-0.3]


def test_timeout_term_moves_the_weighted_sum(pool):
    specs = [RewardSpec("tests", 1.0), RewardSpec("timeout", 0.5, {"penalty": 2.0})]
    funcs, weights, _ = rewards(pool, specs)
    completions = [answer(WRONG), answer(LOOP)]  # both fail every test; only the loop hits the limit
    ids = [[0] * 8] * 2
    assert call(funcs[1], completions, timeout_s=[1.0] * 2) == [0.0, -2.0]
    normal, loop = weighted(funcs, weights, completions, timeout_s=[1.0] * 2, completion_ids=ids)
    assert (normal, loop) == (0.0, pytest.approx(-1.0, abs=1e-12))


# --- registry ---------------------------------------------------------------------------------------------------


def test_registry_names_and_weights(pool):
    funcs, weights, _ = rewards(pool, [RewardSpec("tests", 1.0), RewardSpec("format", 0.1)])
    assert [f.__name__ for f in funcs] == ["tests_reward", "format_reward"]
    assert all(callable(f) for f in funcs)
    assert weights == [1.0, 0.1]
    assert set(REWARDS) >= {"tests", "format", "length", "timeout"}


def test_unknown_reward_name_is_a_config_error(pool):
    with pytest.raises(ConfigError, match=r"rewards\[0\]\.name"):
        rewards(pool, [RewardSpec("nonesuch", 1.0)])


def test_bad_params_are_a_config_error(pool):
    with pytest.raises(ConfigError, match=r"rewards\[1\]\.params"):
        rewards(pool, [RewardSpec("tests", 1.0), RewardSpec("format", 0.1, {"bogus": 1})])


def test_invalid_length_params_are_a_config_error(pool):
    with pytest.raises(ConfigError, match=r"rewards\[0\]\.params.*target_tokens"):
        rewards(pool, [RewardSpec("length", 1.0, {"target_tokens": 100, "limit_tokens": 100})])


@pytest.mark.parametrize(
    "path", ["tests.rewards.test_functions:custom_reward", "tests.rewards.test_functions.custom_reward"]
)
def test_custom_reward_by_dotted_path(pool, monkeypatch, path):
    monkeypatch.syspath_prepend(str(REPO))
    (func,), weights, _ = rewards(pool, [RewardSpec(path, 0.7)])
    assert func.__name__ == "custom_reward"
    assert weights == [0.7]
    assert call(func, [answer(GOOD), "x"]) == [0.5, 0.5]


def test_custom_reward_that_is_not_callable_is_a_config_error(pool, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    with pytest.raises(ConfigError, match=r"rewards\[0\]\.name.*not callable"):
        rewards(pool, [RewardSpec("tests.rewards.test_functions:NOT_CALLABLE", 1.0)])


def test_custom_reward_that_cannot_be_imported_is_a_config_error(pool):
    with pytest.raises(ConfigError, match=r"rewards\[0\]\.name.*cannot import"):
        rewards(pool, [RewardSpec("no_such_module_xyz:func", 1.0)])


# --- infrastructure failures ------------------------------------------------------------------------------------


def test_infra_failure_scores_none_and_is_counted():
    funcs, _, grader = rewards(FailingPool(), [RewardSpec("tests", 1.0), RewardSpec("timeout", 1.0)])
    completions = [answer(GOOD), answer(WRONG), answer(PARTIAL)]
    assert call(funcs[0], completions) == [None, None, None]
    assert call(funcs[1], completions) == [None, None, None]
    assert grader.health.errors == 3


def test_infra_failure_rate_above_limit_stops_the_run():
    (tests,), _, grader = rewards(FailingPool(), max_infra_failure_rate=0.5)
    grader.check()  # healthy so far
    assert call(tests, [answer(GOOD), answer(WRONG)]) == [None, None]
    with pytest.raises(SandboxUnhealthy, match=r"^2 of 2 .*max_infra_failure_rate"):
        grader.check()
    with pytest.raises(SandboxUnhealthy):  # and stays stopped
        grader.check()


def test_the_failure_rate_is_decided_on_the_counts_summed_over_the_ranks():
    """Each rank grades its own rows; all decide on the whole batch's counts (the `total` of every rank's), so a
    rank over the limit on its own rows stops with the others or not at all."""
    (tests,), _, grader = rewards(FailingPool(), max_infra_failure_rate=0.5)
    assert call(tests, [answer(GOOD), answer(WRONG)]) == [None, None]  # 2 of 2 failed on this rank
    seen = []

    def total(errors, runs):  # as if another rank graded 6 rows without a failure
        seen.append((errors, runs))
        return errors, runs + 6

    grader.check(total)  # 2 of 8: under the limit
    assert seen == [(2, 2)]
    with pytest.raises(SandboxUnhealthy, match=r"^5 of 6 "):  # nothing here since; 5 of 6 on the other rank
        grader.check(lambda errors, runs: (errors + 5, runs + 6))


def test_infra_failure_rate_below_limit_does_not_stop(pool):
    flaky = FailingPool(pool, marker="INFRA")
    (tests,), _, grader = rewards(flaky, max_infra_failure_rate=0.5)
    completions = [answer(GOOD + "  # INFRA"), answer(GOOD), answer(WRONG), answer(PARTIAL)]
    assert call(tests, completions) == [None, 1.0, 0.0, pytest.approx(2 / 3)]
    assert grader.health.errors == 1
    assert grader.health.stop_reason == ""
    grader.check()


def test_infra_failure_is_retried_in_a_later_batch_not_served_from_the_cache(pool):
    class RecoveringPool(FailingPool):
        """Fails its first batch (the sandbox was down), then works."""

        def map(self, codes, limits=None):
            self.marker = None if self.stats["runs"] == 0 else "never in a program"
            return super().map(codes, limits)

    flaky = RecoveringPool(pool)
    funcs, _, grader = rewards(flaky, [RewardSpec("tests", 1.0), RewardSpec("timeout", 1.0)])
    batch = [answer(GOOD)]
    assert call(funcs[0], batch) == [None] and call(funcs[1], batch) == [None]  # same batch: no second run
    assert flaky.stats["runs"] == 1
    assert call(funcs[0], [*batch, answer(WRONG)]) == [1.0, 0.0]  # the next batch runs it again
    assert grader.health.errors == 1


@pytest.mark.parametrize("cell", ["assert f(1) == 2", [], [""], None, [1, 2]])
def test_a_malformed_tests_cell_scores_none_and_logs(pool, caplog, cell):
    """A bare string would be split into characters and graded as one-letter tests."""
    (tests,), _, _ = rewards(pool)
    assert tests(prompts=["Write f."], completions=[answer(GOOD)], tests=[cell]) == [None]
    assert "'tests' must be a non-empty list" in caplog.text


# --- never raises into TRL --------------------------------------------------------------------------------------


def test_missing_tests_column_scores_none_and_logs(pool, caplog):
    funcs, _, _ = rewards(pool, [RewardSpec("tests", 1.0), RewardSpec("timeout", 1.0)])
    with caplog.at_level(logging.WARNING, logger="azr.rewards.functions"):
        for func in funcs:
            assert func(prompts=["p"] * 2, completions=[answer(GOOD)] * 2) == [None, None]
    assert "tests" in caplog.text


@pytest.mark.parametrize("odd", [None, 7])
def test_odd_completion_type_scores_defined_and_logs(pool, caplog, odd):
    specs = [RewardSpec(name, 1.0) for name in ("tests", "format", "length", "timeout")]
    funcs, _, _ = rewards(pool, specs)
    with caplog.at_level(logging.WARNING, logger="azr.rewards.functions"):
        scores = [call(func, [odd, answer(GOOD)]) for func in funcs]
    assert [s[1] for s in scores] == [1.0, 1.0, 0.0, 0.0]
    assert all(s[0] in (None, 0.0) for s in scores), scores
    assert type(odd).__name__ in caplog.text


# --- caching, details, logging ----------------------------------------------------------------------------------


def test_timeout_reward_reuses_the_tests_runs(pool):
    funcs, _, _ = rewards(pool, [RewardSpec("tests", 1.0), RewardSpec("timeout", 1.0)])
    completions = [answer(GOOD), answer(LOOP)]
    assert call(funcs[0], completions, timeout_s=[1.0] * 2) == [1.0, 0.0]
    runs = pool.stats["runs"]
    assert call(funcs[1], completions, timeout_s=[1.0] * 2) == [0.0, -1.0]
    assert pool.stats["runs"] == runs


def test_last_details_per_completion(pool):
    (tests,), _, grader = rewards(pool)
    call(tests, [answer(GOOD), answer(PARTIAL), answer(GOOD, final="")])
    details = grader.last_details
    assert [(d["status"], d["tests_passed"], d["tests_total"]) for d in details] == [
        ("passed", 3, 3),
        ("failed", 2, 3),
        ("no_code", 0, 0),
    ]
    assert all(isinstance(d["duration_s"], float) for d in details)
    assert details[0]["duration_s"] > 0 and details[2]["duration_s"] == 0.0


def test_log_extra_and_log_metric_receive_columns_and_rates(pool):
    (tests,), _, _ = rewards(pool)
    extra, metrics = {}, {}
    completions = [answer(GOOD), answer(WRONG), answer(LOOP), answer(GOOD, final="")]
    call(
        tests,
        completions,
        timeout_s=[1.0] * 4,
        trainer_state=object(),
        log_extra=lambda column, values: extra.setdefault(column, []).extend(values),
        log_metric=lambda name, value: metrics.__setitem__(name, value),
    )
    assert extra["status"] == ["passed", "failed", "timeout", "no_code"]
    assert extra["tests_passed"] == [3, 0, 0, 0]
    assert extra["tests_total"] == [3, 3, 3, 0]
    assert len(extra["duration_s"]) == 4
    assert metrics["sandbox/passed"] == 0.25
    assert metrics["sandbox/timeout"] == 0.25
    assert metrics["sandbox/no_code"] == 0.25
    assert metrics["sandbox/error"] == 0.0


# --- parallelism ------------------------------------------------------------------------------------------------


def test_batch_runs_in_parallel(pool):
    """The programs of one batch overlap in time (judged from their own clocks, not from how long the batch took)."""
    (tests,), _, grader = rewards(pool, timeout_s=30.0)
    body = "import time\nstart = time.time()\ntime.sleep(0.5)\nprint(start, time.time())\ndef f(x):\n    return x + 1"
    completions = [answer(f"{body}  # {i}") for i in range(4)]
    assert call(tests, completions) == [1.0] * 4
    outcomes = grader.outcomes(completions, {"tests": [list(TESTS)] * 4})  # cached: the same runs
    spans = sorted(tuple(map(float, o.grade.stdout.split()[:2])) for o in outcomes)
    assert any(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans)), spans


# --- acceptance: a hostile batch --------------------------------------------------------------------------------

FORK_BOMB = "while True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
HOSTILE = {
    "infinite loop at load": "while True:\n    pass",
    "infinite loop in f": LOOP,
    "fork bomb": f"import os\ndef f(x):\n{textwrap.indent(FORK_BOMB, '    ')}",
    "fork bomb at load": f"import os\n{FORK_BOMB}",
    "memory bomb": "def f(x):\n    b = []\n    while True:\n        b.append(bytearray(2**24))",
    "kill the parent": "import os\nos.kill(os.getppid(), 9)\ndef f(x):\n    return x + 1",
    "kill the parent, then hang": "import os\nos.kill(os.getppid(), 9)\nwhile True:\n    pass",
}


def test_hostile_batch_scores_every_completion_and_the_next_batch_is_clean(pool):
    (tests,), _, grader = rewards(pool)
    names = [*HOSTILE, "good 1", "good 2"]
    codes = [*HOSTILE.values(), GOOD, "def f(x):\n    return 1 + x"]
    scores = call(tests, [answer(code) for code in codes], timeout_s=[1.5] * len(codes))
    assert dict(zip(names, scores, strict=True)) == {name: 0.0 for name in HOSTILE} | {"good 1": 1.0, "good 2": 1.0}
    assert grader.health.errors == 0 and grader.health.stop_reason == ""
    after = [answer(f"def f(x):\n    return x + 1  # after {i}") for i in range(4)]
    assert call(tests, after) == [1.0] * 4


# --- stdin/stdout tasks and setup, through the columns TRL passes --------------------------------------------------
def test_stdin_stdout_tasks_score_through_the_tests_column(pool):
    from datasets import Dataset

    from azr.data import StdioCase, encode

    cases = [encode(StdioCase(f"{a} {b}\n", f"{a + b}\n")) for a, b in ((1, 2), (5, 5), (0, 7))]
    # the rows as GRPO's dataset holds them (Arrow), next to an assert task with setup code
    rows = Dataset.from_list(
        [
            {"tests": cases, "setup": ""},
            {"tests": ["assert f(K) == 3"], "setup": "K = 2"},
        ]
    )
    (tests,), _, grader = rewards(pool)
    right = "a, b = map(int, input().split())\nprint(a + b)"
    completions = [answer(right), answer("print(3)"), answer("def f(x):\n    return x + 1")]
    columns = {"tests": [rows[0]["tests"], rows[0]["tests"], rows[1]["tests"]]}
    columns["setup"] = [rows[0]["setup"], rows[0]["setup"], rows[1]["setup"]]
    assert tests(prompts=["p"] * 3, completions=completions, **columns) == [1.0, pytest.approx(1 / 3), 1.0]
    assert [d["per_test"] for d in grader.last_details[:2]] == [[True, True, True], [True, False, False]]


def test_a_tasks_prelude_checker_and_tolerance_travel_once_as_columns_and_grade_as_the_task_does(pool):
    """The options a task holds once (prelude, checker, atol/rtol) reach grading through their own columns of
    GRPO's dataset (Arrow), never inside a test's string, and grade exactly as the Task itself."""
    from datasets import Dataset

    from azr.data import task_from_row
    from azr.rewards import grade_many

    tasks = [
        task_from_row(
            {
                "id": "p",
                "prompt": "p",
                "tests": ["assert f() == 0.3"],
                "prelude": "from math import fsum",
                "atol": 1e-9,
            },
            "r",
        ),
        task_from_row(
            {
                "id": "c",
                "prompt": "p",
                "tests": [{"input": "4\n", "output": "2 2\n"}, {"input": "6\n", "output": "3 3\n"}],
            }
            | {"checker": "def check(i, e, o):\n    a, b = map(int, o.split())\n    return a + b == int(i)\n"},
            "r",
        ),
        task_from_row(
            {"id": "a", "prompt": "p", "tests": [{"args": [], "output": 0.3}], "entry_point": "f", "rtol": 1e-6}, "r"
        ),
    ]
    rows = Dataset.from_list([t.grading_columns() | {"task_id": t.id} for t in tasks])
    assert not any(key in test for r in rows for test in r["tests"] for key in ("prelude", "checker", "atol", "rtol"))
    codes = [
        "def f():\n    return fsum([0.1, 0.2])",
        "n = int(input())\nprint(1, n - 1)",
        "def f():\n    return 0.1 + 0.2",
    ]
    (tests,), _, _ = rewards(pool)
    columns = {key: list(rows[key]) for key in rows.column_names}
    assert tests(prompts=["p"] * 3, completions=[answer(c) for c in codes], **columns) == [1.0, 1.0, 1.0]
    direct = grade_many(list(zip(tasks, codes, strict=True)), pool)
    assert [g.passed for g in direct] == [True, True, True]
    without = [dataclass_replace(t, prelude=None, checker=None, atol=None, rtol=None) for t in tasks]
    assert [g.passed for g in grade_many(list(zip(without, codes, strict=True)), pool)] == [False, False, False]
