"""`azr eval`: pass@k of a model, an adapter or an endpoint, or of given samples; `--compare` of two reports."""

from __future__ import annotations

from pathlib import Path

import click

from azr.cli.app import FiniteFloat, azr, config_options, setup_logging


@azr.command("eval")
@config_options
@click.option("--model", "model_path", metavar="PATH", help="Local model directory or hub id to evaluate.")
@click.option(
    "--adapter", type=click.Path(path_type=Path), help="peft adapter folder (LoRA, IA³, LN tuning) on the model."
)
@click.option(
    "--vllm",
    is_flag=True,
    help="Sample the local model (its --adapter served as LoRA) through a vLLM server started for the evaluation, "
    "set up by the recipe's vllm: section [default: on when the recipe's vllm.mode is not off].",
)
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
    type=FiniteFloat(),
    default=120.0,
    show_default=True,
    help="Seconds per endpoint request.",
)
@click.option("--max-retries", type=click.IntRange(min=0), default=4, show_default=True, help="Retries per request.")
@click.option(
    "--dataset",
    metavar="held-out|humaneval|output-prediction|PATH",
    help="Tasks to evaluate on; output-prediction: program + input -> output on held-out programs "
    "(output-prediction:FILE for a triplet file of one's own).",
)
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
        from azr.evaluation import compare_reports, print_comparison

        print_comparison(*compare, compare_reports(*compare))
        return 0
    from azr.evaluation import eval_config_from_flags, run_eval

    cfg = eval_config_from_flags(**flags)
    setup_logging()
    return run_eval(cfg)
