"""`azr report`: the HTML report of one or several run folders (`azr.report.run_report`)."""

from __future__ import annotations

from pathlib import Path

import click

from azr.cli.app import azr, output_file


@azr.command("report")
@click.argument("run_dirs", nargs=-1, required=True, metavar="RUN_DIR...", type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    callback=output_file,
    help="Where to write the page [default: RUN_DIR/report.html of the first run]; a regular file, or a link to one "
    "(the file it names is written: /dev/stdout redirected to a file); a device, a FIFO or a folder is refused.",
)
def report(run_dirs, out) -> int:
    """One self-contained HTML page of a run (finished, unfinished or cut short): recipe, plots over steps, alarms,
    tables and sampled generations; several runs are overlaid, one colour per run."""
    from azr.report import run_report
    from azr.terminal import printable

    click.echo(printable(str(run_report(list(run_dirs), out))))  # a folder's name cannot rewrite the terminal
    return 0
