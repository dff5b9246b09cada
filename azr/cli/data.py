"""`azr data validate`: every reference solution of a task file run against its tests in the sandbox."""

from __future__ import annotations

import click

from azr.cli.app import FiniteFloat, azr, sandbox_config


@azr.group()
def data() -> None:
    """Inspect and check task datasets."""


@data.command("validate")
@click.argument("source", metavar="PATH")
@click.option("--column-map", multiple=True, metavar="FIELD=COLUMN", help="Map a task field to a column (repeatable).")
@click.option("--workers", type=click.IntRange(min=1), help="Programs run in parallel (default: CPU cores).")
@click.option(
    "--timeout",
    type=FiniteFloat(),
    help="Seconds per task that sets none [default: sandbox.timeout_s].",
)
@click.option(
    "--memory-mb", type=click.IntRange(min=1), help="MiB per task that sets none [default: sandbox.memory_mb]."
)
@click.option(
    "--package",
    "packages",
    multiple=True,
    metavar="NAME",
    help="Offer this installed package to programs, as sandbox.packages does (repeatable).",
)
def data_validate(source, column_map, workers, timeout, memory_mb, packages) -> int:
    """Run every reference solution in PATH (a task file or 'train' / 'held-out') against its tests, in the
    sandbox with the limits training applies, so what passes here passes there."""
    from azr.config import parse_pairs
    from azr.data import check_task_limits, load_tasks, near_duplicates
    from azr.rewards import limits_from_config, pool_from_config, start_pool, validate_references
    from azr.terminal import printable

    mapping = dict(parse_pairs(column_map, "--column-map", "FIELD=COLUMN"))
    cfg = sandbox_config(timeout, memory_mb, workers=workers, packages=list(packages))
    start_pool(cfg)  # the workers start while the tasks are read
    tasks = load_tasks(source, mapping)
    check_task_limits(tasks, cfg.max_task_timeout_s, cfg.max_task_memory_mb, str(source))
    results = validate_references(tasks, pool_from_config(cfg), limits_from_config(cfg))
    failed = [(t, g) for t, g in results if g is not None and not g.passed]
    missing = sum(g is None for _, g in results)
    for task, grade in failed:
        line = f"FAIL {task.id}: {grade.status}, {grade.tests_passed}/{grade.tests_total} tests passed; "
        click.echo(printable(line + "; ".join(grade.failures)[:400]))  # a row's text cannot rewrite its FAIL line
    for a, b, score in near_duplicates(tasks):
        click.echo(printable(f"WARN near-duplicate prompts: {a.id} ~ {b.id} (similarity {score:.2f})"))
    click.echo(
        f"{source}: {len(tasks)} tasks, {len(tasks) - missing - len(failed)} passed, {len(failed)} failed, "
        f"{missing} without a reference solution"
    )
    return 1 if failed else 0
