"""Rewards of Absolute Zero mode: `absolute_zero_propose_reward` (an invalid proposal's penalty, else its
learnability from its samples' solve rate) and `absolute_zero_solve_reward` (correct, wrong, bad format). Each is
None on the other role's rows and where the sandbox failed; both judge through `Judge` and never call a model
(docs/absolute-zero.md has the values).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from azr.absolute_zero.judging import Judge, Outcome
from azr.absolute_zero.triplets import triplet_from_line
from azr.absolute_zero.validation import SANDBOX_ERROR
from azr.config import AbsoluteZeroConfig
from azr.prompts import completion_text
from azr.rewards import Rubric

log = logging.getLogger(__name__)


def learnability(solve_rate: float, unlearnable: float = 0.0) -> float:
    """The proposer's reward for a valid task its solver samples solved at `solve_rate`."""
    return unlearnable if solve_rate in (0.0, 1.0) else 1.0 - solve_rate


@dataclass(frozen=True)
class RewardValues:
    solve_correct: float = 1.0
    solve_wrong: float = -0.5
    solve_format: float = -1.0
    propose_invalid: float = -1.0
    propose_unlearnable: float = 0.0

    @classmethod
    def from_config(cls, cfg: AbsoluteZeroConfig) -> RewardValues:
        return cls(cfg.solve_correct, cfg.solve_wrong, cfg.solve_format, cfg.propose_invalid, cfg.propose_unlearnable)


class _RoleReward:
    """TRL's calling convention for one role's rows; never raises into TRL. `last_details` holds, per row of the
    last batch, what decided its reward (empty for the other role's rows), for the generation log."""

    role = ""
    optional = True  # None on the other role's rows: not this reward's rows (a row with no value at all is masked)

    def __init__(self, judge: Judge, values: RewardValues):
        self.judge, self.values = judge, values
        self.last_details: list[dict[str, Any]] = []

    @property
    def __name__(self) -> str:  # TRL names each reward's metrics after the function
        return f"absolute_zero_{self.role}_reward"

    def __call__(self, prompts=None, completions=None, **columns) -> list[float | None]:
        completions = list(completions or [])
        try:
            return self.score(completions, columns)
        except Exception as exc:  # never into TRL: every row gets None and the reason is logged
            log.error("%s failed on a batch of %d: %s: %s", self.__name__, len(completions), type(exc).__name__, exc)
            self.last_details = [{} for _ in completions]
            return [None] * len(completions)

    def score(self, completions: list[Any], columns: dict[str, Any]) -> list[float | None]:
        raise NotImplementedError

    def rows(self, columns: dict[str, Any]) -> list[int]:
        return [i for i, role in enumerate(columns["az_role"]) if role == self.role]


class ProposeReward(_RoleReward):
    role = "propose"

    def score(self, completions, columns):
        kinds, reasons, tasks, samples = (columns[k] for k in ("az_type", "az_reason", "az_task", "az_samples"))
        owners, jobs = [], []
        for i in self.rows(columns):
            if not reasons[i]:
                task = triplet_from_line(tasks[i], f"row {i}")
                owners += [i] * len(samples[i])
                jobs += [(kinds[i], task, text) for text in samples[i]]
        verdicts: dict[int, list[Outcome]] = defaultdict(list)
        for i, outcome in zip(owners, self.judge.judge(jobs), strict=True):
            verdicts[i].append(outcome)
        scores: list[float | None] = [None] * len(completions)
        self.last_details = [{} for _ in completions]
        for i in self.rows(columns):
            judged = [o for o in verdicts[i] if o.judged]
            solved = sum(o.verdict == "correct" for o in judged)
            rate = solved / len(judged) if judged else None
            if reasons[i] == SANDBOX_ERROR or (not reasons[i] and rate is None):
                scores[i] = None
            elif reasons[i]:
                scores[i] = self.values.propose_invalid
            else:
                scores[i] = learnability(rate, self.values.propose_unlearnable)  # type: ignore[arg-type]
            self.last_details[i] = {"valid": not reasons[i], "reason": reasons[i], "solve_rate": rate}
            if judged:
                self.last_details[i]["solved"] = f"{solved}/{len(judged)}"
        _log_by_type(columns, self.rows(columns), scores, self.last_details, _propose_metrics)
        return scores


