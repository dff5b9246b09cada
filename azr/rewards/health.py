"""The one infrastructure-failure counter of a run: sandbox runs that failed for the sandbox's own sake (status
`error`, never the program's fault), counted per training step, and the stop once a step's share passes
`sandbox.max_infra_failure_rate` (SandboxUnhealthy), so that a run never trains on noise.

Used by the code grader of the rewards and by Absolute Zero's validator and judge; the trainer's health callback
calls `check` at the end of every step. It runs nothing itself.
"""

from __future__ import annotations

from collections.abc import Callable

from azr.sandbox import SandboxUnhealthy


class InfraFailures:
    """Infrastructure failures among sandbox runs: totals over the run, and the share since the last `check`."""

    def __init__(self, max_rate: float):
        self.max_rate = max_rate
        self.runs = self.errors = 0
        self._unchecked = (0, 0)  # (infrastructure errors, runs) since the last `check`
        self.stop_reason = ""  # set by `check` once the failure rate passed the limit

    def account(self, errors: int, runs: int) -> None:
        self.runs += runs
        self.errors += errors
        self._unchecked = (self._unchecked[0] + errors, self._unchecked[1] + runs)

    def check(self, total: Callable[[int, int], list[float]] | None = None) -> None:
        """Raise SandboxUnhealthy once the runs since the last check (one training step's batch) failed for
        infrastructure reasons past the limit: the caller stops the run. With several processes, `total` sums
        (errors, runs) over them: each grades its own rows, and all must stop together, or a healthy rank would
        wait forever for the others in its next collective."""
        errors, runs = self._unchecked
        self._unchecked = (0, 0)
        if total is not None:
            errors, runs = (int(n) for n in total(errors, runs))
        if runs and errors / runs > self.max_rate:
            self.stop_reason = (
                f"{errors} of {runs} sandbox runs in one batch failed for infrastructure reasons "
                f"(limit sandbox.max_infra_failure_rate={self.max_rate:g})"
            )
        if self.stop_reason:
            raise SandboxUnhealthy(self.stop_reason)
