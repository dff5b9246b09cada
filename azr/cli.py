"""Command line: the `azr` Click group and the azr-train / azr-eval / azr-gen entry points.

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
from azr.config import AzrConfig, ConfigError, SandboxConfig, dump_yaml, load_config
from azr.data import DataError
from azr.sandbox.backends import SandboxUnavailable, SandboxUnhealthy
from azr.schema import NotAvailableError, fields_markdown, parse_pairs

USER_ERRORS = (ConfigError, DataError, SandboxUnavailable)


def _setup_logging(level: str = "info") -> None:
    logging.basicConfig(level=level.upper(), format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def _config_options(fn):
    fn = click.option(
        "--set",
        "overrides",
        multiple=True,
        metavar="KEY=VALUE",
        help="Override a config field, e.g. --set model.lora.r=8 (repeatable).",
    )(fn)
    return click.option(
        "--config", "config_path", type=click.Path(path_type=Path), metavar="FILE", help="Recipe in YAML or JSON."
    )(fn)


def _require_config(config_path: Path | None) -> None:
    if config_path is None:
        raise ConfigError("--config: a recipe file is required (see examples/)")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="azr")
def azr() -> None:
    """azr: GRPO fine-tuning of code LLMs with rewards from unit tests run in a sandbox."""


# ------------------------------------------------------------------------------------------------------------ train
@azr.command()
@_config_options
@click.option("--output-dir", type=click.Path(path_type=Path), help="Where outputs go (overrides output_dir).")
@click.option("--max-steps", type=click.IntRange(min=1), help="Stop after N optimizer steps (grpo.max_steps).")
@click.option("--resume-from", metavar="latest|DIR", help="Continue from the latest checkpoint or a checkpoint DIR.")
def train(config_path, overrides, output_dir, max_steps, resume_from) -> int:
    """Train a policy with GRPO on coding tasks (azr-train)."""
    _require_config(config_path)
    extra = list(overrides)
    if output_dir is not None:
        extra.append(f"output_dir={output_dir}")
    if max_steps is not None:
        extra.append(f"grpo.max_steps={max_steps}")
    cfg = load_config(config_path, extra, check_grpo=True)
    _setup_logging(cfg.logging.level)
    from azr.train import run_train

    return run_train(cfg, resume_from=resume_from)


# ------------------------------------------------------------------------------------------------------------- eval
@azr.command("eval")
@_config_options
@click.option("--model", "model_path", metavar="PATH", help="Local model directory or hub id to evaluate.")
@click.option("--adapter", type=click.Path(path_type=Path), help="peft (LoRA) adapter directory on top of the model.")
@click.option("--quantization", type=click.Choice(["none", "4bit", "8bit"]), help="Load the model with bitsandbytes.")
@click.option("--endpoint", metavar="URL", help="OpenAI-compatible base URL to evaluate instead of a local model.")
@click.option("--endpoint-model", metavar="NAME", help="Model name at --endpoint.")
@click.option(
    "--api", type=click.Choice(["chat", "completions"]), default="chat", show_default=True, help="Endpoint API."
)
@click.option("--api-key-env", metavar="NAME", help="Environment variable that holds the endpoint's API key.")
@click.option("--concurrency", type=click.IntRange(min=1), default=8, show_default=True, help="Requests in flight.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=120.0,
    show_default=True,
    help="Seconds per endpoint request.",
)
@click.option("--max-retries", type=click.IntRange(min=0), default=4, show_default=True, help="Retries per request.")
@click.option("--dataset", metavar="held-out|humaneval|PATH", help="Tasks to evaluate on.")
@click.option("--samples", type=click.Path(path_type=Path), help="Score these completions instead of generating.")
@click.option("-k", "ks", default="1", show_default=True, help="Comma-separated k values for pass@k.")
@click.option("-n", "num_samples", type=click.IntRange(min=1), help="Samples per problem (default: the largest k).")
@click.option("--temperature", type=click.FloatRange(min=0), default=0.8, show_default=True, help="0 is greedy.")
@click.option(
    "--top-p", type=click.FloatRange(0, 1, min_open=True), default=1.0, show_default=True, help="Nucleus sampling."
)
@click.option("--seed", type=int, help="Sampling seed [default: the recipe's seed, else 0].")
@click.option("--max-new-tokens", type=click.IntRange(min=1), default=1024, show_default=True, help="Per sample.")
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True, help="Local model batch.")
@click.option("--answer-format", type=click.Choice(["strict", "relaxed"]), help="How answers are read [relaxed].")
@click.option("--workers", type=click.IntRange(min=1), help="Sandbox workers (default: CPU cores).")
@click.option("--output-dir", type=click.Path(path_type=Path), help="Report and samples [runs/eval-<time>].")
@click.option(
    "--compare",
    nargs=2,
    type=click.Path(path_type=Path),
    metavar="A.json B.json",
    help="Compare two reports (B - A per pass@k, paired bootstrap 95% CI) and exit.",
)
def eval_(compare, **flags) -> int:
    """Measure pass@k of a model, an adapter or an endpoint, or score given samples (azr-eval)."""
    if compare:
        from azr.eval_report import compare_reports, print_comparison

        print_comparison(*compare, compare_reports(*compare))
        return 0
    from azr.evaluate import eval_config_from_flags, run_eval

    cfg = eval_config_from_flags(**flags)
    _setup_logging()
    return run_eval(cfg)


# -------------------------------------------------------------------------------------------------------------- gen
@azr.command()
@_config_options
@click.option("--out", required=True, type=click.Path(path_type=Path), help="JSONL file the rollouts go to.")
def gen(config_path, overrides, out) -> int:
    """Collect tool-using rollouts for SFT (azr-gen)."""
    _require_config(config_path)
    load_config(config_path, overrides)
    raise NotAvailableError("azr gen: rollout generation is not in this version yet (it comes with the tools issue)")


# ---------------------------------------------------------------------------------------------------------- sandbox
@azr.group()
def sandbox() -> None:
    """Run untrusted code under the sandbox, and check the sandbox itself."""


_BACKEND = click.Choice(["auto", "bwrap", "nsjail", "process"])


@sandbox.command("run")
@click.option("--code", "code_path", metavar="FILE|-", required=True, help="Program to run ('-' for stdin).")
@click.option("--test", "tests", multiple=True, metavar="STMT", help="A test statement, e.g. 'assert f(1) == 2'.")
@click.option("--tests-file", type=click.Path(path_type=Path), help="File with one test statement per line.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), help="Wall-clock limit in seconds.")
@click.option("--memory-mb", type=click.IntRange(min=1), help="Address-space limit in MiB.")
@click.option("--backend", type=_BACKEND, default="auto", show_default=True, help="Sandbox backend.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the result.")
def sandbox_run(code_path, tests, tests_file, timeout, memory_mb, backend, as_json) -> int:
    """Run one program (and optional tests) in the sandbox; exit 0 when it passes, 1 when it does not."""
    import json

    from azr.grading import run_program

    code = sys.stdin.read() if code_path == "-" else _read_text(Path(code_path), "--code")
    all_tests = list(tests)
    if tests_file is not None:
        lines = _read_text(tests_file, "--tests-file").splitlines()
        all_tests += [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    cfg = _sandbox_config(timeout, memory_mb, backend=backend, workers=1)
    outcome = run_program(code, all_tests, cfg)
    if as_json:
        click.echo(json.dumps(outcome))
    else:
        tests_line = f", {outcome['tests_passed']}/{outcome['tests_total']} tests" if all_tests else ""
        click.echo(f"{outcome['status']}{tests_line} in {outcome['duration_s']:.3f} s ({outcome['backend']})")
        for name in ("stdout", "stderr"):
            if outcome[name]:
                click.echo(f"--- {name}\n{outcome[name].rstrip()}")
    return 0 if outcome["passed"] else 1


def _sandbox_config(timeout: float | None, memory_mb: int | None, **fields):
    """The `sandbox:` defaults training uses, with --timeout / --memory-mb where given."""
    cfg = SandboxConfig(**fields)
    cfg.timeout_s = timeout or cfg.timeout_s
    cfg.memory_mb = memory_mb or cfg.memory_mb
    return cfg


def _read_text(path: Path, flag: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"cannot read {path}: {exc}", param_hint=flag) from None


@sandbox.command("doctor")
@click.option("--backend", type=_BACKEND, default="auto", show_default=True, help="Sandbox backend to check.")
def sandbox_doctor(backend) -> int:
    """Show the active backend and self-test each isolation guarantee; exit 1 when one fails."""
    from azr.grading import verdict_check
    from azr.sandbox import open_pool
    from azr.sandbox.doctor import run_doctor

    _setup_logging()
    with open_pool(backend, workers=1) as pool:
        click.echo(f"backend: {pool.backend.name} ({' '.join(pool.backend.prefix[:1]) or 'no namespaces'})")
        checks = [*run_doctor(pool), verdict_check(pool)]
    width = max(len(c.guarantee) for c in checks)
    for check in checks:
        click.echo(f"{'PASS' if check.ok else 'FAIL'}  {check.guarantee:<{width}}  {check.detail}")
    failed = [c for c in checks if not c.ok]
    click.echo(f"{len(checks) - len(failed)} of {len(checks)} guarantees hold")
    return 1 if failed else 0


# ------------------------------------------------------------------------------------------------------------- data
@azr.group()
def data() -> None:
    """Inspect and check task datasets."""


@data.command("validate")
@click.argument("source", metavar="PATH")
@click.option("--column-map", multiple=True, metavar="FIELD=COLUMN", help="Map a task field to a column (repeatable).")
@click.option("--workers", type=click.IntRange(min=1), help="Programs run in parallel (default: CPU cores).")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds per task that sets none [default: sandbox.timeout_s].",
)
@click.option(
    "--memory-mb", type=click.IntRange(min=1), help="MiB per task that sets none [default: sandbox.memory_mb]."
)
def data_validate(source, column_map, workers, timeout, memory_mb) -> int:
    """Run every reference solution in PATH (a task file or 'train' / 'held-out') against its tests, in the
    sandbox with the limits training applies, so what passes here passes there."""
    from azr.data import load_tasks, near_duplicates
    from azr.grading import limits_from_config, pool_from_config, validate_references

    mapping = dict(parse_pairs(column_map, "--column-map", "FIELD=COLUMN"))
    tasks = load_tasks(source, mapping)
    cfg = _sandbox_config(timeout, memory_mb, workers=workers)
    results = validate_references(tasks, pool_from_config(cfg), limits_from_config(cfg))
    failed = [(t, g) for t, g in results if g is not None and not g.passed]
    missing = sum(g is None for _, g in results)
    for task, grade in failed:
        click.echo(
            f"FAIL {task.id}: {grade.status}, {grade.tests_passed}/{grade.tests_total} tests passed; "
            f"{'; '.join(grade.failures)[:400]}"
        )
    for a, b, score in near_duplicates(tasks):
        click.echo(f"WARN near-duplicate prompts: {a.id} ~ {b.id} (similarity {score:.2f})")
    click.echo(
        f"{source}: {len(tasks)} tasks, {len(tasks) - missing - len(failed)} passed, {len(failed)} failed, "
        f"{missing} without a reference solution"
    )
    return 1 if failed else 0


# ------------------------------------------------------------------------------------------------------- tiny-model
@azr.command("tiny-model")
@click.argument("out_dir", type=click.Path(path_type=Path))
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Weights seed; the same seed gives the same files."
)
def tiny_model(out_dir, seed) -> int:
    """Build the tiny random-init model (Qwen2, ~1 M parameters) used by tests and the CPU demo."""
    from azr.modeling import build_tiny_model

    path = build_tiny_model(out_dir, seed=seed)
    click.echo(f"tiny model written to {path}")
    return 0


# ----------------------------------------------------------------------------------------------------------- config
@azr.group("config")
def config_group() -> None:
    """Show the config schema and resolved recipes."""


@config_group.command("fields")
def config_fields() -> int:
    """Print every config field with its type, default and help, as a Markdown table."""
    click.echo(fields_markdown(AzrConfig))
    return 0


@config_group.command("show")
@_config_options
def config_show(config_path, overrides) -> int:
    """Print the resolved config (defaults, file, overrides; legacy schema converted) as YAML."""
    click.echo(dump_yaml(load_config(config_path, overrides, check_grpo=True)), nl=False)
    return 0


# ------------------------------------------------------------------------------------------------------ entry points
def _invoke(command: click.Command, prog_name: str, args: list[str] | None = None) -> int:
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


def main() -> None:
    sys.exit(_invoke(azr, "azr"))


def train_main() -> None:
    sys.exit(_invoke(train, "azr-train"))


def eval_main() -> None:
    sys.exit(_invoke(eval_, "azr-eval"))


def gen_main() -> None:
    sys.exit(_invoke(gen, "azr-gen"))
