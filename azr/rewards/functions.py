"""Rewards: TRL reward functions `(prompts, completions, **columns) -> list[float | None]` over code completions, the
REWARDS table, and `instantiate` (a recipe's spec to its function; `azr.rewards.rubric` builds the set). A reward
never raises into TRL: a wrong answer scores low, an infrastructure failure or an unexpected error scores None
(counted, or logged). Rewards that need test results share one `CodeGrader`, which grades each batch once.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from azr.config import RewardSpec
from azr.data import TEST_TYPES, Task, Test, decode
from azr.errors import ConfigError
from azr.prompts import Answer, AnswerFormat, completion_text, parse_answer
from azr.rewards.batches import OutcomeCache
from azr.rewards.grading import Grade, grade_many
from azr.rewards.health import InfraFailures
from azr.sandbox import ExecutionProvider, Limits

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    """One completion, read and run: `grade` is None when there was no code to run."""

    answer: Answer
    grade: Grade | None

    @property
    def status(self) -> str:
        return self.grade.status if self.grade is not None else "no_code"

    def details(self) -> dict[str, Any]:
        grade = self.grade
        return {
            "status": self.status,
            "format_ok": self.answer.format_ok,
            "tests_passed": grade.tests_passed if grade else 0,
            "tests_total": grade.tests_total if grade else 0,
            "per_test": grade.per_test if grade else [],
            "duration_s": round(grade.duration_s, 4) if grade else 0.0,
            "reason": (self.answer.problem if grade is None else "; ".join(grade.failures))[:300],
        }


class CodeGrader:
    """Reads, runs and caches completions for the rewards of one run; counts infrastructure failures."""

    def __init__(
        self,
        pool: ExecutionProvider,
        limits: Limits,
        answer_format: AnswerFormat = "strict",
        max_infra_failure_rate: float = 0.05,
        cache_size: int = 4096,
    ):
        self.pool, self.limits, self.answer_format = pool, limits, answer_format
        self.health = InfraFailures(max_infra_failure_rate)
        self.cache_size = cache_size
        self.cache: OutcomeCache[tuple, Outcome] = OutcomeCache(
            cache_size, self.health, _sandbox_failed, "next_batch", "rewards", _failure_reason
        )
        self.last_details: list[dict[str, Any]] = []

    def grade_answers(self, jobs: Sequence[tuple[Task, str]]) -> list[tuple[str | None, Grade | None]]:
        """A remote model's answers (opponent, teacher): each text's code (None: nothing runnable) and its grade
        against its task, graded together through the pool. Not the policy's batch: no cache, no accounting."""
        codes = [parse_answer(text or "", self.answer_format).code for _, text in jobs]
        runnable = [(task, code) for (task, _), code in zip(jobs, codes, strict=True) if code is not None]
        grades = iter(grade_many(runnable, self.pool, self.limits) if runnable else [])
        return [(code, next(grades) if code is not None else None) for code in codes]

    def outcomes(self, completions: Sequence[Any], columns: dict[str, Any]) -> list[Outcome]:
        """Outcome per completion; programs not seen before run in parallel through the pool (`OutcomeCache`, the
        grading path Absolute Zero's judge shares). The batch's details are kept for the trainer's observers
        (`last_details`)."""
        outcomes = self._resolve(completions, columns)
        self.last_details = [o.details() for o in outcomes]
        return outcomes

    def grade_ahead(self, completions: Sequence[Any], columns: dict[str, Any]) -> None:
        """Run the programs of a batch the trainer will score later (asynchronous GRPO's producer, on its own
        thread): their outcomes wait in the cache, so the reward call that scores the batch runs none of them.
        `last_details` is left to the trainer's own batch."""
        self._resolve(completions, columns)

    def _resolve(self, completions: Sequence[Any], columns: dict[str, Any]) -> list[Outcome]:
        tests = columns.get("tests")
        if tests is None:
            raise KeyError("the dataset has no 'tests' column")
        keys, jobs = [], {}
        for i, completion in enumerate(completions):
            answer = parse_answer(completion_text(completion), self.answer_format)
            task = Task(
                id=str(_column(columns, "task_id", i) or _column(columns, "id", i) or i),
                prompt="",
                tests=_tests_cell(tests[i], i),
                setup=_column(columns, "setup", i) or None,
                timeout_s=_column(columns, "timeout_s", i),
                memory_mb=_column(columns, "memory_mb", i),
                prelude=_column(columns, "prelude", i) or None,
                checker=_column(columns, "checker", i) or None,
                atol=_column(columns, "atol", i),
                rtol=_column(columns, "rtol", i),
            )
            options = (task.prelude, task.checker, task.atol, task.rtol)
            keys.append((answer, tuple(task.tests), task.setup, task.timeout_s, task.memory_mb, options))
            jobs[keys[-1]] = (task, answer.code)

        def run(todo: list[tuple]) -> list[Outcome]:
            grades = grade_many([jobs[key] for key in todo], self.pool, self.limits)
            return [Outcome(key[0], grade) for key, grade in zip(todo, grades, strict=True)]

        found, _ = self.cache.resolve(keys, run, runnable=lambda key: key[0].code is not None)
        return [o or Outcome(key[0], None) for o, key in zip(found, keys, strict=True)]

    def _account(self, grades: list[Grade]) -> None:
        """Count these grades' infrastructure failures (as a batch would)."""
        self.cache._account([Outcome(Answer(None, False), g) for g in grades])

    def check(self, total: Callable[[int, int], list[float]] | None = None) -> None:
        """SandboxUnhealthy once the runs graded since the last check failed past the limit (`InfraFailures`)."""
        self.health.check(total)


