"""`azr report`: one self-contained HTML page over one or several run folders, finished or not.

Reads what a run wrote (`azr.report.runs`), turns it into plots (`azr.report.figures`) and a page
(`azr.report.page`). Imports no training code, and neither torch, transformers nor trl.
"""

from __future__ import annotations

import time
from pathlib import Path

from azr.errors import UserError
from azr.report.page import escape, standalone_page, write_html
from azr.report.runs import Run, read_run

__all__ = ["Run", "escape", "read_run", "run_report", "standalone_page", "write_html"]


def run_report(run_dirs: list[Path], out: Path | None = None) -> Path:
    """Write the report of `run_dirs` to `out` (default: the first run's report.html); returns its path. A missing
    run folder is a UserError, raised before anything is written."""
    if not run_dirs:
        raise UserError("RUN_DIR: name at least one run folder")
    for path in run_dirs:
        if not Path(path).is_dir():
            raise UserError(f"RUN_DIR: {path}: no such run folder")
    from azr.report.page import write_page

    runs = [read_run(Path(p)) for p in run_dirs]
    _distinct_names(runs)
    out = Path(out) if out is not None else Path(run_dirs[0]) / "report.html"
    return write_page(runs, out, time.strftime("%Y-%m-%d %H:%M %Z"))


def _distinct_names(runs: list[Run]) -> None:
    """Runs are named by their folders; two folders of the same name get their parent's name too."""
    seen: dict[str, int] = {}
    for run in runs:
        seen[run.name] = seen.get(run.name, 0) + 1
    for run in runs:
        if seen[run.name] > 1:
            run.name = f"{run.path.resolve().parent.name}/{run.name}"
