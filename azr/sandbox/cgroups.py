"""Per-worker cgroups: the limits the kernel's per-process rlimits cannot give, where azr may set them (root).

The kernel exempts uid 0 from RLIMIT_NPROC, even mapped into a user namespace, so as root a fork bomb would be
bounded by nothing but the wall clock; and RLIMIT_AS bounds each process, not the sum over a program's processes
and the tmpfs pages it fills. As root, each worker therefore runs in a cgroup of its own with a process cap and a
memory cap, on cgroup v1 or v2, wherever the hierarchy is writable. Elsewhere these are None and the pool warns.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from pathlib import Path

log = logging.getLogger(__name__)

CGROUP_FS = Path("/sys/fs/cgroup")
_LIMIT_FILES = {"pids": "pids.max", "memory": ("memory.limit_in_bytes", "memory.max")}  # v1, v2
_NO_SWAP_FILES = ("memory.memsw.limit_in_bytes", "memory.swap.max")


def _own_paths() -> dict[str, str]:
    """Our cgroup path per v1 controller name, and under '' the v2 (unified) path."""
    paths = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                paths[name] = path
    return paths


def _limit_file(directory: Path, controller: str) -> Path | None:
    names = _LIMIT_FILES[controller]
    for name in (names,) if isinstance(names, str) else names:
        if (directory / name).exists():
            return directory / name
    return None


def discover() -> dict[str, Path]:
    """Writable parents for worker cgroups, per controller ('pids', 'memory'): azr/ under our own cgroups."""
    own = _own_paths()
    roots: dict[str, Path] = {}
    for controller in _LIMIT_FILES:
        candidates = [CGROUP_FS / controller / own.get(controller, "/").lstrip("/")]
        if "" in own:  # cgroup v2: one hierarchy, controllers handed down explicitly
            candidates.append(CGROUP_FS / own[""].lstrip("/"))
        for base in candidates:
            root = base / "azr"
            with contextlib.suppress(OSError):
                root.mkdir(exist_ok=True)
                for parent in (base, root):
                    with contextlib.suppress(OSError):
                        (parent / "cgroup.subtree_control").write_text(f"+{controller}\n")
                probe = root / f"probe-{os.getpid()}-{controller}"
                probe.mkdir(exist_ok=True)
                works = _limit_file(probe, controller) is not None
                probe.rmdir()
                if works:
                    roots[controller] = root
                    _remove_orphans(root)
                    break
    return roots


def _remove_orphans(root: Path) -> None:
    """Empty cgroups of workers whose trainer died by SIGKILL (it could not remove them): named w<pid>-..."""
    for group in root.glob("w*-*"):
        pid = group.name[1:].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):  # still busy, or not ours to remove: leave it
                group.rmdir()


class WorkerCgroups:
    """The cgroups of one worker: joined by its launcher before exec, emptied and removed with the worker."""

    def __init__(self, roots: dict[str, Path], name: str, max_processes: int, max_memory_mb: int | None):
        self.dirs: list[Path] = []
        limits = {"pids": str(max_processes + 8), "memory": str((max_memory_mb or 0) << 20)}  # +8: launchers
        for controller, root in roots.items():
            if controller == "memory" and not max_memory_mb:
                continue
            path = root / name
            try:
                path.mkdir(exist_ok=True)
                self.dirs.append(path)
                _limit_file(path, controller).write_text(limits[controller] + "\n")
            except OSError as exc:
                log.warning("could not set up the %s cgroup %s: %s", controller, path, exc)
                continue
            if controller == "memory":
                for no_swap in _NO_SWAP_FILES:  # where swap is accounted, it must not extend the cap
                    with contextlib.suppress(OSError):
                        (path / no_swap).write_text(limits["memory"] + "\n" if "memsw" in no_swap else "0\n")

    def wrap(self, argv: list[str]) -> list[str]:
        """Join every cgroup before exec, so each descendant of the worker is counted from its first instant."""
        if not self.dirs:
            return argv
        join = 'while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs" || exit 1; shift; done; shift; exec "$@"'
        return ["/bin/sh", "-c", join, "sh", *map(str, self.dirs), "--", *argv]

    def kill_and_remove(self, timeout_s: float = 2.0) -> None:
        """SIGKILL whatever is left in them, then remove them once empty (processes that die of their parent-death
        signal leave a moment after the launcher is reaped: until then rmdir fails with EBUSY)."""
        for path in self.dirs:
            with contextlib.suppress(OSError, ValueError):
                for pid in (path / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        os.kill(int(pid), signal.SIGKILL)
        deadline = time.monotonic() + timeout_s
        for path in self.dirs:
            while True:
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if time.monotonic() > deadline:
                        log.warning("could not remove the cgroup %s: %s", path, exc)
                        break
                time.sleep(0.002)
        self.dirs = []

    def peak_memory_bytes(self) -> int | None:
        """Highest memory use seen by the memory cgroup, where the kernel reports it."""
        for path in self.dirs:
            for name in ("memory.max_usage_in_bytes", "memory.peak"):
                with contextlib.suppress(OSError, ValueError):
                    return int((path / name).read_text())
        return None
