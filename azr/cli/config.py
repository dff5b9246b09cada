"""`azr config fields` and `azr config show`: the schema as a table, and a recipe as resolved."""

from __future__ import annotations

import click

from azr.cli.app import azr, config_options
from azr.config import AzrConfig, dump_yaml, fields_markdown, load_config


@azr.group("config")
def config_group() -> None:
    """Show the config schema and resolved recipes."""


@config_group.command("fields")
def config_fields() -> int:
    """Print every config field with its type, default and help, as a Markdown table."""
    click.echo(fields_markdown(AzrConfig))
    return 0


@config_group.command("show")
@config_options
def config_show(config_path, overrides) -> int:
    """Print the resolved config (defaults, file, overrides; legacy schema converted) as YAML."""
    click.echo(dump_yaml(load_config(config_path, overrides, check_grpo=True)), nl=False)
    return 0
