"""`azr tiny-model`: the tiny offline model tests and the CPU demo use."""

from __future__ import annotations

from pathlib import Path

import click

from azr.cli.app import azr, output_folder


@azr.command("tiny-model")
@click.argument("out_dir", type=click.Path(path_type=Path), callback=output_folder)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Weights seed; the same seed gives the same files."
)
def tiny_model(out_dir, seed) -> int:
    """Build the tiny random-init model (Qwen2, ~1 M parameters) used by tests and the CPU demo."""
    from azr.models import build_tiny_model

    path = build_tiny_model(out_dir, seed=seed)
    click.echo(f"tiny model written to {path}")
    return 0
