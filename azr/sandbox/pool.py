"""The worker pool: long-lived sandbox workers, one program at a time each, with timeouts and respawn.

Each slot holds one worker started inside the backend; `run` sends it a program and waits for the reply past the
wall limit plus a grace period. A worker that dies or stops answering while it runs a program is blamed on that
program (`crashed` / `timeout`, never an infrastructure error a program could use to dodge its score), killed with
its whole process group, and replaced on next use. Workers are spawned from one long-lived thread, because the
kernel's parent-death signal (bwrap --die-with-parent, PR_SET_PDEATHSIG) fires when the spawning *thread* exits.
A pool's directory goes with `close`; one left by a process killed outright (SIGKILL, the OOM killer) is removed by
the next pool started under the same temp directory, which tells it from a live pool's by the lock its owner held.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import queue
import select
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from pathlib import Path

from azr.sandbox import cgroups
from azr.sandbox import worker as fork_server
from azr.sandbox.backends import SCRATCH, Backend
from azr.sandbox.cgroups import WorkerCgroups
from azr.sandbox.limits import ExecResult, Limits
from azr.sandbox.packages import PACKAGES_DIR

log = logging.getLogger(__name__)

REPLY_GRACE_S = 10.0  # beyond the wall limit: the worker's own kill, reap and wipe
START_TIMEOUT_S = 30.0
CANCEL_POLL_S = 0.05  # how often a program's wait looks at its cancel event
_STATUS = {"exited": "ok", "signaled": "crashed", "timeout": "timeout", "memory": "memory", "error": "error"}
_OWNER = ".owner"  # in each pool's directory: locked (flock) by the live pool that owns it


class _Cancelled(Exception):
    """The caller's cancel event was set while its program ran."""


class _WorkerLost(Exception):
    def __init__(self, reason: str, hung: bool):
        super().__init__(reason)
        self.hung = hung


class _Worker:
    """One running worker process and its protocol pipes."""

    def __init__(self, proc: subprocess.Popen, stderr_path: Path, cgroups: WorkerCgroups):
        self.proc, self.stderr_path, self.cgroups = proc, stderr_path, cgroups

    def send(self, obj: dict) -> None:
        body = json.dumps(obj).encode()
        try:
            self.proc.stdin.write(fork_server.HEADER.pack(len(body)) + body)
            self.proc.stdin.flush()
        except (OSError, ValueError) as exc:  # ValueError: the pool closed the pipe under us
            raise _WorkerLost(f"worker gone: {exc}", hung=False) from exc

    def receive(self, timeout_s: float, cancel: threading.Event | None = None) -> dict:
        deadline = time.monotonic() + timeout_s
        header = self._read(fork_server.HEADER.size, deadline, cancel)
        return json.loads(self._read(fork_server.HEADER.unpack(header)[0], deadline, cancel))

    def _read(self, n: int, deadline: float, cancel: threading.Event | None) -> bytes:
        fd, chunks, left = self.proc.stdout.fileno(), [], n
        while left:
            try:
                _readable(fd, deadline, cancel)
                chunk = os.read(fd, min(left, 1 << 20))
            except (OSError, ValueError) as exc:  # e.g. the pool closed under us
                raise _WorkerLost(f"worker gone: {exc}", hung=False) from exc
            if not chunk:
                raise _WorkerLost("worker exited", hung=False)
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def stderr_tail(self) -> str:
        with contextlib.suppress(OSError):
            lines = self.stderr_path.read_text(errors="replace").strip().splitlines()
            return lines[-1][:300] if lines else ""
        return ""

    def kill(self, release: bool = True) -> None:
        """Kill the worker and all it started. `release` also closes its output pipe: only the thread waiting on the
        worker may do that (under a reader, the pipe's descriptor number could go to the next file opened)."""
        if self.proc.returncode is None:  # once reaped, its pid (and process group id) may belong to another
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # the worker's own session, created at spawn: never ours
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.close()
        self.proc.wait()
        if release:
            with contextlib.suppress(OSError, ValueError):
                self.proc.stdout.close()
        self.cgroups.kill_and_remove()  # as root: whatever is still in the worker's cgroups goes with it


