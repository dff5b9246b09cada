"""Processes seen from /proc, for the tests that kill a run and check that nothing it started outlives it."""

from __future__ import annotations

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
