"""Processes seen from /proc, for the tests that kill a run and check that nothing it started outlives it."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def descendants(pid: int) -> set[tuple[int, str]]:
    """(pid, start time) of every live descendant of `pid`, whatever session it is in: the start time tells a
    reused pid apart."""
    parents: dict[int, list[int]] = {}
    starts = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat:
                parents.setdefault(int(stat[1]), []).append(int(entry.name))
                starts[int(entry.name)] = stat[19]
    found, todo = set(), [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.add((child, starts[child]))
            todo.append(child)
    return found


def alive(pid: int, start: str) -> bool:
    """Whether the process `descendants` saw is still running (a zombie runs nothing)."""
    stat = _stat(pid)
    return stat is not None and stat[19] == start and stat[0] != "Z"


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat fields after the command name (state first), or None once the process is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()


def kill_group_when(proc: subprocess.Popen, ready, log: Path, timeout_s: float = 500) -> set[tuple[int, str]]:
    """SIGKILL the process group of `proc` (started with start_new_session=True) once `ready()` holds, and check that
    nothing it started outlives it, whatever session it runs in (sandbox workers, torchrun's ranks). Returns the
    descendants seen just before the kill."""
    try:
        deadline = time.monotonic() + timeout_s
        while not ready():
            assert proc.poll() is None, f"the run ended (exit {proc.returncode}) before the kill:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"not ready after {timeout_s} s:\n{log.read_text()[-3000:]}"
            time.sleep(0.1)
        started = descendants(proc.pid)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 20
    while any(alive(*p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in started if alive(*p)], "processes of the killed run are still running"
    return started


# --------------------------------------------------------------------------------- azr sandbox serve on loopback
ROOT = Path(__file__).resolve().parent.parent
TOKEN_ENV = "AZR_TEST_SANDBOX_TOKEN"
TOKEN = "tok-" + os.urandom(8).hex()


def _die_with_test() -> None:
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: the server goes when the test process goes


def start_server(log: Path, *flags: str, token: bool = True, new_session: bool = False) -> tuple[subprocess.Popen, str]:
    """`azr sandbox serve` on a free loopback port; (process, base URL) once it listens."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), TOKEN_ENV: TOKEN}
    argv = [sys.executable, "-m", "azr.cli", "sandbox", "serve", "--port", "0", "--workers", "2", *flags]
    argv += ["--token-env", TOKEN_ENV] if token else []
    out = open(log, "w")  # noqa: SIM115 - the server writes it for its whole life
    proc = subprocess.Popen(
        argv,
        stdout=out,
        stderr=subprocess.STDOUT,
        env=env,
        preexec_fn=None if new_session else _die_with_test,
        start_new_session=new_session,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = log.read_text()
        if "azr sandbox serve: http://" in text:
            return proc, text.split("azr sandbox serve: ")[1].split()[0]
        assert proc.poll() is None, text
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"the server did not start:\n{log.read_text()}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