def _sandbox_failed(outcome: Outcome) -> bool:
    return outcome.status == "error"


def _failure_reason(outcome: Outcome) -> str:
    return outcome.grade.failures[-1] if outcome.grade is not None and outcome.grade.failures else "unknown"


def _tests_cell(cell: Any, row: int) -> list[Test]:
    """A row's tests: a list of tests, or of their strings (`azr.data.codec`, as a dataset column holds them);
    anything else (a bare string would be split into characters, a malformed encoding) becomes no tests, which
    grading reports as `error` for that completion, and is logged."""
    if isinstance(cell, (list, tuple)) and cell and all(isinstance(t, TEST_TYPES) or _text(t) for t in cell):
        try:
            return [decode(t) if isinstance(t, str) else t for t in cell]
        except ValueError as exc:
            log.error("rewards: row %d: a malformed test in 'tests': %s", row, exc)
            return []
    log.error("rewards: row %d: 'tests' must be a non-empty list of test strings, got %.80r", row, cell)
    return []


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _column(columns: dict[str, Any], name: str, i: int) -> Any:
    values = columns.get(name)
    return values[i] if isinstance(values, (list, tuple)) and i < len(values) else None


class Reward:
    """Base of the registered rewards: TRL's calling convention, a name for its logs, and no exceptions out.
    `optional`: whether its None means "does not apply to this row" (the row is scored on the other rewards);
    otherwise, as for any reward function without the attribute, a None is an infrastructure failure and the row is
    not graded (`azr.rewards.rubric.is_optional`)."""

    name = "reward"
    needs_grader = False
    optional = False

    @property
    def __name__(self) -> str:  # TRL names each reward's metrics after the function
        return f"{self.name}_reward"

    def __call__(self, prompts=None, completions=None, **columns) -> list[float | None]:
        completions = list(completions or [])
        odd = sorted({type(c).__name__ for c in completions if not isinstance(c, (str, list, dict))})
        if odd:  # read as empty text, so they score as answers without code; say so rather than stay silent
            log.warning("%s: completions of unexpected type %s read as empty text", self.__name__, ", ".join(odd))
        try:
            return self.score(completions, columns)
        except Exception as exc:  # never into TRL: every completion gets None and the reason is logged
            log.error("%s failed on a batch of %d: %s: %s", self.__name__, len(completions), type(exc).__name__, exc)
            return [None] * len(completions)

    def score(self, completions: list[Any], columns: dict[str, Any]) -> list[float | None]:
        raise NotImplementedError


