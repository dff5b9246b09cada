"""`azr config fields`, `show` and `check`: the schema as a table, a recipe as resolved, and a recipe checked for
training. `fields` imports no torch, transformers or trl; `show` imports trl only to check the names in `grpo:` and
`sft.args` as `check` does; `check` builds TRL's config classes."""

from __future__ import annotations

import click

from azr.cli.app import azr, config_options, require_config, setup_logging


@azr.group("config")
def config_group() -> None:
    """Show the config schema and resolved recipes, and check a recipe for training."""


@config_group.command("fields")
def config_fields() -> int:
    """Print every config field with its type, default and help, as a Markdown table."""
    from azr.config import AzrConfig, fields_markdown

    click.echo(fields_markdown(AzrConfig))
    return 0


@config_group.command("show")
@config_options
def config_show(config_path, overrides) -> int:
    """Print the resolved config (defaults, file, overrides; legacy schema converted) as YAML, once its `grpo:` and
    `sft.args` keys (and `grpo:`'s bounds) are checked as `config check` checks them."""
    from azr.config import dump_yaml, load_config

    cfg = load_config(config_path, overrides)
    if cfg.grpo or cfg.sft.args:  # checked against TRL's classes, through training's translation (empty: nothing to)
        from azr.models import quiet_third_party

        quiet_third_party()  # first: bitsandbytes logs a kernel notice as TRL imports it
        from azr.training import check_grpo_inputs, validate_grpo

        check_grpo_inputs(cfg)
        validate_grpo(cfg.sft.args, "sft.args", "SFTConfig")
    click.echo(dump_yaml(cfg), nl=False)
    return 0


@config_group.command("check")
@config_options
def config_check(config_path, overrides) -> int:
    """Check a recipe as `azr train` does before it starts (TRL's trainer arguments, rewards, paths, the model's
    source), without training: exit 0 and a summary when it would start, 2 and the field at fault when not."""
    from azr.config import load_config
    from azr.training import preflight

    require_config(config_path)
    cfg = load_config(config_path, overrides)
    setup_logging(cfg.logging.level)

    args = preflight(cfg)
    grpo = args.grpo
    click.echo(
        f"ok: {cfg.model.name_or_path}; GRPO {grpo.num_generations} completions per prompt, generation batch "
        f"{grpo.generation_batch_size}, {grpo.max_completion_length} new tokens, rewards "
        f"{', '.join(f'{w:g}' for w in grpo.reward_weights)}"
        + (f"; SFT warm start {args.sft.num_train_epochs:g} epochs" if args.sft is not None else "")
    )
    return 0
