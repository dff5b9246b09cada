"""Validation of proposed triplets in the sandbox, one run per triplet: every rule of `harness`, determinism
across two interpreters with different hash seeds included. Each rejection has a reason from `REASONS`; a sandbox
that fails for its own sake gives `SANDBOX_ERROR` (not the proposal's fault: counted, and the run stops past
`sandbox.max_infra_failure_rate`). Nothing here runs or parses model code in the trainer.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from azr.absolute_zero.calls import STARTUP_S
from azr.absolute_zero.triplets import Triplet
from azr.config import DEFAULT_IMPORTS, AbsoluteZeroConfig, SandboxConfig
from azr.inputs import load_json
from azr.rewards import InfraFailures, limits_from_config, pool_from_config
from azr.sandbox import ExecResult, ExecutionProvider, Limits

log = logging.getLogger(__name__)

_HERE = Path(__file__).parent
# The harness and the modules it imports, shipped as text: the sandbox's interpreter has no azr to import.
SHIPPED = {
    name: (_HERE / f"{name.rsplit('.', 1)[1]}.py").read_text()
    for name in ("azr.absolute_zero.static", "azr.absolute_zero.calls")
}
HARNESS_SOURCE = (_HERE / "harness.py").read_text()
REASONS = (
    "format",
    "syntax",
    "structure",
    "banned_import",
    "banned_name",
    "bad_input",
    "error",
    "timeout",
    "memory",
    "output_too_long",
    "output_not_literal",
    "nondeterministic",
    "output_mismatch",
)
SANDBOX_ERROR = "sandbox_error"
_GRACE_S = 3.0  # beyond the program runs' own limits: the harness starting, the static checks


@dataclass(frozen=True)
class Rules:
    """What a valid program may do, and how long it may run: shared by validation and judging."""

    allowed_imports: tuple[str, ...] = tuple(DEFAULT_IMPORTS)
    max_output_chars: int = 1000
    timeout_s: float = 1.0

    @classmethod
    def from_config(cls, cfg: AbsoluteZeroConfig) -> Rules:
        return cls(tuple(cfg.allowed_imports), cfg.max_output_chars, cfg.timeout_s)

    def payload(self, mode: str, **fields: Any) -> dict[str, Any]:
        return {
            "mode": mode,
            "allowed_imports": list(self.allowed_imports),
            "max_output_chars": self.max_output_chars,
            "timeout_s": self.timeout_s,
            **fields,
        }


@dataclass(frozen=True)
class Verdict:
    """One triplet's validation: `reason` is '' when valid; `triplet` then carries the computed outputs."""

    reason: str
    detail: str = ""
    triplet: Triplet | None = None

    @property
    def valid(self) -> bool:
        return not self.reason

    @property
    def infra(self) -> bool:
        return self.reason == SANDBOX_ERROR


def run_payloads(
    payloads: Sequence[dict[str, Any]], pool: ExecutionProvider, limits: Limits, health: InfraFailures | None = None
) -> list[dict[str, Any] | str]:
    """The harness's report for each payload, or how the sandbox run ended instead ('timeout', 'memory',
    'error' for the program; SANDBOX_ERROR for the sandbox's own failure). The sandbox's failures are counted in
    `health` where given (the judge counts its own, through its `OutcomeCache`)."""
    nonces = [secrets.token_hex(16) for _ in payloads]
    codes = [harness_program({**p, "nonce": n}) for p, n in zip(payloads, nonces, strict=True)]
    results = pool.map(codes, limits) if codes else []
    errors = sum(r.status == "error" for r in results)
    if errors and health is not None:
        log.warning("absolute_zero: %d of %d sandbox runs failed for infrastructure reasons", errors, len(results))
    if health is not None:
        health.account(errors, len(results))
    return [_report(result, nonce) for result, nonce in zip(results, nonces, strict=True)]


def harness_program(payload: dict[str, Any]) -> str:
    """The program sent to the sandbox: the harness's helper modules, each loaded from its text under its own name
    (keeping that text, from which `calls` starts fresh interpreters), then the harness and a call of its `main`
    with the payload."""
    return (
        "import sys, types\n"
        f"for _name, _source in {list(SHIPPED.items())!r}:\n"
        "    _module = types.ModuleType(_name)\n"
        "    _module._AZR_SOURCE = _source\n"
        "    exec(compile(_source, '<' + _name + '>', 'exec'), _module.__dict__)\n"
        "    sys.modules[_name] = _module\n"
        f"exec(compile({HARNESS_SOURCE!r}, '<harness>', 'exec'))\n"
        f"main({json.dumps(payload)!r})\n"
    )


def _report(result: ExecResult, nonce: str) -> dict[str, Any] | str:
    if result.status == "error":
        return SANDBOX_ERROR
    if result.status in ("timeout", "memory"):
        return result.status
    found = []
    for line in result.report.splitlines():
        try:  # only the harness's parent writes here, but read defensively all the same
            tag, report = load_json(line)  # within the JSON limits: never a RecursionError here
        except (ValueError, TypeError):
            continue
        if tag == nonce and isinstance(report, dict):
            found.append(report)
    return found[0] if len(found) == 1 else "error"


def harness_limits(base: Limits, rules: Rules, runs: int = 1) -> Limits:
    """The sandbox's limits for one harness run: for each of `runs` runs of the program, the rules' time and the most
    a fresh interpreter may take to start (past that the harness itself reports the sandbox's failure, so this
    outer limit never blames a program for a slow start); plus the harness's own start."""
    wall = runs * (rules.timeout_s + STARTUP_S) + _GRACE_S
    return dataclasses.replace(base, wall_s=wall, cpu_s=wall)


class Validator:
    """Validates triplets through `pool` under `rules`."""

    def __init__(self, pool: ExecutionProvider, limits: Limits, rules: Rules, max_rate: float):
        self.pool, self.rules = pool, rules
        self.limits = harness_limits(limits, rules, runs=2)
        self.health = InfraFailures(max_rate)

    def validate(self, triplets: Sequence[Triplet]) -> list[Verdict]:
        """A verdict per triplet. Given outputs (a checked file) must match what the program returns."""
        payloads = [
            self.rules.payload(
                "validate",
                program=t.program,
                inputs=list(t.inputs),
                expected=list(t.outputs) if t.outputs is not None else None,
            )
            for t in triplets
        ]
        reports = run_payloads(payloads, self.pool, self.limits, self.health)
        return [_verdict(t, r) for t, r in zip(triplets, reports, strict=True)]

    def check(self, total: Callable[[int, int], list[float]] | None = None) -> None:
        self.health.check(total)


def _verdict(triplet: Triplet, report: dict[str, Any] | str) -> Verdict:
    if isinstance(report, str):
        return Verdict(report, f"the sandbox run ended: {report}")
    reason = str(report.get("reason") or "")
    if reason:
        known = reason in REASONS or reason == SANDBOX_ERROR
        return Verdict(reason if known else "error", str(report.get("detail", ""))[:300])
    outputs = report.get("outputs")
    if not isinstance(outputs, list) or len(outputs) != len(triplet.inputs):
        return Verdict("error", "the check reported no outputs")
    return Verdict("", triplet=triplet.with_outputs(tuple(str(o) for o in outputs)))


def build_validator(sandbox: SandboxConfig, cfg: AbsoluteZeroConfig) -> Validator:
    """The Validator for a recipe: the grading pool and the recipe's limits."""
    return Validator(
        pool_from_config(sandbox),
        limits_from_config(sandbox),
        Rules.from_config(cfg),
        sandbox.max_infra_failure_rate,
    )
