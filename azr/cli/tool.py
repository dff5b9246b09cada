"""`azr tool call NAME --args JSON`: one tool call, as a model's would run, printing its result record."""

from __future__ import annotations

import json
from pathlib import Path

import click

from azr.cli.app import azr, setup_logging
from azr.errors import ConfigError, did_you_mean
from azr.inputs import load_json


@azr.group()
def tool() -> None:
    """Run the tools a model may call."""


@tool.command("call")
@click.argument("name")  # checked against the config's TOOL_NAMES inside: `azr --help` imports no config
@click.option(
    "--args", "arguments", required=True, metavar="JSON", help='The arguments, e.g. \'{"code": "print(1)"}\'.'
)
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="Recipe whose tools:/sandbox: apply.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a config field (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the result record as one JSON object.")
def tool_call(name, arguments, config_path, overrides, as_json) -> int:
    """Call the tool NAME (python_run, web_search or web_fetch); exit 0 when it succeeded, 1 when it failed or was
    refused, 2 for bad input."""
    from azr.config import TOOL_NAMES, load_config

    if name not in TOOL_NAMES:
        raise ConfigError(
            f"NAME: unknown tool {name!r}{did_you_mean(name, TOOL_NAMES)}; one of {', '.join(TOOL_NAMES)}"
        )
    try:
        parsed = load_json(arguments)
    except ValueError as exc:
        raise ConfigError(f"--args: not valid JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise ConfigError(f"--args: expected a JSON object, got {type(parsed).__name__}")
    cfg = load_config(config_path, overrides, needs_model=False)  # a tool call needs no model
    setup_logging("warning")
    from azr.terminal import printable
    from azr.tools import build_toolbox

    cfg.tools.names = list(TOOL_NAMES)  # any tool may be called from here, whatever the recipe offers a model
    toolbox = build_toolbox(cfg)
    result, event = toolbox.call(name, parsed)
    if as_json:
        click.echo(json.dumps({"name": name, **result.to_dict(), "duration_s": event.duration_s}, ensure_ascii=False))
    else:
        click.echo(f"{result.status} ({event.duration_s:.2f} s)")
        click.echo(printable(result.content, lines=True))
    return 0 if result.ok else 1
