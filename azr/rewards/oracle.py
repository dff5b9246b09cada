"""The sandbox as an oracle for data files that lack expected outputs (EvalPlus's plus inputs): it runs the
reference programs that `azr.data.formats` builds and hands back their stdout. The reference is data like any
other, so it runs in the sandbox, never in this process."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from azr.config import SandboxConfig
from azr.data import Oracle
from azr.rewards.grading import limits_from_config, pool_from_config

ORACLE_WALL_S = 60.0  # one program runs a task's reference on all its inputs (up to a thousand for MBPP+)
ORACLE_OUTPUT_BYTES = 8 << 20  # under the sandbox's file size limit, which captured output counts against


def sandbox_oracle(cfg: SandboxConfig) -> Oracle:
    """Programs -> their stdout, or None where one did not exit cleanly or its output was cut."""
    limits = dataclasses.replace(
        limits_from_config(cfg), wall_s=max(cfg.timeout_s, ORACLE_WALL_S), output_bytes=ORACLE_OUTPUT_BYTES
    )

    def run(programs: Sequence[str]) -> list[str | None]:
        results = pool_from_config(cfg).map(list(programs), limits)
        return [r.stdout if r.status == "ok" and r.exit_code == 0 and not r.stdout_truncated else None for r in results]

    return run
