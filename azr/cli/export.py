"""`azr export`: an adapter merged into its base and saved as a full Hugging Face model (`azr.models.export`)."""

from __future__ import annotations

from pathlib import Path

import click

from azr.cli.app import azr, output_folder, setup_logging


@azr.command("export")
@click.option("--adapter", required=True, type=click.Path(path_type=Path), help="peft adapter folder (a run's final/).")
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path),
    callback=output_folder,
    help="New folder for the merged model.",
)
@click.option(
    "--dtype",
    default="bfloat16",
    show_default=True,
    help="Dtype of the saved weights: bfloat16, float16 or float32 (the merge itself runs in float32).",
)
@click.option(
    "--base",
    metavar="PATH",
    help="Base model (hub id or folder) [default: the run's config.yaml beside the adapter, else adapter_config.json].",
)
def export(adapter, out, dtype, base) -> int:
    """Merge an adapter (LoRA, IA³, LN tuning) into its base and save a full model with tokenizer and model card;
    a base trained quantized is dequantized first."""
    from azr.models import export_merged, plan_export

    plan = plan_export(adapter, out, dtype, base)  # user errors exit 2 here, before torch loads
    setup_logging()
    click.echo(f"merged model written to {export_merged(plan)}")
    return 0
