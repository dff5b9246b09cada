"""What an audit writes: `audit.jsonl` (one record per task), `audit.html` (in `azr report`'s look: a histogram of
kill rates, the weakest tasks with their surviving mutants), the summary line outside checks read, and reading an
`audit.jsonl` back (for `data.min_kill_rate`). Every text from a task file is escaped on the page.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from azr.audit.strength import TaskAudit, kill_rate
from azr.errors import DataError


def summary_line(audits: Sequence[TaskAudit]) -> str:
    """`kill rate K.KK over N tasks (M mutants, E equivalent, P probes passed)`; N counts the tasks with a kill
    rate, K is the mean of theirs."""
    rate = kill_rate(audits)
    rated = sum(a.kill_rate is not None for a in audits)
    mutants = sum(a.mutants for a in audits)
    equivalent = sum(a.equivalent for a in audits)
    probes = sum(len(a.probes_passed) for a in audits)
    shown = f"{rate:.2f}" if rate is not None else "n/a"
    return f"kill rate {shown} over {rated} tasks ({mutants} mutants, {equivalent} equivalent, {probes} probes passed)"


def weakest_first(audits: Sequence[TaskAudit]) -> list[TaskAudit]:
    """Tasks with a probe passed first, then by kill rate, lowest first; tasks without a kill rate last."""
    return sorted(
        audits, key=lambda a: (not a.probes_passed, a.kill_rate is None, a.kill_rate or 0.0, -len(a.survivors))
    )


def histogram(audits: Sequence[TaskAudit], bins: int = 10) -> list[int]:
    """Tasks per kill-rate bin of width 1/bins (1.0 in the last)."""
    counts = [0] * bins
    for a in audits:
        if a.kill_rate is not None:
            counts[min(int(a.kill_rate * bins), bins - 1)] += 1
    return counts


def write_audit(audits: Sequence[TaskAudit], out: Path, source: str, threshold: float) -> tuple[Path, Path]:
    """`out/audit.jsonl` and `out/audit.html`; returns their paths."""
    from azr.logs import atomic_write_text

    out.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(a.record(), ensure_ascii=False) + "\n" for a in audits)
    jsonl = atomic_write_text(out / "audit.jsonl", lines)
    umask = os.umask(0)
    os.umask(umask)
    jsonl.chmod(0o666 & ~umask)  # readable as any file the user writes (the temp file it was renamed from is 0600)
    return jsonl, write_page(audits, out / "audit.html", source, threshold)


def write_page(audits: Sequence[TaskAudit], path: Path, source: str, threshold: float, shown: int = 50) -> Path:
    from azr.report import escape as e
    from azr.report import standalone_page, write_html

    counts = histogram(audits)
    plot = {
        "id": "kill_rates",
        "title": "Tasks by kill rate",
        "ytitle": "tasks",
        "xtitle": "kill rate",
        "traces": [
            {
                "type": "bar",
                "x": [round((i + 0.5) / len(counts), 3) for i in range(len(counts))],
                "y": counts,
                "name": "tasks",
                "marker": {"color": "#1f77b4"},
            }
        ],
    }
    weak = [a for a in weakest_first(audits) if a.probes_passed or (a.kill_rate is not None and a.kill_rate < 1.0)]
    rows = []
    for a in weak[:shown]:
        diffs = "".join(f"<pre>{e(d)}</pre>" for d in a.survivors[:5])
        more = f"<p class='muted'>{len(a.survivors) - 5} more survivors</p>" if len(a.survivors) > 5 else ""
        rate = "–" if a.kill_rate is None else f"{a.kill_rate:.2f}"
        probes = e(", ".join(a.probes_passed)) or "–"
        rows.append(
            f"<tr><td>{e(a.id)}</td><td>{rate}</td><td>{a.killed}/{a.mutants - a.equivalent - a.errors}</td>"
            f"<td>{a.equivalent}</td><td>{probes}</td><td>{diffs}{more}</td></tr>"
        )
    table = (
        "<table><thead><tr><th>task</th><th>kill rate</th><th>killed</th><th>equivalent</th><th>probes passed</th>"
        f"<th>surviving mutants</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
    below = sum(a.kill_rate is not None and a.kill_rate < threshold for a in audits)
    body = (
        f"<h2>Summary</h2><p>{e(summary_line(audits))}</p>"
        f"<p>{below} tasks below the threshold {threshold:.2f}; source {e(source)}</p>"
        f"<h2>Weakest tasks</h2>{table if rows else '<p class=empty>No task let a mutant or probe through.</p>'}"
    )
    page = standalone_page(f"azr data audit: {source}", body, [plot], time.strftime("%Y-%m-%d %H:%M %Z"))
    return write_html(path, page)


def read_audit(path: Path) -> dict[str, dict[str, Any]]:
    """An `audit.jsonl`'s records by task id; DataError naming `file:line` for a row that is not one."""
    from azr.data import json_lines

    records: dict[str, dict[str, Any]] = {}
    for number, row in json_lines(Path(path)):
        if not isinstance(row, dict) or not isinstance(row.get("id"), str) or "kill_rate" not in row:
            raise DataError(f"{path}:{number}: not an audit record (expected 'id' and 'kill_rate')")
        rate = row["kill_rate"]
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate <= 1):
            raise DataError(f"{path}:{number}: field 'kill_rate': expected null or a number in [0, 1]")
        records[row["id"]] = row
    return records


def weak_tasks(tasks: Sequence[Any], records: dict[str, dict[str, Any]], min_kill_rate: float) -> set[str]:
    """Ids of `tasks` whose audit record shows tests too weak to train on: a kill rate under `min_kill_rate`, or a
    probe that passed. Tasks without a record, or whose record has no kill rate, are not among them."""
    weak = set()
    for task in tasks:
        row = records.get(task.id)
        if row is None:
            continue
        rate = row.get("kill_rate")
        if row.get("probes_passed") or (rate is not None and rate < min_kill_rate):
            weak.add(task.id)
    return weak


def audit_figures(tasks: Sequence[Any], records: dict[str, dict[str, Any]], path: str, dropped: int) -> dict[str, Any]:
    """What summary.json and the report show of a run's audit: the file, the training tasks' mean kill rate, how
    many have a record, how many were dropped by data.min_kill_rate."""
    rates = [records[t.id]["kill_rate"] for t in tasks if t.id in records and records[t.id]["kill_rate"] is not None]
    return {
        "file": path,
        "kill_rate": round(sum(rates) / len(rates), 4) if rates else None,
        "tasks_with_record": sum(t.id in records for t in tasks),
        "tasks": len(tasks),
        "dropped": dropped,
        "probes_passed": sum(bool(records[t.id].get("probes_passed")) for t in tasks if t.id in records),
    }
