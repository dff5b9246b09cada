"""Launch, health-check and tear down a vLLM OpenAI-compatible server as a subprocess.

vLLM is never imported here: the server runs under its own interpreter (often a separate venv, `vllm.python`) as
`python -m vllm.entrypoints.openai.api_server`, in a new session, so teardown signals the server's process group and
never the caller's. Owns the argv/env (pure, unit-testable), port choice, readiness polling and the server's log
file; it knows nothing of training, clients or what the server is asked.

A caller killed outright (SIGKILL) still takes its server with it, twice over: Linux SIGTERMs the server when the
thread that started it dies (the parent-death signal), and a reaper (`azr.serving.reaper`: a small process of its
own session, holding the read end of a pipe only the caller writes to) sees the pipe close, SIGTERMs the server's
group and SIGKILLs what is left after `stop_timeout_s`. vLLM's API server needs the second: SIGTERMed with requests
in flight, it stops its engine first and then waits forever for those requests' handlers (2026-12, vllm-cpu 0.32).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from azr.errors import ConfigError
from azr.serving.reaper import Reaper, end_group

if TYPE_CHECKING:
    from azr.config import VllmConfig

log = logging.getLogger(__name__)

ENTRYPOINT = "vllm.entrypoints.openai.api_server"
# Telemetry off; unbuffered so the log file shows the last words of a server that dies.
DEFAULT_ENV = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "PYTHONUNBUFFERED": "1"}
INSTALL_HINT = "install vLLM into that interpreter (CPU: python scripts/vllm_cpu_env.py; GPU: pip install 'azr[gpu]')"
# Local requests must not go through an http_proxy from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class VllmServerError(RuntimeError):
    """The server could not be started or did not become ready; the message ends with its log's last lines."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS reports free now; another process may still take it before the server binds (then the server
    exits early and `start` says so)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass
class VllmServer:
    """One vLLM server process group. Use as a context manager, or call `start()` and `stop()`.

    `base_url` (`http://HOST:PORT/v1`) and `model_name` (the id the server reports) are valid once started.
    `starts` counts its launches (`restart` after a death adds one); any thread may start or restart it: the
    process is launched from a keeper thread of its own, which lives until `stop`, and Linux tells the server to
    stop when that thread dies (with the caller, however it dies).
    """

    model: str
    python: str = field(default_factory=lambda: sys.executable)
    host: str = "127.0.0.1"
    port: int = 0  # 0: pick a free port at start
    served_model_name: str | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None  # on vLLM's CPU backend this is a fraction of RAM
    tensor_parallel_size: int = 1
    extra_args: Sequence[str] = ()
    command: Sequence[str] | None = None  # a whole command line instead of the OpenAI entrypoint's (TRL's server)
    env: Mapping[str, str] = field(default_factory=dict, repr=False)  # on top of the caller's environment
    log_path: Path | None = None  # default: a temp file, kept after stop for diagnosis
    startup_timeout_s: float = 600.0
    stop_timeout_s: float = 30.0
    model_name: str | None = field(default=None, init=False)
    starts: int = field(default=0, init=False)
    _proc: subprocess.Popen | None = field(default=None, init=False, repr=False)
    _release: threading.Event | None = field(default=None, init=False, repr=False)
    _reaper: Reaper | None = field(default=None, init=False, repr=False)

    @classmethod
    def from_config(cls, cfg: VllmConfig, model: str, **overrides) -> VllmServer:
        """A server for `model` from the `vllm:` config section; keyword overrides win (log_path, ...), except
        `env`, which is added to the section's."""
        env = dict(cfg.env)
        if cfg.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, cfg.gpus))
        env.update(overrides.pop("env", {}))
        fields = dict(
            model=model,
            python=cfg.python or sys.executable,
            port=cfg.port,
            max_model_len=cfg.max_model_len,
            gpu_memory_utilization=cfg.gpu_memory_utilization,
            tensor_parallel_size=cfg.tensor_parallel_size,
            extra_args=tuple(cfg.extra_args),
            env=env,
            startup_timeout_s=cfg.startup_timeout_s,
        )
        return cls(**{**fields, **overrides})

    # --- pure parts -------------------------------------------------------------------------------------------

    def argv(self) -> list[str]:
        """The command line; the port must be chosen (non-zero) by then."""
        if self.command is not None:
            return [str(a) for a in self.command]
        args = [self.python, "-m", ENTRYPOINT, "--model", str(self.model)]
        args += ["--host", self.host, "--port", str(self.port)]
        if self.served_model_name:
            args += ["--served-model-name", self.served_model_name]
        if self.max_model_len:
            args += ["--max-model-len", str(self.max_model_len)]
        if self.gpu_memory_utilization is not None:
            args += ["--gpu-memory-utilization", str(self.gpu_memory_utilization)]
        if self.tensor_parallel_size != 1:
            args += ["--tensor-parallel-size", str(self.tensor_parallel_size)]
        return args + [str(a) for a in self.extra_args]

    def environ(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The server's environment: `base` (default: ours), then telemetry defaults it lacks, then `self.env`."""
        env = dict(os.environ if base is None else base)
        for key, value in DEFAULT_ENV.items():
            env.setdefault(key, value)
        env.update(self.env)
        return env

    @property
    def url(self) -> str:
        # A server bound to every interface is reached through loopback.
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(self.host, self.host)
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    # --- lifecycle --------------------------------------------------------------------------------------------

    def start(self) -> VllmServer:
        """Launch the server and wait until `/health` and `/v1/models` answer; raise VllmServerError otherwise."""
        if self._proc is not None:
            raise VllmServerError("this VllmServer is already started")
        if not Path(self.python).is_file():
            raise ConfigError(f"vllm.python: {self.python} does not exist")
        if self.port == 0:
            self.port = free_port(self.host)
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix=f"azr-vllm-{self.port}-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        self.log_path = Path(self.log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        self._proc = self._launch()
        self.starts += 1
        log.info("vLLM server pid %d starting on %s (log: %s)", self._proc.pid, self.url, self.log_path)
        try:
            self._wait_ready(started + self.startup_timeout_s)
        except BaseException:
            self.stop()
            raise
        log.info("vLLM server ready in %.1fs serving %s", time.monotonic() - started, self.model_name)
        return self

    def _launch(self) -> subprocess.Popen:
        """The server's process, started from a keeper thread that waits until `stop` releases it: the parent-death
        signal is tied to the thread that forks, so a server started from a short-lived thread (a producer's, a
        request's) would otherwise be stopped when that thread ends."""
        launched: list[subprocess.Popen | BaseException] = []
        ready, release = threading.Event(), threading.Event()

        def keep() -> None:
            try:
                with open(self.log_path, "ab") as log_file:
                    # start_new_session: the server and everything it forks form their own process group, which
                    # stop() kills whole; the caller's group (a trainer, pytest) is never signalled.
                    launched.append(
                        subprocess.Popen(
                            self.argv(),
                            stdin=subprocess.DEVNULL,
                            stdout=log_file,
                            stderr=subprocess.STDOUT,
                            env=self.environ(),
                            start_new_session=True,
                            preexec_fn=_die_with_caller(),
                        )
                    )
            except BaseException as exc:  # handed to the caller below
                launched.append(exc)
            finally:
                ready.set()
            release.wait()

        threading.Thread(target=keep, name=f"vllm-server-{self.port}", daemon=True).start()
        ready.wait()
        if isinstance(launched[0], BaseException):
            raise launched[0]
        self._release = release
        self._reaper = Reaper.start(launched[0].pid, self.stop_timeout_s)
        return launched[0]

    def restart(self) -> VllmServer:
        """Start the server again after it ended (or stop it first): same command, port and log file (appended),
        ready as `start` leaves it; the caller reloads whatever it had loaded (adapters)."""
        self.stop()
        return self.start()

    def exit_code(self) -> int | None:
        """The server's exit status (or killing signal) once it has ended; None while it runs or before start."""
        return None if self._proc is None else _exit_status(self._proc.pid)

    def healthy(self, tries: int = 3) -> bool:
        """Whether the server runs and its `/health` answers (one of `tries`, a second apart): vLLM's API server
        outlives a dead engine for a while, answering 500 to every request and not ok to `/health`."""
        for attempt in range(tries):
            if self.exit_code() is not None:
                return False
            with contextlib.suppress(OSError, ValueError):
                if self._get("/health") is not None:
                    return True
            if attempt + 1 < tries:
                time.sleep(1.0)
        return False

    def check_alive(self) -> None:
        """Raise VllmServerError, with the log's last lines, if the server has ended."""
        code = self.exit_code()
        if code is not None:
            raise VllmServerError(f"vLLM server (pid {self.pid}) exited with code {code} during the run" + self._tail())

    def _wait_ready(self, deadline: float) -> None:
        healthy = False
        while True:
            code = _exit_status(self._proc.pid)
            if code is not None:
                hint = f"; {INSTALL_HINT}" if "No module named 'vllm" in self.log_tail() else ""
                raise VllmServerError(f"vLLM server exited with code {code} before it was ready{hint}" + self._tail())
            try:
                if not healthy:
                    healthy = self._get("/health") is not None
                if healthy:
                    models = json.loads(self._get("/v1/models") or b"{}").get("data") or []
                    if models:
                        self.model_name = models[0]["id"]
                        return
            except (OSError, ValueError, KeyError):
                pass  # not listening yet, or answering half-started
            if time.monotonic() > deadline:
                raise VllmServerError(
                    f"vLLM server not ready after {self.startup_timeout_s:.0f}s (vllm.startup_timeout_s)" + self._tail()
                )
            time.sleep(0.5)

    def _get(self, path: str) -> bytes | None:
        try:
            with _OPENER.open(self.url + path, timeout=5) as resp:
                return resp.read() if resp.status == 200 else None
        except urllib.error.HTTPError:
            return None

    def stop(self) -> int | None:
        """SIGTERM the server's process group, SIGKILL whatever is left after `stop_timeout_s`; idempotent.

        Returns the server's exit code (None if it was never started).
        """
        proc, self._proc = self._proc, None
        release, self._release = self._release, None
        if proc is None:
            return None
        reaper, self._reaper = self._reaper, None
        if reaper is not None:
            reaper.disarm()  # first: it must not signal a group id that this stop frees
        pgid = proc.pid  # leader of its own session, so its pid is the group id
        if pgid == os.getpgrp():  # cannot happen with start_new_session; checked because the cost of error is us
            raise VllmServerError("refusing to signal the caller's own process group")
        # The leader is reaped only at the end (start() checks it with WNOWAIT): until then its zombie keeps the
        # group id from being reused, so these signals cannot reach an unrelated process.
        if end_group(pgid, self.stop_timeout_s):
            log.warning("vLLM server group %d outlived SIGTERM by %.0fs; killed it", pgid, self.stop_timeout_s)
        code = proc.wait()
        if release is not None:
            release.set()  # the keeper thread ends; its parent-death signal has no process left to reach
        log.info("vLLM server pid %d stopped (exit %s)", pgid, code)
        return code

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace") if self.log_path else ""
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _tail(self) -> str:
        return f"; log {self.log_path}, last lines:\n{self.log_tail()}"

    def __enter__(self) -> VllmServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _die_with_caller():
    """A preexec_fn asking Linux to SIGTERM the server when the thread that started it dies, so a trainer killed
    by SIGKILL does not leave a server holding the GPU (vLLM then stops its own workers). None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl, pr_set_pdeathsig, sigterm = ctypes.CDLL(None, use_errno=True).prctl, 1, int(signal.SIGTERM)

    def hook() -> None:  # runs between fork and exec: one libc call, resolved beforehand, takes no lock
        prctl(pr_set_pdeathsig, sigterm)

    return hook


def _exit_status(pid: int) -> int | None:
    """The child's exit status (or killing signal) if it has ended, without reaping it."""
    info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    return None if info is None else info.si_status
