"""`azr eval`: pass@k of a model, an adapter or an endpoint, or of given samples; `--compare` of two reports.

Each flag is a field of `azr.config.EvalCommandConfig`, the one home of its help and default: `--help` reads them
from there when it is shown, so `azr --help` still imports nothing but Click.
"""

from __future__ import annotations

from pathlib import Path

import click

from azr.cli.app import FiniteFloat, azr, config_options, output_folder, setup_logging


class FieldOption(click.Option):
    """A flag documented by its field of EvalCommandConfig (help and default), read when `--help` is shown."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        if not self.help:
            from azr.config import eval_flag_help

            self.help = eval_flag_help(self.name)
        return super().get_help_record(ctx)


def flag(*decls: str, **kwargs):
    return click.option(*decls, cls=FieldOption, **kwargs)


@azr.command("eval")
@config_options
@flag("--model", "model_path", metavar="PATH")
@flag("--adapter", type=click.Path(path_type=Path))
@flag("--vllm", is_flag=True)
@flag("--quantization", type=click.Choice(["none", "4bit", "8bit"]))
@flag("--endpoint", metavar="URL")
@flag("--endpoint-model", metavar="NAME")
@flag("--api", type=click.Choice(["chat", "completions"]))
@flag("--api-key-env", metavar="NAME")
@flag("--concurrency", type=click.IntRange(min=1))
@flag("--timeout", type=FiniteFloat())
@flag("--max-retries", type=click.IntRange(min=0))
@flag("--dataset", metavar="held-out|humaneval|output-prediction|PATH")
@flag("--format", "format", metavar="NAME")
@flag("--column-map", "column_map", multiple=True, metavar="FIELD=COLUMN")
@flag("--checker", type=click.Path(path_type=Path))
@flag("--samples", type=click.Path(path_type=Path))
@flag("--turns", type=click.IntRange(min=1))
@flag("--public-tests", "public_tests", type=click.IntRange(min=0))
@flag("-k", "ks", metavar="K[,K...]")
@flag("-n", "num_samples", type=click.IntRange(min=1))
@flag("--temperature", type=click.FloatRange(min=0))
@flag("--top-p", type=click.FloatRange(0, 1, min_open=True))
@flag("--seed", type=int)
@flag("--max-new-tokens", type=click.IntRange(min=1))
@flag("--batch-size", type=click.IntRange(min=1))
@flag("--answer-format", type=click.Choice(["strict", "relaxed"]))
@flag("--workers", type=click.IntRange(min=1))
@flag("--output-dir", type=click.Path(path_type=Path), callback=output_folder)
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
        from azr.evaluation import compare_reports, print_comparison

        print_comparison(*compare, compare_reports(*compare))
        return 0
    from azr.evaluation import eval_config_from_flags, run_eval

    cfg = eval_config_from_flags(**flags)
    setup_logging()
    return run_eval(cfg)
