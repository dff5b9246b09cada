"""`azr data validate`: every reference solution of a task file run against its tests in the sandbox."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from azr.cli.app import FiniteFloat, azr, package_option, recipe_options, sandbox_config


@azr.group()
def data() -> None:
    """Inspect and check task datasets."""


@data.command("validate")
@click.argument("source", metavar="PATH")
@click.option("--column-map", multiple=True, metavar="FIELD=COLUMN", help="Map a task field to a column (repeatable).")
@click.option(
    "--format",
    "format_",
    metavar="NAME",
    help="The data set's own row shape instead of a column map: mbpp, mbpp+, humaneval, humaneval+, apps, "
    "livecodebench, code_contests, primeintellect, kodcode or bigcodebench.",
)
@click.option(
    "--checker",
    metavar="FILE",
    help="A Python file defining check(input, expected, output) -> bool, or a testlib-style program (argv: input, "
    "output, answer files; exit 0 accepts): the special judge of every task's stdin/stdout cases that has none of "
    "its own (run in the sandbox).",
)
@click.option(
    "--compare",
    type=click.Choice(["lines", "tokens"]),
    help="How stdin/stdout outputs are compared, where a task does not say [default: lines].",
)
@click.option(
    "--float-tol",
    type=click.FloatRange(min=0),
    help="Numeric tokens of stdin/stdout outputs may differ by this much (absolute or relative).",
)
@click.option("--workers", type=click.IntRange(min=1), help="Programs run in parallel (default: CPU cores).")
@click.option(
    "--timeout",
    type=FiniteFloat(),
    help="Seconds per task (per case for stdin/stdout tasks) that sets none [default: sandbox.timeout_s].",
)
@click.option(
    "--memory-mb", type=click.IntRange(min=1), help="MiB per task that sets none [default: sandbox.memory_mb]."
)
@package_option
@recipe_options
def data_validate(
    source,
    column_map,
    format_,
    checker,
    compare,
    float_tol,
    workers,
    timeout,
    memory_mb,
    packages,
    config_path,
    overrides,
) -> int:
    """Run every reference solution in PATH (a task file or 'train' / 'held-out') against its tests, in the
    sandbox with the limits training applies, so what passes here passes there. Exit 1 when a solution fails or
    none is there to run, 2 when the file cannot be read as tasks."""
    from azr.config import parse_pairs
    from azr.data import (
        check_task_limits,
        converter,
        identical_solutions,
        kinds_of,
        load_tasks,
        near_duplicates,
        read_checker,
        show_kinds,
        show_split,
        without_checks,
        without_tests,
    )
    from azr.rewards import limits_from_config, pool_from_config, sandbox_oracle, start_pool, validate_references
    from azr.terminal import printable

    mapping = dict(parse_pairs(column_map, "--column-map", "FIELD=COLUMN"))
    if format_ is not None:
        converter(format_)  # an unknown name is refused before the sandbox starts
    judge = read_checker(checker) if checker is not None else None
    cfg = sandbox_config(timeout, memory_mb, config_path, overrides, workers=workers, packages=list(packages))
    start_pool(cfg)  # the workers start while the tasks are read
    tasks = load_tasks(source, mapping, format_, compare, float_tol, judge, sandbox_oracle(cfg))
    check_task_limits(tasks, cfg.max_task_timeout_s, cfg.max_task_memory_mb, str(source))
    unchecked = without_checks(tasks)
    if unchecked:
        click.echo(
            printable(
                f"WARN {len(unchecked)} tasks have a test with no assert or raise, which any program passes: "
                f"{_few([t.id for t in unchecked])}"
            )
        )
    for group in identical_solutions(tasks):
        click.echo(
            printable(f"WARN identical reference solutions ({len(group)} tasks): {_few([t.id for t in group], 8)}")
        )
    for a, b, score in near_duplicates(tasks, solutions=False):
        click.echo(printable(f"WARN near-duplicate prompts: {a.id} ~ {b.id} (similarity {score:.2f})"))
    if not any(t.solution is not None for t in tasks):
        how = (  # a format takes no column map: say so rather than suggest one
            f"the rows have none in the columns --format {format_} reads"
            if format_ is not None
            else "map one with --column-map solution=COLUMN"
        )
        click.echo(
            printable(f"{source}: {len(tasks)} tasks, none with a reference solution: nothing was checked ({how})"),
            err=True,
        )
        return 1
    click.echo(printable(f"tests by kind: {show_kinds(kinds_of(t for task in tasks for t in task.tests))}"))
    click.echo(printable(show_split(tasks)))
    empty = {t.id for t in without_tests(tasks)}  # refused: their verdict is always "no tests ran"
    for task in tasks:
        if task.id in empty:
            click.echo(printable(f"FAIL {task.id}: no tests ran: a test module of it defines no test ({_kinds(task)})"))
    results = validate_references(
        [t for t in tasks if t.id not in empty], pool_from_config(cfg), limits_from_config(cfg)
    )
    failed = [(t, g) for t, g in results if g is not None and not g.passed]
    missing = sum(g is None for _, g in results)
    for task, grade in failed:
        line = (
            f"FAIL {task.id}: {grade.status}, {grade.tests_passed}/{grade.tests_total} tests passed ({_kinds(task)}); "
        )
        click.echo(printable(line + "; ".join(grade.failures)[:400]))  # a row's text cannot rewrite its FAIL line
    click.echo(
        f"{source}: {len(tasks)} tasks, {len(tasks) - missing - len(failed) - len(empty)} passed, "
        f"{len(failed) + len(empty)} failed, {missing} without a reference solution"
    )
    return 1 if failed or empty else 0


def _kinds(task) -> str:
    from azr.data import kinds_of, show_kinds

    return show_kinds(kinds_of(task.tests))


@data.command("audit")
@click.argument("source", metavar="PATH")
@click.option("--format", "format_", metavar="NAME", help="The data set's own row shape (as `azr data validate`).")
@click.option("--column-map", multiple=True, metavar="FIELD=COLUMN", help="Map a task field to a column (repeatable).")
@click.option("--out", type=click.Path(path_type=Path), metavar="DIR", help="Write DIR/audit.jsonl and DIR/audit.html.")
@click.option(
    "--harden",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="Write the tasks, weak ones with new cases that kill their survivors, to FILE (azr's JSONL), and re-audit.",
)
@click.option(
    "--threshold",
    type=click.FloatRange(0, 1),
    default=0.8,
    show_default=True,
    help="Tasks under this kill rate are weak (listed first, hardened).",
)
@click.option(
    "--max-mutants",
    type=click.IntRange(min=1, max=1000),
    default=30,
    show_default=True,
    help="Mutants per task, at most.",
)
@click.option(
    "--max-inputs",
    type=click.IntRange(min=0, max=1000),
    default=30,
    show_default=True,
    help="New inputs per task made from the tests' own, at most (to tell equivalent mutants; to harden).",
)
@click.option("--workers", type=click.IntRange(min=1), help="Programs run in parallel (default: CPU cores).")
@click.option("--timeout", type=FiniteFloat(), help="Seconds per task that sets none [default: sandbox.timeout_s].")
@click.option(
    "--memory-mb", type=click.IntRange(min=1), help="MiB per task that sets none [default: sandbox.memory_mb]."
)
@package_option
@recipe_options
def data_audit(
    source,
    format_,
    column_map,
    out,
    harden,
    threshold,
    max_mutants,
    max_inputs,
    workers,
    timeout,
    memory_mb,
    packages,
    config_path,
    overrides,
) -> int:
    """How strong PATH's tests are: each reference solution's mutants (one small edit each) and probes that must
    fail are run against the tests in the sandbox. Per task the kill rate (killed / non-equivalent mutants), its
    survivors as diffs and any probe that passed. Exit 1 when a probe passed, 2 for unreadable data."""
    from azr.audit import AuditRequest, run_audit
    from azr.config import parse_pairs

    mapping = dict(parse_pairs(column_map, "--column-map", "FIELD=COLUMN"))
    cfg = sandbox_config(timeout, memory_mb, config_path, overrides, workers=workers, packages=list(packages))
    request = AuditRequest(source, format_, mapping, out, harden, threshold, max_mutants, max_inputs)
    return run_audit(request, cfg, click.echo, progress=sys.stderr.isatty())


def _few(ids: list[str], n: int = 5) -> str:
    return ", ".join(ids[:n]) + (f", ... ({len(ids) - n} more)" if len(ids) > n else "")
