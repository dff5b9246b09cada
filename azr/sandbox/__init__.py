"""Sandbox: run one untrusted program under limits and report how it ended. Knows nothing of tests or rewards.

Covered (bwrap and nsjail backends; tests/sandbox/test_hostile.py proves each): no network, the host's loopback
included (the sandbox's own, where `localhost` resolves, reaches nothing else); read-only system directories and
nothing else of the host (no home, repository, /etc but a hosts file of azr's, or host /tmp); private tmpfs /tmp
and /mnt wiped after every program; an environment built from fixed values, so no API key is ever visible; new
pid/user/ipc/uts/mount namespaces, so the caller's processes are invisible and cannot be signalled; per program a
new session and rlimits on CPU, address space, file size, open files and processes (plus, as root, where the
kernel ignores RLIMIT_NPROC, per-worker pids and memory cgroups, or a polled process count where cgroups are
read-only); a wall clock enforced from outside the program; output caps; every leftover process killed before the
next program starts; nothing left for the next program (scratch files, /dev/shm, System V IPC and POSIX message
queues wiped; keyring calls refused by a seccomp filter, SPEC_FUNCTIONS.md section 4).

Not covered: kernel exploits and side channels; a program may kill or stop its own worker (the pool blames the
program and replaces the worker); without root (no memory cgroup) memory is bounded per process and per tmpfs,
not per program. The `process` backend
(for hosts without user namespaces) keeps only the per-program limits, session and environment: its programs can
read the host's files, reach the network and signal the caller's processes, and a descendant that starts its own
session outlives a caller killed with SIGKILL. It is used only when chosen or when
nothing else works, with a warning.

What callers rely on is the `ExecutionProvider` interface (`azr/sandbox/provider.py`), opened by `open_provider`
from the recipe's `sandbox:` section: `SandboxPool` here, or `RemoteProvider` (`remote.py`) on sandbox servers
(`azr sandbox serve`, `server.py`, or SandboxFusion), whose guarantees are the servers' own.
"""

from __future__ import annotations

import atexit
import hashlib
import inspect
import os
import threading
from collections.abc import Mapping

from azr.config import SandboxConfig
from azr.sandbox.backends import Backend, SandboxUnavailable, SandboxUnhealthy, build_backend, resolve_backend
from azr.sandbox.doctor import Check, namespace_hints, run_doctor
from azr.sandbox.limits import ExecResult, ExecStatus, Limits
from azr.sandbox.pool import SandboxPool
from azr.sandbox.provider import ExecutionProvider
from azr.sandbox.remote import RemoteProvider
from azr.sandbox.server import LOOPBACK, ServeLimits, serve

__all__ = [
    "LOOPBACK",
    "Backend",
    "Check",
    "ExecResult",
    "ExecStatus",
    "ExecutionProvider",
    "Limits",
    "RemoteProvider",
    "SandboxPool",
    "SandboxUnavailable",
    "SandboxUnhealthy",
    "ServeLimits",
    "build_backend",
    "namespace_hints",
    "open_pool",
    "open_provider",
    "resolve_backend",
    "run_doctor",
    "run_untrusted",
    "serve",
    "shared_pool",
]

_shared: dict[tuple, SandboxPool] = {}
_shared_remote: dict[tuple, RemoteProvider] = {}
_shared_lock = threading.Lock()


def open_pool(
    backend: str = "auto",
    workers: int | None = None,
    tmp_size_mb: int = 256,
    max_processes: int = 64,
    max_memory_mb: int | None = None,
    preload: Mapping[str, str] | None = None,
    label: str = "",
    packages: tuple[str, ...] = (),
) -> SandboxPool:
    """A new pool on `backend` (auto: the strongest that works here); the caller closes it. `max_memory_mb` caps
    each worker's memory (all of a program's processes and tmpfs pages) where a memory cgroup can be set (root);
    `preload` names modules (name -> source, the caller's own code) every worker imports once, at its start; `label`
    names the pool's directory (`azr-sandbox-LABEL-*`), e.g. after the training rank that owns it; `packages`
    names installed packages programs may import (bound read-only with what they require; none by default)."""
    return SandboxPool(
        resolve_backend(backend, tmp_size_mb, tuple(packages)), workers, max_processes, max_memory_mb, preload, label
    )


def shared_pool(*settings) -> SandboxPool:
    """One pool per `open_pool` settings (positional, in its order) for the whole process, closed at exit: what
    rewards and grading use by default."""
    bound = inspect.signature(open_pool).bind(*settings)
    bound.apply_defaults()  # shared_pool() and shared_pool("auto") are the same pool
    key = tuple(tuple(sorted(v.items())) if isinstance(v, Mapping) else v for v in bound.arguments.values())
    with _shared_lock:
        pool = _shared.get(key)
        if pool is None or pool._closed:
            pool = _shared[key] = open_pool(*settings)
        return pool


def open_provider(
    cfg: SandboxConfig, preload: Mapping[str, str] | None = None, label: str = "", memory_mb: int | None = None
) -> ExecutionProvider:
    """The process-wide provider for these `sandbox:` settings (closed at exit): the local pool (`shared_pool`) or,
    with `provider: remote`, the servers of `sandbox.remote`. `preload` names the caller's modules workers import
    once; `label` names a local pool's directory; `memory_mb` caps each local worker (a memory cgroup, as root)."""
    if cfg.provider == "remote":
        # The token's digest too: a changed variable (a rotated token) gets a provider that sends the new one.
        token = os.environ.get(cfg.remote.token_env or "", "")
        key = (repr(cfg.remote), hashlib.sha256(token.encode()).hexdigest(), tuple(sorted((preload or {}).items())))
        with _shared_lock:
            provider = _shared_remote.get(key)
            if provider is None or provider._closed:
                provider = _shared_remote[key] = RemoteProvider(cfg.remote, preload)
            return provider
    settings = (cfg.backend, cfg.workers, cfg.tmp_size_mb, cfg.processes, memory_mb, preload or {}, label)
    return shared_pool(*settings, tuple(cfg.packages))


def run_untrusted(code: str, limits: Limits | None = None, pool: ExecutionProvider | None = None) -> ExecResult:
    """Run Python source `code` in the sandbox as `__main__`; descriptor 3 is a report channel read back as
    `ExecResult.report`. Never raises for anything the program does."""
    return (pool or shared_pool()).run(code, limits)


@atexit.register
def _close_shared() -> None:
    for provider in [*_shared.values(), *_shared_remote.values()]:
        provider.close()