def _readable(fd: int, deadline: float, cancel: threading.Event | None) -> None:
    """Return once `fd` can be read; _WorkerLost past `deadline`, _Cancelled once `cancel` is set."""
    while True:
        wait = deadline - time.monotonic()
        if wait <= 0:
            raise _WorkerLost("worker did not answer in time", hung=True)
        if select.select([fd], [], [], wait if cancel is None else min(wait, CANCEL_POLL_S))[0]:
            return
        if cancel is not None and cancel.is_set():
            raise _Cancelled


class SandboxPool:
    """Runs untrusted programs on warm workers. Thread-safe; use as a context manager or call `close()`."""

    def __init__(
        self,
        backend: Backend,
        workers: int | None = None,
        max_processes: int = 64,
        max_memory_mb: int | None = None,
        preload: Mapping[str, str] | None = None,
        label: str = "",
    ):
        """`preload`: modules (name -> source) each worker runs once at its start, so that every program finds them
        imported. The caller's own code only: it runs in the worker, outside the per-program limits. `label` names the
        pool's directory (`azr-sandbox-LABEL-*`)."""
        self.backend = backend
        self.size = workers or os.cpu_count() or 1
        self.max_processes, self.max_memory_mb = max_processes, max_memory_mb
        self.preload = dict(preload or {})
        self.stats: Counter[str] = Counter()
        self._idle: queue.SimpleQueue[_Worker | None] = queue.SimpleQueue()
        for _ in range(self.size):
            self._idle.put(None)  # started on first use
        self._live: set[_Worker] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._warned_seccomp = False
        self._home = Path(tempfile.mkdtemp(prefix=f"azr-sandbox-{label}-" if label else "azr-sandbox-"))
        self._owner = _claim(self._home)
        self._packages_path = PACKAGES_DIR if backend.namespaced else str(self._home / "packages")
        if backend.packages and not backend.namespaced:  # no mounts here: a directory of links to what is offered
            os.mkdir(self._packages_path)
            for path, name in backend.packages:
                os.symlink(path, os.path.join(self._packages_path, name))
        _sweep(self._home.parent)
        self._spawner = ThreadPoolExecutor(1, thread_name_prefix="azr-sandbox-spawn")
        self._dispatch = ThreadPoolExecutor(self.size, thread_name_prefix="azr-sandbox")
        self._cgroups = cgroups.discover() if os.geteuid() == 0 else {}
        if backend.warning:
            log.warning("%s", backend.warning)
        if os.geteuid() == 0 and "pids" not in self._cgroups:
            log.warning(
                "running as root without a writable pids cgroup: the kernel does not enforce process limits for "
                "root, so workers poll their process count%s",
                "" if backend.namespaced else " (not possible on the 'process' backend: fork bombs are unbounded)",
            )

    @property
    def isolation(self) -> str:
        return "namespaces" if self.backend.namespaced else "none"

    def metrics(self) -> Mapping[str, float]:
        return {}

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run(
        self,
        code: str,
        limits: Limits | None = None,
        *,
        stdin: str | None = None,
        files: Mapping[str, str] | None = None,
        fetch: Sequence[str] = (),
        cancel: threading.Event | None = None,
    ) -> ExecResult:
        """Run one program; the result's status says what happened, it never raises for the program's sake. Once
        `cancel` is set the program is stopped, its worker killed with it (the next run starts a fresh one)."""
        limits = limits or Limits()
        request = program_request(code, limits, stdin, files, fetch)
        if self._closed:
            raise RuntimeError("the sandbox pool is closed")
        worker = self._idle.get()
        if cancel is not None and cancel.is_set():  # gone while it waited for a worker: never started
            self._idle.put(worker)
            return self._cancelled()
        self.stats["runs"] += 1
        kept = None  # what goes back to the idle queue, whatever happens here: this worker, or None for a new one
        try:
            if worker is None:
                try:
                    worker = self._start()
                except OSError as exc:
                    self.stats["errors"] += 1
                    return ExecResult("error", backend=self.backend.name, note=f"sandbox worker did not start: {exc}")
            try:
                worker.send(request)
                reply = worker.receive(limits.wall_s + REPLY_GRACE_S, cancel)
            except _Cancelled:
                return self._cancelled()
            except _WorkerLost as exc:
                self.stats["workers_lost"] += 1
                status = "timeout" if exc.hung else "crashed"
                note = f"the sandbox worker {'stopped answering' if exc.hung else 'died'} while running this program"
                return ExecResult(status, backend=self.backend.name, note=note, duration_s=limits.wall_s)
            if reply.get("status") == "error":
                self.stats["errors"] += 1
            elif not (reply.get("recycle") or self._closed):  # closed meanwhile: release it
                kept = worker
            return reply_result(reply, self.backend.name)
        finally:
            if worker is not None and kept is None:
                self._discard(worker)
            self._idle.put(kept)

    def _cancelled(self) -> ExecResult:
        self.stats["cancelled"] += 1
        return ExecResult("error", backend=self.backend.name, note="cancelled: its caller went away")

    def map(self, codes: Sequence[str], limits: Limits | Sequence[Limits] | None = None) -> list[ExecResult]:
        """Run programs in parallel over the pool's workers, results in input order. A program the pool could not
        run because it was closed meanwhile gets an `error` result."""
        per_program = [limits] * len(codes) if limits is None or isinstance(limits, Limits) else list(limits)
        return list(self.imap(zip(codes, per_program, strict=True)))

    def imap(self, jobs: Iterable[tuple[str, Limits | None]]) -> Iterator[ExecResult]:
        """`map` for (code, limits) pairs that may still be in the making: each is queued as soon as `jobs` yields
        it, so workers run the first programs while the caller builds the rest; results come in input order, each
        as soon as it and those before it are done."""
        futures: list[Future | None] = []
        for code, limits in jobs:
            try:
                futures.append(self._dispatch.submit(self.run, code, limits))
            except RuntimeError:  # the dispatcher was shut down by close()
                futures.append(None)
        for future in futures:
            try:
                if future is None:
                    raise RuntimeError("closed")
                yield future.result()
            except (CancelledError, RuntimeError):
                yield ExecResult("error", backend=self.backend.name, note="the sandbox pool was closed")

    def start(self) -> None:
        """Start every worker now, in the background, rather than on first use; returns at once. A worker that
        fails to start here is retried on first use, where its error is reported."""

        def start_one() -> None:
            worker = self._idle.get()
            try:
                if worker is None and not self._closed:
                    with contextlib.suppress(OSError):
                        worker = self._start()
            finally:
                self._idle.put(worker)

        for _ in range(self.size):
            with contextlib.suppress(RuntimeError):  # closed meanwhile
                self._dispatch.submit(start_one)

    def close(self) -> None:
        """Kill every worker (and so every program) and remove the pool's files."""
        if self._closed:
            return
        self._closed = True
        self._dispatch.shutdown(wait=False, cancel_futures=True)
        idle = []
        with contextlib.suppress(queue.Empty):
            while True:
                idle.append(self._idle.get_nowait())
        with self._lock:
            live, self._live = list(self._live), set()
        for worker in live:
            worker.kill(release=worker in idle)  # a busy worker's caller sees it die and releases it
        for _ in range(self.size):
            self._idle.put(None)  # wake any caller still waiting for a worker: it gets an error result
        self._spawner.shutdown(wait=True)
        _remove_tree(self._home)
        os.close(self._owner)

    def _start(self) -> _Worker:
        if self._closed:
            raise OSError("pool closed")
        index = self.stats["spawns"] = self.stats["spawns"] + 1
        scratch = SCRATCH if self.backend.namespaced else tempfile.mkdtemp(prefix="scratch-", dir=self._home)
        settings = {
            "scratch": scratch,
            "env": self.backend.env,
            "host_pidns": fork_server.pid_namespace(),
            "die_with_parent": not self.backend.namespaced,  # bwrap and nsjail do this themselves
            "parent_pid": os.getpid(),
            # Root without a pids cgroup: RLIMIT_NPROC does not bind, so the worker polls the process count.
            "process_guard": self.max_processes + 2 if "pids" not in self._cgroups and os.geteuid() == 0 else None,
            "preload": self.preload,
            "path": [self._packages_path] if self.backend.packages else [],  # offered packages, on sys.path
        }
        argv = self.backend.command(json.dumps(settings))
        # Named after this pool's own directory: two pools in one process must never share a cgroup (and its limit).
        name = f"w{os.getpid()}-{self._home.name.removeprefix('azr-sandbox-')}-{index}"
        groups = cgroups.WorkerCgroups(self._cgroups, name, self.max_processes, self.max_memory_mb)
        argv = groups.wrap(argv)
        stderr_path = self._home / f"worker-{index}.stderr"
        with open(stderr_path, "wb") as stderr:
            proc = self._spawner.submit(
                subprocess.Popen,
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env={"PATH": os.defpath},  # the caller's environment (API keys) never reaches a worker
                cwd=self._home,
                start_new_session=True,
            ).result()
        worker = _Worker(proc, stderr_path, groups)
        with self._lock:
            self._live.add(worker)
        try:
            hello = worker.receive(START_TIMEOUT_S)
        except (_WorkerLost, ValueError) as exc:
            self._discard(worker)
            raise OSError(f"{self.backend.name}: {worker.stderr_tail() or exc}") from None
        if not hello.get("ready"):
            self._discard(worker)
            raise OSError(f"{self.backend.name}: unexpected greeting {hello!r}")
        if hello.get("seccomp") and not self._warned_seccomp:
            self._warned_seccomp = True
            log.warning("sandbox: %s: programs may leave keyring keys for later ones", hello["seccomp"])
        return worker

    def _discard(self, worker: _Worker) -> None:
        """Kill `worker` and forget it; its slot goes back to the idle queue (as None) by whoever took it."""
        worker.kill()
        with self._lock:
            self._live.discard(worker)


def reply_result(reply: dict, backend: str) -> ExecResult:
    """A worker's reply as an `ExecResult` (the envelope's too: it carries the same reply)."""
    return ExecResult(
        status=_STATUS.get(reply.get("status"), "error"),
        exit_code=reply.get("exit_code"),
        signal=reply.get("signal"),
        stdout=reply.get("stdout", ""),
        stderr=reply.get("stderr", ""),
        stdout_truncated=bool(reply.get("stdout_truncated")),
        stderr_truncated=bool(reply.get("stderr_truncated")),
        report=reply.get("report", ""),
        report_truncated=bool(reply.get("report_truncated")),
        duration_s=float(reply.get("duration_s", 0.0)),
        backend=backend,
        note=reply.get("note", ""),
        files=dict(reply.get("files") or {}),
    )


def program_request(
    code: str, limits: Limits, stdin: str | None, files: Mapping[str, str] | None, fetch: Sequence[str]
) -> dict:
    """What a worker is sent for one program (the envelope's request too): only the parts a run has, so that the
    common run (no stdin, files or fetch) carries nothing more than its code and limits."""
    request: dict = {"code": code, "limits": limits.to_wire()}
    if stdin:
        request["stdin"] = stdin
    if files:
        request["files"] = sorted(files.items())
    if fetch:
        request["fetch"] = list(fetch)
    return request


