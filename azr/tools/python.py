"""The `python_run` tool: one program in the sandbox pool, under the `sandbox:` limits, its output read back.

The statuses are the sandbox's, folded into the tool's: a program that ran to its end is `ok` whatever its exit code
(the traceback is the answer the model needs), a wall-clock or CPU limit is `timeout`, memory and crashes are
`error` with the reason, and the sandbox's own failures are `error`. Where the provider states no isolation
(the `process` backend), it refuses unless `tools.python.allow_process_backend` is set.
"""

from __future__ import annotations

import dataclasses

from azr.config import SandboxConfig, ToolsConfig
from azr.rewards import limits_from_config, pool_from_config
from azr.sandbox import ExecResult, ExecutionProvider
from azr.tools.result import ToolResult


class PythonRunner:
    """`run(code)` -> ToolResult; the pool is the run's shared one unless given."""

    def __init__(self, cfg: ToolsConfig, sandbox: SandboxConfig, pool: ExecutionProvider | None = None):
        self.allow_process = cfg.python.allow_process_backend
        self._pool, self._sandbox = pool, sandbox
        limits = limits_from_config(sandbox)
        self.limits = dataclasses.replace(limits, wall_s=cfg.python.timeout_s or limits.wall_s)

    @property
    def pool(self) -> ExecutionProvider:
        if self._pool is None:
            self._pool = pool_from_config(self._sandbox)
        return self._pool

    def run(self, code: str) -> ToolResult:
        isolation = self.pool.isolation
        if isolation == "none" and not self.allow_process:
            return ToolResult(
                "refused",
                "python_run is off: the sandbox runs without isolation (the 'process' backend: no network or "
                "filesystem isolation); set tools.python.allow_process_backend: true to allow it",
                {"isolation": isolation},
            )
        return program_result(self.pool.run(code, self.limits), self.limits.wall_s)


def program_result(result: ExecResult, wall_s: float) -> ToolResult:
    meta = {
        "backend": result.backend,
        "exit_code": result.exit_code,
        "duration_s": round(result.duration_s, 4),
        "output_truncated": result.stdout_truncated or result.stderr_truncated,
    }
    output = _output(result)
    if result.status == "ok":
        return ToolResult("ok", output, meta)
    if result.status == "timeout":
        return ToolResult("timeout", f"the program was stopped after {wall_s:g}s\n{output}".rstrip(), meta)
    why = {
        "memory": "the program ran out of memory",
        "crashed": f"the program was killed{f' by signal {result.signal}' if result.signal else ''}",
        "error": f"the sandbox failed: {result.note or 'unknown error'}",
    }[result.status]
    return ToolResult("error", f"{why}\n{output}".rstrip(), meta)


def _output(result: ExecResult) -> str:
    parts = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n") + ("\n[stdout truncated]" if result.stdout_truncated else ""))
    if result.stderr:
        parts.append("[stderr]\n" + result.stderr.rstrip("\n") + ("\n[truncated]" if result.stderr_truncated else ""))
    if result.status == "ok" and result.exit_code not in (0, None):
        parts.append(f"[exit code {result.exit_code}]")
    if result.status == "ok" and not parts:
        parts.append("(no output)")
    return "\n".join(parts)
