"""Limits for one untrusted program, and the record of how it ended."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

ExecStatus = Literal["ok", "timeout", "memory", "crashed", "error"]


@dataclass(frozen=True)
class Limits:
    """Per-program limits, enforced in the forked child (rlimits) and by its worker (wall clock)."""

    wall_s: float = 5.0
    cpu_s: float | None = None  # None: the wall limit
    memory_mb: int = 512  # address space (RLIMIT_AS)
    file_size_mb: int = 16  # largest file the program may write, its captured output included
    open_files: int = 64
    processes: int = 32  # RLIMIT_NPROC (plus a pids cgroup when azr runs as root)
    output_bytes: int = 64 * 1024  # stdout and stderr are each cut here and marked truncated
    report_bytes: int = 1 << 20  # the report channel (descriptor 3), used by grading for test verdicts
    fetch_bytes: int = 16 << 20  # files asked back after the run, all together; those past it are left out

    def __post_init__(self):
        """Each limit checked as the type it is: seconds a finite positive number, the rest positive integers (a
        float count or size would pass here and fail in `to_wire`, with a worker already taken)."""
        for name in ("wall_s", "cpu_s"):
            value = getattr(self, name)
            if name == "cpu_s" and value is None:
                continue
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not (number and 0 < _seconds(value) < math.inf):
                raise ValueError(f"Limits.{name} must be a finite positive number, got {value!r:.80}")
        sizes = ("memory_mb", "file_size_mb", "open_files", "processes", "output_bytes", "report_bytes", "fetch_bytes")
        for name in sizes:
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
                raise ValueError(f"Limits.{name} must be a positive integer, got {value!r:.80}")

    def to_wire(self) -> dict:
        """What the worker needs: the wall limit and output caps it enforces, and the (resource, soft, hard) rlimits
        the child sets on itself, worked out here so that the child does no arithmetic of its own."""
        cpu = max(1, math.ceil(self.cpu_s or self.wall_s))
        memory, file_size = self.memory_mb << 20, self.file_size_mb << 20
        rlimits = [
            ("RLIMIT_CORE", 0, 0),
            ("RLIMIT_CPU", cpu, cpu + 1),  # the soft limit sends SIGXCPU (a timeout), the hard one SIGKILL
            ("RLIMIT_AS", memory, memory),
            ("RLIMIT_FSIZE", file_size, file_size),
            ("RLIMIT_NOFILE", self.open_files, self.open_files),
            ("RLIMIT_NPROC", self.processes, self.processes),
        ]
        caps = {"wall_s": self.wall_s, "output_bytes": self.output_bytes, "report_bytes": self.report_bytes}
        caps["fetch_bytes"] = self.fetch_bytes
        return {**caps, "rlimits": rlimits}


def _seconds(value: float) -> float:
    try:
        return float(value)
    except OverflowError:  # an integer past any float
        return math.inf


@dataclass
class ExecResult:
    """How one program ended. `status` is `ok` when it exited by itself (whatever its exit code), `timeout`
    (wall or CPU limit), `memory` (MemoryError under the address-space limit), `crashed` (killed by a signal, or
    it took its worker down with it) or `error` (the sandbox itself failed: an infrastructure fault). `files` holds
    the files a run asked back (name -> base64 content), those that existed and fit."""

    status: ExecStatus
    exit_code: int | None = None
    signal: int | None = None
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    report: str = ""
    report_truncated: bool = False
    duration_s: float = 0.0
    backend: str = ""
    note: str = ""
    files: dict[str, str] = field(default_factory=dict)
