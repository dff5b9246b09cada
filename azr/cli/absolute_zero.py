"""`azr absolute-zero check`: validate a file of triplets (a buffer, a seed file) as the mode validates proposals."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import click

from azr.cli.app import azr, setup_logging


@azr.group("absolute-zero")
def absolute_zero() -> None:
    """Absolute Zero mode: inspect and check triplet files."""


@absolute_zero.command("check")
@click.argument("path", metavar="FILE.jsonl", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help='One {"line", "valid", "reason"} object per triplet.')
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="Take sandbox and rules from a recipe.")
@click.option("--workers", type=click.IntRange(min=1), help="Programs run in parallel (default: CPU cores).")
def check(path, as_json, config_path, workers) -> int:
    """Validate every triplet in FILE.jsonl (`{"program", "input", "output"}` per line, or Absolute-Zero-Reasoner's
    own seed rows with "snippet"; a line without "output" is checked as a proposal, its output computed) with the
    sandbox checks the mode applies. Exit 1 if any is invalid, 2 for a malformed file."""
    from azr.absolute_zero import check_file
    from azr.config import AbsoluteZeroConfig, SandboxConfig, load_config
    from azr.terminal import printable

    setup_logging("warning")
    recipe = load_config(config_path, needs_model=False) if config_path else None
    sandbox = recipe.sandbox if recipe else SandboxConfig()
    sandbox.workers = workers or sandbox.workers
    verdicts = check_file(path, sandbox, recipe.absolute_zero if recipe else AbsoluteZeroConfig())
    for v in verdicts:
        if as_json:
            click.echo(json.dumps(v.to_json()))
        elif v.valid:
            outputs = ", ".join(v.outputs or ())
            click.echo(printable(f"line {v.line}: valid (output {outputs[:120]})"))
        else:
            click.echo(printable(f"line {v.line}: invalid: {v.reason}: {v.detail}"[:400]))
    reasons = Counter(v.reason for v in verdicts if not v.valid)
    invalid = sum(reasons.values())
    if not as_json:
        by_reason = ", ".join(f"{reason} {n}" for reason, n in reasons.most_common())
        click.echo(
            f"{path}: {len(verdicts)} triplets, {len(verdicts) - invalid} valid, {invalid} invalid"
            + (f" ({by_reason})" if by_reason else "")
        )
    return 1 if invalid else 0