class SolveReward(_RoleReward):
    role = "solve"

    def score(self, completions, columns):
        rows = self.rows(columns)
        kinds, tasks = columns["az_type"], columns["az_task"]
        jobs = [(kinds[i], triplet_from_line(tasks[i], f"row {i}"), completion_text(completions[i])) for i in rows]
        scores: list[float | None] = [None] * len(completions)
        self.last_details = [{} for _ in completions]
        values = {"correct": self.values.solve_correct, "wrong": self.values.solve_wrong}
        values["format"] = self.values.solve_format
        for i, outcome in zip(rows, self.judge.judge(jobs), strict=True):
            scores[i] = values.get(outcome.verdict)  # None for a sandbox error
            self.last_details[i] = {"verdict": outcome.verdict, "reason": outcome.detail}
        _log_by_type(columns, rows, scores, self.last_details, _solve_metrics)
        return scores


def _propose_metrics(scores: list[float], details: list[dict[str, Any]]) -> dict[str, float]:
    rates = [d["solve_rate"] for d in details if d.get("valid") and d.get("solve_rate") is not None]
    found = {"propose/reward": _mean(scores)}
    if rates:
        found["proposals/solve_rate"] = _mean(rates)
        found["proposals/never_solved"] = _mean([float(r == 0.0) for r in rates])
        found["proposals/partly_solved"] = _mean([float(0.0 < r < 1.0) for r in rates])
        found["proposals/always_solved"] = _mean([float(r == 1.0) for r in rates])
    return found


def _solve_metrics(scores: list[float], details: list[dict[str, Any]]) -> dict[str, float]:
    judged = [d["verdict"] for d in details if d.get("verdict") not in (None, "error")]
    found = {"solve/reward": _mean(scores)}
    for verdict in ("correct", "wrong", "format"):
        if judged:
            found[f"solve/{verdict}"] = _mean([float(v == verdict) for v in judged])
    return found


def _log_by_type(
    columns: dict[str, Any],
    rows: list[int],
    scores: list[float | None],
    details: list[dict[str, Any]],
    metrics: Callable[[list[float], list[dict[str, Any]]], dict[str, float]],
) -> None:
    """Per task type, the role's metrics through TRL's `log_metric` (averaged per logging step)."""
    log_metric = columns.get("log_metric")
    if not callable(log_metric):
        return
    by_type: dict[str, list[int]] = defaultdict(list)
    for i in rows:
        by_type[columns["az_type"][i]].append(i)
    for kind, indices in sorted(by_type.items()):
        values = [scores[i] for i in indices if scores[i] is not None]
        for name, value in metrics(values, [details[i] for i in indices]).items():
            if value is not None:
                log_metric(f"absolute_zero/{kind}/{name}", value)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


ROLE_WEIGHTS = (1.0, 1.0)  # propose, solve: each role's reward counts once


def build_az_rewards(judge: Judge, cfg: AbsoluteZeroConfig) -> list[_RoleReward]:
    """The mode's reward functions for TRL, in order (propose, solve), weighted by `ROLE_WEIGHTS`."""
    values = RewardValues.from_config(cfg)
    return [ProposeReward(judge, values), SolveReward(judge, values)]


def build_az_rubric(judge: Judge, cfg: AbsoluteZeroConfig) -> Rubric:
    """The mode's rubric: its two role rewards around `judge`, weighted by `ROLE_WEIGHTS`."""
    return Rubric(tuple(build_az_rewards(judge, cfg)), ROLE_WEIGHTS)
