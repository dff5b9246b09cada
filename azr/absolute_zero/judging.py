"""Judging a solver's answer to a triplet in the sandbox: correct, wrong, bad format, or `error` (a sandbox failure:
counted, never a verdict). The answer is read with azr's answer format; what its block holds depends on the task
type, and `harness` compares values with exact types. Verdicts are cached through `azr.rewards`' `OutcomeCache`, so
the learnability samples and solver rows that share an answer run once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from azr.absolute_zero.triplets import TaskType, Triplet, split_pairs
from azr.absolute_zero.validation import SANDBOX_ERROR, Rules, harness_limits, run_payloads
from azr.config import AbsoluteZeroConfig, SandboxConfig
from azr.prompts import AnswerFormat, parse_answer
from azr.rewards import InfraFailures, OutcomeCache, limits_from_config, pool_from_config
from azr.sandbox import ExecutionProvider, Limits

Verdict = Literal["correct", "wrong", "format", "error"]


@dataclass(frozen=True)
class Outcome:
    verdict: Verdict
    detail: str = ""

    @property
    def judged(self) -> bool:
        return self.verdict != "error"


class Judge:
    """Judges (type, triplet, completion) jobs through one pool; `induction_shown` pairs of an induction task are
    shown to the solver, the others decide."""

    def __init__(
        self,
        pool: ExecutionProvider,
        limits: Limits,
        rules: Rules,
        induction_shown: int,
        answer_format: AnswerFormat = "strict",
        max_rate: float = 0.05,
        cache_size: int = 8192,
    ):
        self.pool, self.rules, self.shown, self.answer_format = pool, rules, induction_shown, answer_format
        self.limits = harness_limits(limits, rules)
        self.health = InfraFailures(max_rate)
        self.cache_size = cache_size
        self.cache: OutcomeCache[tuple, Outcome] = OutcomeCache(
            cache_size, self.health, lambda o: not o.judged, "always", "absolute_zero", lambda o: o.detail
        )

    def judge(self, jobs: Sequence[tuple[TaskType, Triplet, str]]) -> list[Outcome]:
        """An outcome per (type, triplet with outputs, completion text); new answers run in parallel."""
        keys, payloads = [], {}
        for kind, triplet, text in jobs:
            code = parse_answer(text or "", self.answer_format).code
            key = (kind, triplet.key, triplet.outputs, code)
            keys.append(key)
            if code is not None and key not in payloads:
                payloads[key] = (kind, triplet, code)

        def run(todo: list[tuple]) -> list[Outcome]:
            fields = [self._payload(*payloads[key]) for key in todo]
            return [_outcome(report) for report in run_payloads(fields, self.pool, self.limits)]

        found, _ = self.cache.resolve(keys, run, runnable=lambda key: key[3] is not None)
        unread = Outcome("format", "no answer in the asked format")
        return [unread if k[3] is None else o or unread for k, o in zip(keys, found, strict=True)]

    def check(self, total: Callable[[int, int], list[float]] | None = None) -> None:
        self.health.check(total)

    def _payload(self, kind: TaskType, triplet: Triplet, code: str) -> dict[str, Any]:
        fields: dict[str, Any] = {"type": kind, "answer": code}
        if kind == "induction":
            _, hidden = split_pairs(triplet, self.shown)
            fields |= {"inputs": [i for i, _ in hidden], "outputs": [o for _, o in hidden]}
        else:
            fields |= {"program": triplet.program, "outputs": list(triplet.outputs or ())}
        return self.rules.payload("judge", **fields)


def _outcome(report: dict[str, Any] | str) -> Outcome:
    if report == SANDBOX_ERROR:
        return Outcome("error", "the sandbox failed")
    if isinstance(report, str):  # the harness itself was stopped: the answer's program ran away
        return Outcome("wrong", f"the check ended: {report}")
    verdict = report.get("outcome")
    if verdict == "error":  # the harness could not start the program's interpreter
        return Outcome("error", str(report.get("detail", "")))
    if verdict not in ("correct", "wrong", "format"):
        return Outcome("wrong", "the check gave no verdict")
    return Outcome(verdict, str(report.get("detail", ""))[:300])


def build_judge(sandbox: SandboxConfig, cfg: AbsoluteZeroConfig, answer_format: AnswerFormat = "strict") -> Judge:
    """The Judge for a recipe: the grading pool and the recipe's limits and answer format."""
    return Judge(
        pool_from_config(sandbox),
        limits_from_config(sandbox),
        Rules.from_config(cfg),
        cfg.induction_shown,
        answer_format,
        sandbox.max_infra_failure_rate,
    )