class TestsReward(Reward):
    """Fraction of the task's tests passed (1/0 without partial credit); None on infrastructure failure;
    0.0 when the answer has no runnable code."""

    name, needs_grader = "tests", True

    def __init__(self, grader: CodeGrader, partial_credit: bool = True):
        self.grader, self.partial_credit = grader, partial_credit

    def score(self, completions, columns):
        outcomes = self.grader.outcomes(completions, columns)
        _log(columns, outcomes, self.grader)
        return [self._value(o) for o in outcomes]

    def _value(self, outcome: Outcome) -> float | None:
        grade = outcome.grade
        if grade is None:
            return 0.0
        if grade.status == "error":
            return None
        return grade.fraction if self.partial_credit else float(grade.passed)


class FormatReward(Reward):
    """`ok` when the strict answer format holds, `bad` when it does not."""

    name = "format"

    def __init__(self, ok: float = 1.0, bad: float = 0.0):
        self.ok, self.bad = ok, bad

    def score(self, completions, columns):
        return [self.ok if parse_answer(completion_text(c)).format_ok else self.bad for c in completions]


class LengthReward(Reward):
    """Conciseness: 0 up to `target_tokens`, falling linearly to -`penalty` at `limit_tokens` and staying there.
    Counts completion tokens when TRL passes `completion_ids`, else characters / 4."""

    name = "length"

    def __init__(self, target_tokens: int = 512, limit_tokens: int = 2048, penalty: float = 1.0):
        if not 0 < target_tokens < limit_tokens:
            raise ValueError("length reward needs 0 < target_tokens < limit_tokens")
        self.target, self.limit, self.penalty = target_tokens, limit_tokens, penalty

    def score(self, completions, columns):
        ids = columns.get("completion_ids")
        lengths = [len(x) for x in ids] if ids else [len(completion_text(c)) / 4 for c in completions]
        return [-self.penalty * min(1.0, max(0.0, (n - self.target) / (self.limit - self.target))) for n in lengths]


class TimeoutReward(Reward):
    """-`penalty` when the program hit its time limit, 0 otherwise; None on infrastructure failure."""

    name, needs_grader = "timeout", True

    def __init__(self, grader: CodeGrader, penalty: float = 1.0):
        self.grader, self.penalty = grader, penalty

    def score(self, completions, columns):
        scores: list[float | None] = []
        for outcome in self.grader.outcomes(completions, columns):
            scores.append(None if outcome.status == "error" else -self.penalty if outcome.status == "timeout" else 0.0)
        return scores


def selfplay_score(
    policy_passed: bool | None,
    opponent_passed: bool | None,
    win: float = 1.0,
    both_pass: float = 0.5,
    both_fail: float = 0.0,
    loss: float = 0.0,
) -> float | None:
    """The self-play part of one completion's reward; None when either side has no verdict (never a loss)."""
    if policy_passed is None or opponent_passed is None:
        return None
    if policy_passed:
        return both_pass if opponent_passed else win
    return loss if opponent_passed else both_fail


class SelfPlayReward(Reward):
    """`selfplay_score` of each completion (passed = every test passed) against the opponent's answer to the same
    task, read from the `opponent_passed` column (True / False / None: opponent unavailable or not asked). None
    without that column or where the policy's code could not be graded."""

    name, needs_grader, optional = "selfplay", True, True  # no opponent's verdict: the row keeps its other rewards

    def __init__(self, grader: CodeGrader, win=1.0, both_pass=0.5, both_fail=0.0, loss=0.0):
        self.grader, self.values = grader, {"win": win, "both_pass": both_pass, "both_fail": both_fail, "loss": loss}

    def score(self, completions, columns):
        opponent = columns.get("opponent_passed")
        if opponent is None:
            log.warning("%s: no 'opponent_passed' column; the self-play part is left out", self.__name__)
            return [None] * len(completions)
        outcomes = self.grader.outcomes(completions, columns)
        mine = [None if o.status == "error" else o.status == "passed" for o in outcomes]
        return [selfplay_score(p, o, **self.values) for p, o in zip(mine, opponent, strict=True)]