def _claim(home: Path) -> int:
    """Hold a lock on `home/.owner` for the pool's life. The kernel drops it when the process ends, however it ends
    (and across pid namespaces), so an unlocked owner file means a dead pool. Locked before it gets its name, so
    that a sweeper never sees a live pool's file unlocked."""
    fd, tmp = tempfile.mkstemp(dir=home)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.rename(tmp, home / _OWNER)
    return fd


def _sweep(parent: Path) -> None:
    """Remove the directories, under `parent`, of this user's pools whose process died without closing them."""
    for home in parent.glob("azr-sandbox-*"):
        try:
            if home.is_symlink() or home.lstat().st_uid != os.geteuid():
                continue
            fd = os.open(home / _OWNER, os.O_RDONLY)
        except OSError:  # gone, or made by an azr without owner files: left alone
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # its pool is alive
            continue
        finally:
            os.close(fd)
        log.info("sandbox: removing %s, left by a pool whose process was killed", home)
        _remove_tree(home)


def _remove_tree(path: Path) -> None:
    """Remove the pool's files, whatever a program left in a scratch directory (the `process` backend): trees deeper
    than PATH_MAX (where the worker's own wipe gives up and it is replaced) and directories without permissions.
    chmod and rm walk relative to open directories, so depth is no limit; neither follows symbolic links. Run as
    child processes: the trainer itself must never change its working directory to walk such a tree."""
    for argv in (["chmod", "-R", "u+rwx", "--", str(path)], ["rm", "-rf", "--", str(path)]):
        with contextlib.suppress(OSError):
            subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with contextlib.suppress(OSError):
        fork_server.remove_tree(str(path))  # where chmod or rm is missing
