"""The `azr` Click group, the options and helpers its commands share, and how an outcome becomes an exit code.

Each command parses its flags, calls one library function and returns an exit code: 0 success, 1 the thing ran
and failed, 2 user error (one line on stderr, no traceback). Heavy modules are imported inside commands, so
`azr --help` stays fast.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from azr import __version__
from azr.config import SandboxConfig
from azr.errors import ConfigError, NotAvailableError, UserError
from azr.sandbox import SandboxUnavailable, SandboxUnhealthy
from azr.serving import VllmServerError

USER_ERRORS = (UserError, SandboxUnavailable)


def setup_logging(level: str = "info") -> None:
    logging.basicConfig(level=level.upper(), format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def config_options(fn):
    """--config FILE and repeatable --set KEY=VALUE."""
    fn = click.option(
        "--set",
        "overrides",
        multiple=True,
        metavar="KEY=VALUE",
        help="Override a config field, e.g. --set model.adapter.r=8 (repeatable).",
    )(fn)
    return click.option(
        "--config", "config_path", type=click.Path(path_type=Path), metavar="FILE", help="Recipe in YAML or JSON."
    )(fn)


def require_config(config_path: Path | None) -> None:
    if config_path is None:
        raise ConfigError("--config: a recipe file is required (see examples/)")


def sandbox_config(timeout: float | None, memory_mb: int | None, **fields) -> SandboxConfig:
    """The `sandbox:` defaults training uses, with --timeout / --memory-mb where given."""
    cfg = SandboxConfig(**fields)
    cfg.timeout_s = timeout or cfg.timeout_s
    cfg.memory_mb = memory_mb or cfg.memory_mb
    return cfg


def read_text(path: Path, flag: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"cannot read {path}: {exc}", param_hint=flag) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="azr")
def azr() -> None:
    """azr: GRPO fine-tuning of code LLMs with rewards from unit tests run in a sandbox."""


def invoke(command: click.Command, prog_name: str, args: list[str] | None = None) -> int:
    """Run a Click command and turn every outcome into an exit code; user errors become one line on stderr."""
    try:
        result = command.main(args=args, prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.NoArgsIsHelpError as exc:  # a bare `azr` or `azr data`: show the help, not an error
        click.echo(exc.ctx.get_help())
        return 0
    except click.ClickException as exc:  # usage errors, bad parameters, unreadable files
        _error(prog_name, exc.format_message())
        return 2
    except USER_ERRORS as exc:
        _error(prog_name, str(exc))
        return 2
    except (NotAvailableError, SandboxUnhealthy) as exc:
        _error(prog_name, str(exc))
        return 1
    except VllmServerError as exc:  # one line, then the server's log tail as it was written
        line, _, tail = str(exc).partition("\n")
        _error(prog_name, line)
        if tail:
            click.echo(tail, err=True)
        return 1
    except click.exceptions.Abort:
        _error(prog_name, "aborted")
        return 130
    except KeyboardInterrupt:
        _error(prog_name, "interrupted")
        return 130
    return result if isinstance(result, int) else 0


def _error(prog_name: str, message: str) -> None:
    line = " ".join(message.split())  # always one line
    click.echo(f"{prog_name}: error: {line}", err=True)
