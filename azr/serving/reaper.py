"""Ending a process group, and a reaper that ends one when the process that started it dies, however it dies.

`end_group` is the one teardown: SIGTERM the group, give it `grace_s`, SIGKILL what is left, wait until no member
lives. `Reaper.start(pgid, grace_s)` launches a small process of its own session that holds the read end of a pipe
only its starter writes to; when the starter dies (SIGKILL included) the pipe closes and the reaper runs
`end_group` on the group. `disarm()` ends the reaper without that, for a starter that stops the group itself.

The reaper runs this file as a script (`python -I -S reaper.py PGID GRACE`), so this module uses the standard
library only: no site-packages, no azr package import, nothing that could fail or take seconds to load.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)


def group_members(pgid: int) -> list[int]:
    """Pids of live (non-zombie) processes in process group `pgid`, read from /proc (Linux)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the parenthesised command name: state ppid pgrp ...
        state, _ppid, pgrp = stat.rsplit(")", 1)[1].split()[:3]
        if int(pgrp) == pgid and state != "Z":
            members.append(int(entry.name))
    return members


def end_group(pgid: int, grace_s: float) -> bool:
    """SIGTERM group `pgid`, SIGKILL whatever is left after `grace_s`, return once no member lives. True when some
    member outlived the SIGTERM. A zombie leader (not yet reaped by its parent) keeps the group id from being reused
    while this runs, so the signals cannot reach an unrelated process."""
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    outlived = bool(group_members(pgid))
    _signal_group(pgid, signal.SIGKILL)  # also takes members that outlived their leader
    while group_members(pgid):  # SIGKILL is not instant
        time.sleep(0.05)
    return outlived


@dataclass
class Reaper:
    """A running reaper of one group and the pipe end its starter keeps open while it lives."""

    process: subprocess.Popen
    lifeline: int  # the write end; closing it (or dying) sets the reaper on the group

    @classmethod
    def start(cls, pgid: int, grace_s: float) -> Reaper | None:
        """The reaper of group `pgid`, or None where it cannot start (logged)."""
        read, write = os.pipe()  # not inheritable: the group's processes and other children never hold the write end
        try:
            process = subprocess.Popen(
                [sys.executable, "-I", "-S", str(Path(__file__).resolve()), str(pgid), str(grace_s)],
                stdin=read,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a killpg of the starter's group does not take it
            )
        except OSError as exc:
            log.warning("process group %d: no reaper (%s)", pgid, exc)
            os.close(write)
            return None
        finally:
            os.close(read)
        return cls(process, write)

    def disarm(self) -> None:
        """End the reaper without it touching the group (killed, not by closing the pipe), then close the pipe."""
        self.process.kill()
        self.process.wait()
        os.close(self.lifeline)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group is already empty
        os.killpg(pgid, sig)


def _watch(pgid: int, grace_s: float) -> None:
    """The reaper's life: deaf to the signals a terminal or a group teardown sends, it waits for its stdin to close."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while os.read(0, 64):
        pass
    end_group(pgid, grace_s)


if __name__ == "__main__":
    _watch(int(sys.argv[1]), float(sys.argv[2]))
