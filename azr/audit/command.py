"""`run_audit`: the linear body of `azr data audit` (read the tasks, audit them, print, write, harden and re-audit),
callable from tests without Click. Printing goes through one `echo` the caller gives (the CLI's click.echo).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from azr.audit.harden import hardened
from azr.audit.output import summary_line, weakest_first, write_audit
from azr.audit.strength import TaskAudit, audit_tasks
from azr.config import SandboxConfig
from azr.data import Task, check_task_limits, load_tasks
from azr.errors import DataError


@dataclass
class AuditRequest:
    """What `azr data audit` was asked to do."""

    source: str
    format: str | None = None
    column_map: Mapping[str, str] = field(default_factory=dict)
    out: Path | None = None
    harden: Path | None = None
    threshold: float = 0.8
    max_mutants: int = 30
    max_generated: int = 30
    table_rows: int = 20


def run_audit(req: AuditRequest, cfg: SandboxConfig, echo: Callable[[str], None], progress: bool = True) -> int:
    """Audit `req.source`; exit code 1 when a probe passed (on the file as given), else 0. DataError before any
    program runs for unreadable data or a hardened file's path that cannot be written."""
    from azr.rewards import limits_from_config, pool_from_config, sandbox_oracle, start_pool

    check_targets(req)
    start_pool(cfg)
    # a format's outputs its file lacks (MBPP+'s plus inputs) come from the reference, run in the sandbox
    tasks = load_tasks(req.source, dict(req.column_map), req.format, oracle=sandbox_oracle(cfg))
    check_task_limits(tasks, cfg.max_task_timeout_s, cfg.max_task_memory_mb, str(req.source))
    if not any(t.solution for t in tasks):
        raise DataError(f"{req.source}: no task has a reference solution: nothing to mutate")
    pool, limits = pool_from_config(cfg), limits_from_config(cfg)
    audits = _audit(tasks, pool, limits, req, progress, "auditing")
    _print(audits, req, echo)
    if req.out is not None:
        jsonl, page = write_audit(audits, req.out, str(req.source), req.threshold)
        echo(f"wrote {jsonl} and {page}")
    if req.harden is not None:
        _harden(tasks, audits, pool, limits, req, echo, progress)
    echo(summary_line(audits))
    return 1 if any(a.probes_passed for a in audits) else 0


def check_targets(req: AuditRequest) -> None:
    """DataError, before any program runs, for an `--out` folder or a `--harden` file that could not be written
    after the audit: not a regular file (or folder), in a folder that cannot be made or written, or the task file
    itself (hardening never overwrites its own input, which is in the data set's format, not azr's)."""
    from azr.logs import check_regular_file

    if req.out is not None:
        if req.out.exists() and not req.out.is_dir():
            raise DataError(f"--out {req.out}: exists and is not a folder")
        for name in ("audit.jsonl", "audit.html"):
            _writable(check_regular_file(req.out / name, "--out"), "--out")
    if req.harden is None:
        return
    if req.harden.suffix != ".jsonl":
        raise DataError(f"--harden {req.harden}: the hardened file is written as JSONL: name it *.jsonl")
    _writable(check_regular_file(req.harden, "--harden"), "--harden")
    if _same_file(req.harden, Path(req.source)):
        raise DataError(f"--harden {req.harden}: is the task file being audited; write the hardened tasks elsewhere")
    if req.out is not None and _same_file(req.harden, req.out / "audit.jsonl"):
        raise DataError(f"--harden {req.harden}: is the audit's own --out file; write the hardened tasks elsewhere")


def _same_file(a: Path, b: Path) -> bool:
    """One file by name (links resolved) or, both existing, by inode (a hard link)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    return a.exists() and b.exists() and os.path.samefile(a, b)


def _writable(path: Path, option: str) -> None:
    """DataError unless `path` can be written: its nearest existing folder is a folder azr may write in."""
    folder = Path(os.path.realpath(path)).parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise DataError(f"{option} {path}: cannot write in {folder}")


def _audit(tasks: list[Task], pool, limits, req: AuditRequest, progress: bool, label: str) -> list[TaskAudit]:
    from rich.progress import Progress

    bar = Progress(transient=True, disable=not progress)
    with bar if progress else nullcontext():
        job = bar.add_task(f"{label} {len(tasks)} tasks", total=None)
        return audit_tasks(
            tasks,
            pool,
            limits,
            req.max_mutants,
            req.max_generated,
            lambda done, total: bar.update(job, completed=done, total=total),
        )


def _print(audits: list[TaskAudit], req: AuditRequest, echo: Callable[[str], None]) -> None:
    import io

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"weakest tasks of {req.source}")
    for name in ("task", "kill rate", "killed", "equivalent", "survivors", "probes passed"):
        table.add_column(name)
    for a in weakest_first(audits)[: req.table_rows]:
        rate = "–" if a.kill_rate is None else f"{a.kill_rate:.2f}"
        table.add_row(
            a.id,
            rate,
            f"{a.killed}/{a.mutants - a.equivalent - a.errors}",
            str(a.equivalent),
            str(len(a.survivors)),
            ", ".join(a.probes_passed) or a.note or "",
        )
    buffer = io.StringIO()
    Console(file=buffer, width=120, markup=False, highlight=False).print(table)
    echo(buffer.getvalue().rstrip("\n"))
    rates = [a.kill_rate for a in audits if a.kill_rate is not None]
    below = sum(r < req.threshold for r in rates)
    echo(f"{below} of {len(rates)} tasks below kill rate {req.threshold:.2f}; distribution: " + _distribution(rates))
    timeouts = sum(a.timeouts for a in audits)
    if timeouts:
        echo(f"{timeouts} of {sum(a.killed for a in audits)} killed mutants ran out of time (20x the reference's)")
    for a in audits:
        if a.probes_passed:
            echo(f"PROBE {a.id}: passed {', '.join(a.probes_passed)}")


def _distribution(rates: list[float]) -> str:
    if not rates:
        return "none"
    ordered = sorted(rates)
    quartiles = [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in (0.0, 0.25, 0.5, 0.75)]
    return "min {:.2f}, p25 {:.2f}, median {:.2f}, p75 {:.2f}, max {:.2f}".format(*quartiles, ordered[-1])


def _harden(tasks, audits, pool, limits, req: AuditRequest, echo, progress: bool) -> None:
    from azr.audit.output import summary_line as line
    from azr.logs import write_data_file

    new_tasks, added = hardened(tasks, audits, req.threshold)
    rows = "".join(json.dumps(t.to_json(), ensure_ascii=False) + "\n" for t in new_tasks)
    assert req.harden is not None
    write_data_file(req.harden, rows).chmod(0o666 & ~_umask())  # the tests verbatim: never redacted
    echo(f"hardened {len(added)} tasks with {sum(added.values())} new tests: wrote {req.harden}")
    again = _audit(new_tasks, pool, limits, req, progress, "re-auditing")
    echo(f"before: {line(audits)}")
    echo(f"after:  {line(again)}")


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask
