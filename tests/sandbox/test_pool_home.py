"""The pool's directory: named after its label, removed on close, and, when its process was killed outright, removed
by the next pool started under the same temp directory; a live pool's directory is never touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from azr.sandbox import open_pool

HOLD = """
import sys, time
from azr.sandbox import open_pool
pool = open_pool("bwrap", workers=1, label=sys.argv[1])
assert pool.run("print(1)").status == "ok"  # a worker started
print(pool._home, flush=True)
time.sleep(600)
"""


def _hold(label: str, tmp: Path) -> tuple[subprocess.Popen, Path]:
    """A process holding an open pool (one worker started) until it is killed; and the pool's directory."""
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, label], stdout=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    return proc, Path(proc.stdout.readline().strip())


def test_a_killed_pools_directory_is_removed_by_the_next_pool_and_a_live_ones_kept(tmp_path, monkeypatch):
    killed, killed_home = _hold("rank1", tmp_path)
    live, live_home = _hold("rank0", tmp_path)
    try:
        assert killed_home.name.startswith("azr-sandbox-rank1-") and killed_home.parent == tmp_path
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait()
        assert killed_home.is_dir()  # nothing ran to remove it
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        with open_pool("bwrap", workers=1) as pool:
            assert not killed_home.exists()
            assert live_home.is_dir() and (live_home / ".owner").is_file()
            home = pool._home
            assert home.parent == tmp_path and home.name.startswith("azr-sandbox-")
        assert not home.exists()
    finally:
        os.killpg(live.pid, signal.SIGKILL)
        live.wait()
