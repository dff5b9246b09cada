"""Sandbox self-test: run one small hostile program per isolation guarantee and say which hold on this host.

Used by `azr sandbox doctor`. Each check is a real run through the pool, judged from the outside (the caller
plants a canary secret, a listener, a file in its home and temp dir, and looks for them from inside). Where no
namespace backend works, `namespace_hints` says what the host or the container must allow.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from azr.sandbox.limits import ExecResult, Limits
from azr.sandbox.provider import ExecutionProvider

CANARY_ENV = "AZR_DOCTOR_CANARY_KEY"


@dataclass(frozen=True)
class Check:
    guarantee: str
    ok: bool
    detail: str


@contextlib.contextmanager
def _planted() -> Iterator[dict[str, str]]:
    """A listener on host loopback, a fake key in our environment, and marker files in the host's temp dir, home
    and working directory (removed afterwards; a place we cannot write to is reported as not checked)."""
    import socket  # here: the doctor is the sandbox's only user of sockets, and commands import this module

    secret = "sk-doctor-" + os.urandom(8).hex()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    old = os.environ.get(CANARY_ENV)
    os.environ[CANARY_ENV] = secret
    plant = {"secret": secret, "port": str(listener.getsockname()[1])}
    with contextlib.ExitStack() as stack:
        for place, where in (("tmp", tempfile.gettempdir()), ("home", str(Path.home())), ("cwd", os.getcwd())):
            with contextlib.suppress(OSError):
                marker = stack.enter_context(tempfile.NamedTemporaryFile("w", prefix=".azr-doctor-", dir=where))
                marker.write(secret)
                marker.flush()
                plant[place] = marker.name
        try:
            yield plant
        finally:
            listener.close()
            if old is None:
                os.environ.pop(CANARY_ENV, None)
            else:
                os.environ[CANARY_ENV] = old


def _checks(plant: dict[str, str]) -> list[tuple[str, str, Limits, Callable[[ExecResult], tuple[bool, str]]]]:
    """(guarantee, program, limits, judge) per guarantee; each program prints what it could reach."""
    secret, port = plant["secret"], plant["port"]
    quick = Limits(wall_s=2.0)
    pid = os.getpid()

    def reached(result: ExecResult) -> tuple[bool, str]:
        out = result.stdout.strip()
        return (result.status == "ok" and out == "blocked", out[-120:] or result.status + " " + result.stderr[-120:])

    probe = "try:\n{body}\nexcept Exception as exc:\n    print('blocked')\nelse:\n    print('REACHED')\n"

    def program(body: str) -> str:
        return probe.format(body="\n".join("    " + line for line in body.splitlines()))

    return [
        (
            "no network (host loopback)",
            program(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)"),
            quick,
            reached,
        ),
        *[
            (f"host {label} hidden", program(f"open({plant[place]!r}).read()"), quick, reached)
            for place, label in (("tmp", "temp dir"), ("home", "home"), ("cwd", "working directory"))
            if place in plant
        ],
        ("read-only system dirs", program("open('/usr/azr-doctor-probe', 'w').write('x')"), quick, reached),
        (
            "no secrets in the environment",
            f"import os\nprint('LEAK' if {secret!r} in repr(dict(os.environ)) else 'blocked')",
            quick,
            reached,
        ),
        (
            "caller's processes invisible",
            program(f"import os\nos.kill({pid}, 0)"),
            quick,
            reached,
        ),
        (
            "no new namespaces (user, network)",
            "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "made = [n for n, flag in (('user', 0x10000000), ('network', 0x40000000)) if libc.unshare(flag) == 0]\n"
            "print('made ' + ', '.join(made) if made else 'blocked')",
            quick,
            reached,
        ),
        (
            "wall-clock limit",
            "while True:\n    pass",
            Limits(wall_s=1.0),
            lambda r: (r.status == "timeout", r.status),
        ),
        (
            "wall-clock limit on a stopped program",
            "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)",
            Limits(wall_s=1.0),
            lambda r: (r.status == "timeout", r.status),
        ),
        (
            "wall-clock limit on a traced program",
            "import ctypes, os, signal\nctypes.CDLL(None).ptrace(0, 0, None, None)  # PTRACE_TRACEME\n"
            "os.kill(os.getpid(), signal.SIGSTOP)",
            Limits(wall_s=1.0),
            lambda r: (r.status == "timeout", r.status),
        ),
        (
            "memory limit",
            "x = bytearray(1 << 30)\nprint('allocated')",
            Limits(wall_s=5.0, memory_mb=256),
            lambda r: (r.status in ("memory", "crashed") and "allocated" not in r.stdout, r.status),
        ),
        (
            "output cap",
            "import sys\nsys.stdout.write('x' * (1 << 20))",
            Limits(wall_s=5.0, output_bytes=1024),
            lambda r: (r.stdout_truncated and len(r.stdout) == 1024, f"{len(r.stdout)} bytes kept"),
        ),
        (
            "fork bomb contained",
            "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
            Limits(wall_s=1.0, processes=16),
            lambda r: (r.status in ("timeout", "ok", "crashed"), r.status),
        ),
    ]


def run_doctor(pool: ExecutionProvider) -> list[Check]:
    """Every guarantee of the sandbox, checked live on `pool` (a local pool, or sandbox servers: the markers and the
    listener are planted on this machine); the provider must still serve a program afterwards."""
    results = []
    with _planted() as plant:
        for guarantee, code, limits, judge in _checks(plant):
            ok, detail = judge(pool.run(code, limits))
            results.append(Check(guarantee, ok, detail))
    results += _package_checks(pool)
    after = pool.run("print(6 * 7)", Limits(wall_s=5.0))
    results.append(Check("serves programs after all of the above", after.stdout.strip() == "42", after.status))
    return results


def _package_checks(pool: ExecutionProvider) -> list[Check]:
    """The offered packages import inside; a package of this environment that is not offered does not."""
    backend = getattr(pool, "backend", None)  # a remote provider's offer is the server's: only the rest is checked
    offered = [name for _, name in backend.packages if name.isidentifier()] if backend else []
    hidden = [n for n in ("azr", "click", "yaml") if n not in offered]
    checks = []
    if offered:
        code = "\n".join(f"import {name}" for name in offered) + "\nprint('imported')"
        result = pool.run(code, Limits(wall_s=30.0, memory_mb=1024))
        detail = ", ".join(offered) if result.stdout.strip() == "imported" else result.stderr.strip()[-200:]
        checks.append(Check("offered packages import", result.stdout.strip() == "imported", detail))
    code = "\n".join(f"try:\n    import {n}\n    print({n!r})\nexcept ImportError:\n    pass" for n in hidden)
    result = pool.run(code, Limits(wall_s=10.0))
    seen = result.stdout.split()
    detail = f"visible: {', '.join(seen)}" if seen else f"{', '.join(hidden)} not importable"
    checks.append(Check("nothing else of this environment", result.status == "ok" and not seen, detail))
    return checks


# What a container runtime must allow for bwrap's user, pid and mount namespaces (deploy/Dockerfile runs with these).
CONTAINER_HINT = (
    "in a container: Docker needs --security-opt seccomp=unconfined (its default profile refuses "
    "unshare(CLONE_NEWUSER)), --security-opt systempaths=unconfined (the kernel refuses a fresh /proc while parts of "
    "the container's are masked) and, on AppArmor hosts, --security-opt apparmor=unconfined; Podman: "
    "--security-opt unmask=ALL; Kubernetes: securityContext seccompProfile and appArmorProfile Unconfined, "
    "procMount Unmasked"
)


def namespace_hints(root: Path = Path("/")) -> list[str]:
    """What this host (or container) must change for the namespace backends, from what it shows under `root`: the
    kernel's user-namespace switches and the signs of a container runtime."""
    sysctl = root / "proc" / "sys"
    hints = []
    if _read(sysctl / "user" / "max_user_namespaces") == "0":
        hints.append("user namespaces are off: sysctl -w user.max_user_namespaces=15000")
    if _read(sysctl / "kernel" / "unprivileged_userns_clone") == "0":
        hints.append("unprivileged user namespaces are off: sysctl -w kernel.unprivileged_userns_clone=1")
    if _read(sysctl / "kernel" / "apparmor_restrict_unprivileged_userns") == "1":
        hints.append(
            "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10+): an AppArmor profile allowing userns "
            "for bwrap, or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
        )
    markers = (root / ".dockerenv", root / "run" / ".containerenv")
    if any(m.exists() for m in markers) or "KUBERNETES_SERVICE_HOST" in os.environ:
        hints.append(CONTAINER_HINT)
    return hints


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