# The columns a feedback episode adds to its row (`azr.training.episodes.feedback`), which EpisodeReward reads.
EPISODE_TURNS, PUBLIC_FIRST, PUBLIC_LAST = "feedback_turns", "feedback_public_first", "feedback_public_last"


class EpisodeReward(Reward):
    """Execution feedback's shaping: -`turn_penalty` per answer after the first, plus `improvement_bonus` times the
    rise of the public-test pass fraction from the first answer to the last (rLLM's). 0.0 on a row that is not a
    feedback episode. The hidden tests are the `tests` reward's, on the final answer."""

    name = "episode"

    def __init__(self, turn_penalty: float = 0.0, improvement_bonus: float = 0.0):
        self.turn_penalty, self.improvement_bonus = turn_penalty, improvement_bonus

    def score(self, completions, columns):
        turns, first, last = (columns.get(k) for k in (EPISODE_TURNS, PUBLIC_FIRST, PUBLIC_LAST))
        if turns is None or first is None or last is None:
            return [0.0] * len(completions)
        return [
            -self.turn_penalty * (t - 1) + self.improvement_bonus * max(0.0, b - a)
            for t, a, b in zip(turns, first, last, strict=True)
        ]


REWARDS: dict[str, type[Reward]] = {
    r.name: r for r in (TestsReward, FormatReward, LengthReward, TimeoutReward, SelfPlayReward, EpisodeReward)
}


def _log(columns: dict[str, Any], outcomes: list[Outcome], grader: CodeGrader) -> None:
    """Per-completion details into TRL's completions table, and batch rates as metrics, where TRL offers them."""
    log_extra, log_metric = columns.get("log_extra"), columns.get("log_metric")
    details = grader.last_details
    if callable(log_extra):
        for key in ("status", "tests_passed", "tests_total", "duration_s"):
            log_extra(key, [d[key] for d in details])
    if callable(log_metric) and outcomes:
        for status in ("passed", "timeout", "crashed", "memory", "error", "no_code"):
            log_metric(f"sandbox/{status}", sum(o.status == status for o in outcomes) / len(outcomes))
        for key, value in grader.pool.metrics().items():  # e.g. a remote provider's retries and lost programs
            log_metric(f"sandbox/{key}", value)


def instantiate(spec: RewardSpec, grader: CodeGrader | None, where: str) -> Callable:
    """The reward function `spec` names, with its params (and `grader` when it grades code); ConfigError at `where`."""
    target = REWARDS.get(spec.name) or _import(spec.name, where)
    params = dict(spec.params)
    if isinstance(target, type) and issubclass(target, Reward) and target.needs_grader:
        params["grader"] = grader
    try:
        inspect.signature(target).bind_partial(**params)
    except TypeError:
        accepted = [p for p in inspect.signature(target).parameters if p not in ("grader", "self")]
        raise ConfigError(f"{where}.params: {spec.name!r} accepts {accepted}, got {sorted(spec.params)}") from None
    if isinstance(target, type):
        try:
            return target(**params)
        except ValueError as exc:
            raise ConfigError(f"{where}.params: {exc}") from None
    if params:
        raise ConfigError(f"{where}.params: {spec.name!r} is a function; give it no params, or make it a class")
    return target


def _import(name: str, where: str) -> Callable:
    """A custom reward by dotted path: 'package.module:function' or 'package.module.function'."""
    module_name, _, attr = name.rpartition(":") if ":" in name else name.rpartition(".")
    if not module_name:
        known = ", ".join(REWARDS)
        raise ConfigError(f"{where}.name: unknown reward {name!r} (registered: {known}; or a path 'pkg.mod:func')")
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{where}.name: cannot import {name!r}: {exc}") from None
    if not callable(target):
        raise ConfigError(f"{where}.name: {name!r} is not callable")
    return target
