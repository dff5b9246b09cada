"""`azr sandbox run` and `azr sandbox doctor`: one program under the sandbox, and the sandbox's self-test."""

from __future__ import annotations

from pathlib import Path

import click

from azr.cli.app import FiniteFloat, azr, package_option, read_text, sandbox_config, setup_logging


@azr.group()
def sandbox() -> None:
    """Run untrusted code under the sandbox, and check the sandbox itself."""


_BACKEND = click.Choice(["auto", "bwrap", "nsjail", "process"])


@sandbox.command("run")
@click.option("--code", "code_path", metavar="FILE|-", required=True, help="Program to run ('-' for stdin).")
@click.option("--test", "tests", multiple=True, metavar="STMT", help="A test statement, e.g. 'assert f(1) == 2'.")
@click.option("--tests-file", type=click.Path(path_type=Path), help="File with one test statement per line.")
@click.option("--timeout", type=FiniteFloat(), help="Wall-clock limit in seconds.")
@click.option("--memory-mb", type=click.IntRange(min=1), help="Address-space limit in MiB.")
@click.option("--backend", type=_BACKEND, default="auto", show_default=True, help="Sandbox backend.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the result.")
@package_option
def sandbox_run(code_path, tests, tests_file, timeout, memory_mb, backend, as_json, packages) -> int:
    """Run one program (and optional tests) in the sandbox; exit 0 when it passes, 1 when it does not."""
    import json

    from azr.rewards import run_program
    from azr.terminal import printable

    code = read_text(code_path, "--code")
    all_tests = list(tests)
    if tests_file is not None:
        lines = read_text(tests_file, "--tests-file").splitlines()
        all_tests += [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    cfg = sandbox_config(timeout, memory_mb, backend=backend, workers=1, packages=list(packages))
    outcome = run_program(code, all_tests, cfg)
    if as_json:
        click.echo(json.dumps(outcome))
    else:
        tests_line = f", {outcome['tests_passed']}/{outcome['tests_total']} tests" if all_tests else ""
        click.echo(f"{outcome['status']}{tests_line} in {outcome['duration_s']:.3f} s ({outcome['backend']})")
        for name in ("stdout", "stderr"):
            if outcome[name]:
                click.echo(f"--- {name}\n{printable(outcome[name].rstrip(), lines=True)}")
    return 0 if outcome["passed"] else 1


@sandbox.command("doctor")
@click.option("--backend", type=_BACKEND, default="auto", show_default=True, help="Sandbox backend to check.")
@package_option
def sandbox_doctor(backend, packages) -> int:
    """Show the active backend and self-test each isolation guarantee; exit 1 when one fails."""
    from azr.rewards import verdict_check
    from azr.sandbox import namespace_hints, open_pool, run_doctor

    setup_logging()
    with open_pool(backend, workers=1, packages=packages) as pool:
        click.echo(f"backend: {pool.backend.name} ({' '.join(pool.backend.prefix[:1]) or 'no namespaces'})")
        offered = ", ".join(name for _, name in pool.backend.packages)
        click.echo(f"packages offered to programs: {offered or 'none (the standard library alone)'}")
        if not pool.backend.namespaced:
            for hint in namespace_hints() or ["no sign of why here: see the bwrap error in the warning above"]:
                click.echo(f"to enable bwrap: {hint}")
        checks = [*run_doctor(pool), verdict_check(pool)]
    width = max(len(c.guarantee) for c in checks)
    for check in checks:
        click.echo(f"{'PASS' if check.ok else 'FAIL'}  {check.guarantee:<{width}}  {check.detail}")
    failed = [c for c in checks if not c.ok]
    click.echo(f"{len(checks) - len(failed)} of {len(checks)} guarantees hold")
    return 1 if failed else 0
