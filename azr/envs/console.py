"""What `azr gen` shows while it runs and when it ends: a rich progress bar (or plain log lines) and a summary table
of the rollouts file (episodes, pass rate, turns per episode, tool calls by tool and status, finish reasons)."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


@contextlib.contextmanager
def progress(total: int, console: str) -> Iterator[Callable[[bool], None]]:
    """Yields `advance(passed)`, called once per finished episode."""
    counts = {"done": 0, "passed": 0}
    if console == "rich" and sys.stderr.isatty():
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        columns = (TextColumn("episodes"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"))
        with Progress(*columns, TimeRemainingColumn(), transient=False) as bar:
            task = bar.add_task("gen", total=total, rate="")

            def advance(passed: bool) -> None:
                counts["done"] += 1
                counts["passed"] += passed
                bar.update(task, advance=1, rate=f"passed {counts['passed']}/{counts['done']}")

            yield advance
        return

    every = max(1, total // 20)

    def advance(passed: bool) -> None:
        counts["done"] += 1
        counts["passed"] += passed
        if counts["done"] % every == 0 or counts["done"] == total:
            log.info("gen: %d/%d episodes, %d passed", counts["done"], total, counts["passed"])

    yield advance


def show_summary(figures: dict[str, Any], out: Path, console: str) -> None:
    rows = [
        ("episodes", str(figures["episodes"])),
        ("graded", str(figures["graded"])),
        ("pass rate", f"{figures['pass_rate']:.3f} ({figures['passed']}/{figures['graded']})"),
        ("turns per episode", f"{figures['turns']:.2f}"),
    ]
    rows += [(f"tool calls: {key}", str(n)) for key, n in figures["tool_calls"].items()] or [("tool calls", "0")]
    rows += [(f"finish: {key}", str(n)) for key, n in figures["finish_reasons"].items()]
    if console == "rich":
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"azr gen: {out}", show_header=False)
        table.add_column(style="bold")
        table.add_column(justify="right")
        for row in rows:
            table.add_row(*row)
        Console().print(table)
        return
    width = max(len(name) for name, _ in rows)
    lines = [f"azr gen: {out}", *(f"  {name:<{width}}  {value}" for name, value in rows)]
    sys.stdout.write("\n".join(lines) + "\n")
