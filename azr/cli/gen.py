"""`azr gen` (= azr-gen): tool-using or execution-feedback episodes, written to a JSONL file for SFT."""

from __future__ import annotations

from pathlib import Path

import click

from azr.cli.app import azr, config_options, output_file, require_config, setup_logging


@azr.command()
@config_options
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    callback=output_file,
    help="JSONL file of episodes; a regular file (a device, a FIFO or a folder is refused).",
)
@click.option("--resume", is_flag=True, help="Continue --out: skip finished episodes, redo failed ones.")
@click.option(
    "--vllm",
    is_flag=True,
    help="Start a vLLM server on model: (tool calling on for tool episodes) and generate with it.",
)
def gen(config_path, overrides, out, resume, vllm) -> int:
    """Collect episodes, each graded, for SFT (azr-gen): tool-using (python_run, web_search, web_fetch), or execution
    feedback with rollouts.env: feedback (public tests shown, the final program graded on the hidden ones)."""
    from azr.config import load_config

    require_config(config_path)
    cfg = load_config(config_path, overrides)
    setup_logging(cfg.logging.level)
    from azr.envs import run_gen

    return run_gen(cfg, out, resume=resume, vllm=vllm)
