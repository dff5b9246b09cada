"""`azr train` (= azr-train): the command that trains a policy from a recipe."""

from __future__ import annotations

from pathlib import Path

import click

from azr.cli.app import azr, config_options, output_folder, require_config, setup_logging


@azr.command()
@config_options
@click.option(
    "--output-dir",
    type=click.Path(path_type=Path),
    callback=output_folder,
    help="Where outputs go (overrides output_dir): new, empty, or an azr run.",
)
@click.option("--max-steps", type=click.IntRange(min=1), help="Stop after N optimizer steps (grpo.max_steps).")
@click.option("--resume-from", metavar="latest|DIR", help="Continue from the latest checkpoint or a checkpoint DIR.")
def train(config_path, overrides, output_dir, max_steps, resume_from) -> int:
    """Train a policy with GRPO on coding tasks (azr-train)."""
    from azr.config import load_config

    require_config(config_path)
    extra = list(overrides)
    if output_dir is not None:
        extra.append(f"output_dir={output_dir}")
    if max_steps is not None:
        extra.append(f"grpo.max_steps={max_steps}")
    cfg = load_config(config_path, extra)
    setup_logging(cfg.logging.level)
    from azr.training import run_train, send_server_key

    send_server_key()  # a Slurm job's vLLM server takes the key it generated ($VLLM_API_KEY), if any

    return run_train(cfg, resume_from=resume_from)  # its preflight checks the recipe whole first
