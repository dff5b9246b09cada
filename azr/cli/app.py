"""The `azr` Click group, the options and helpers its commands share, and how an outcome becomes an exit code.

Each command parses its flags, calls one library function and returns an exit code: 0 success, 1 the thing ran
and failed, 2 user error (one line on stderr, no traceback). Everything but Click is imported inside the commands
(the config schema and the sandbox included), so `azr --help` stays fast.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from azr import __version__
from azr.errors import ConfigError, NotAvailableError, UserError, show


def setup_logging(level: str = "info") -> None:
    """Log to stderr at `level`, every line through the one redaction (`azr.secrets`): the HTTP client's request
    lines name the endpoint's URL, which may carry a key."""
    from azr.secrets import redact_logs

    logging.basicConfig(level=level.upper(), format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    redact_logs()


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


class FiniteFloat(click.ParamType):
    """A finite number greater than 0 (click's FloatRange takes nan and inf, which no limit can be)."""

    name = "seconds"

    def convert(self, value, param, ctx):
        import math

        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"expected a number, got {show(value)}", param, ctx)
        if not math.isfinite(number) or number <= 0:
            self.fail(f"expected a finite number > 0, got {show(value)}", param, ctx)
        return number


def output_file(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """A click callback for an option that names a file azr writes: refused (exit 2) unless it is absent or a regular
    file (a link is resolved: the file it names is written, the link stays); a device, a FIFO or a folder is never
    written through or replaced."""
    from azr.logs import check_regular_file

    if value is not None:
        try:
            check_regular_file(value, "/".join(param.opts))
        except UserError as exc:
            raise click.BadParameter(str(exc).split(": ", 1)[1], param=param) from None
    return value


def output_folder(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """A click callback for an option that names a folder azr writes into: refused (exit 2) when something that is
    not a folder (a file, a device, a FIFO) is there already."""
    import os
    import stat

    if value is not None:
        try:
            mode = os.stat(value).st_mode
        except OSError:
            return value  # absent (made later), or unreadable: the command's own error names it
        if not stat.S_ISDIR(mode):
            raise click.BadParameter(f"{value} exists and is not a folder", param=param)
    return value


def require_config(config_path: Path | None) -> None:
    if config_path is None:
        raise ConfigError("--config: a recipe file is required (see examples/)")


# `--package NAME` of every command that runs programs: the one flag for `sandbox.packages`.
package_option = click.option(
    "--package",
    "packages",
    multiple=True,
    metavar="NAME",
    help="Offer this installed package to programs, as sandbox.packages does (repeatable).",
)


def sandbox_config(
    timeout: float | None, memory_mb: int | None, config_path: Path | None = None, overrides=(), **fields
):
    """The `sandbox:` section training uses (a SandboxConfig): the recipe's (--config, --set) or the defaults, with
    --timeout / --memory-mb and the other flags given (not None) on top."""
    from azr.config import SandboxConfig, check_packages, load_config

    if overrides and config_path is None:
        raise ConfigError("--set: needs --config")
    cfg = load_config(config_path, overrides, needs_model=False).sandbox if config_path else SandboxConfig()
    for name, value in fields.items():
        if value is not None and value != []:
            setattr(cfg, name, value)
    check_packages(cfg.packages)  # a user error, named before any task is read or any worker starts
    cfg.timeout_s = timeout or cfg.timeout_s
    cfg.memory_mb = memory_mb or cfg.memory_mb
    return cfg


MAX_INPUT_BYTES = ("AZR_MAX_INPUT_BYTES", 4 << 20)  # a program or a tests file given on the command line


def recipe_options(command):
    """--config FILE and --set KEY=VALUE: a recipe whose `sandbox:` section the command grades with."""
    command = click.option(
        "--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a recipe field (with --config)."
    )(command)
    return click.option(
        "--config",
        "config_path",
        type=click.Path(path_type=Path, dir_okay=False),
        help="A recipe whose sandbox: section applies (e.g. sandbox.provider: remote).",
    )(command)


def read_text(path: Path | str, flag: str) -> str:
    """A text file named by `flag` ('-': standard input), read up to its limit: `--code /dev/zero` is refused at
    4 MiB, not read until memory runs out."""
    from azr.inputs import env_limit, read_bounded_text, read_stream

    limit, what = env_limit(*MAX_INPUT_BYTES), f"{flag} {path}"
    how = f"the limit for a file given on the command line; {MAX_INPUT_BYTES[0]}=N raises it"
    try:
        if str(path) == "-":
            text = read_stream(sys.stdin.buffer, limit, what, how) if hasattr(sys.stdin, "buffer") else None
            return (
                text.decode("utf-8", errors="replace") if text is not None else read_stream(sys.stdin, limit, what, how)
            )
        return read_bounded_text(Path(path), limit, what, how)
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror or exc}", param_hint=flag) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="azr")
def azr() -> None:
    """azr: GRPO fine-tuning of code LLMs with rewards from unit tests run in a sandbox."""


def invoke(command: click.Command, prog_name: str, args: list[str] | None = None) -> int:
    """Run a Click command and turn every outcome into an exit code; user errors become one line on stderr."""
    for stream in (sys.stdout, sys.stderr):  # a lone surrogate in text from outside is printed escaped, not raised
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
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
    except click.exceptions.Abort:
        _error(prog_name, "aborted")
        return 130
    except KeyboardInterrupt:
        _error(prog_name, "interrupted")
        return 130
    except Exception as exc:
        code = outcome_code(exc)
        if code is None:  # a bug: its traceback is what helps
            raise
        line, _, tail = str(exc).partition("\n")
        if tail and _is_vllm_server_error(exc):  # one line, then the server's log tail as it was written
            _error(prog_name, line)
            click.echo(tail, err=True)
        else:
            _error(prog_name, str(exc))
        return code
    return result if isinstance(result, int) else 0


def outcome_code(exc: BaseException) -> int | None:
    """2 for a user error (bad input, or a sandbox backend that does not work here), 1 for something declared but
    unusable here, a sandbox that failed its own check or a vLLM server that would not serve; None for anything else
    (a bug)."""
    if isinstance(exc, UserError):
        return 2
    if isinstance(exc, NotAvailableError):
        return 1
    sandbox = sys.modules.get("azr.sandbox")  # only a command that imported the sandbox can raise its errors
    if sandbox is not None and isinstance(exc, sandbox.SandboxUnavailable):
        return 2
    if sandbox is not None and isinstance(exc, sandbox.SandboxUnhealthy):
        return 1
    if _is_vllm_server_error(exc):
        return 1
    return None


def _is_vllm_server_error(exc: BaseException) -> bool:
    serving = sys.modules.get("azr.serving.vllm")  # only a command that started a server can raise its errors
    return serving is not None and isinstance(exc, serving.VllmServerError)


def _error(prog_name: str, message: str) -> None:
    from azr.secrets import redact
    from azr.terminal import printable

    line = printable(" ".join(redact(message).split()))  # always one line, never a key, no control characters
    click.echo(f"{prog_name}: error: {line}", err=True)
