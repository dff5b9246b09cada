"""`azr eval`'s settings as a section: one field per flag, each with its default, bounds and `help` string.

The flags' help (`azr eval --help`) and the table in docs/evaluation.md are generated from these fields, and the
flags are built into this section by the schema (types, bounds, one-line errors) before anything is loaded. Which
flags go together (one source of samples, --endpoint-model with --endpoint, ...) is checked here too.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Literal

from azr.config.schema import build, field
from azr.config.sections import DataFormat
from azr.errors import ConfigError, show

MAX_K = 1024  # the ceiling of -n (EvalCommandConfig.num_samples), which defaults to the largest k


@dataclass
class EvalCommandConfig:
    model_path: str | None = field(None, "Local model directory or hub id to evaluate (--model).")
    adapter: str | None = field(None, "peft adapter folder (LoRA, IA³, LN tuning) on the model.")
    vllm: bool = field(
        False,
        "Sample the local model (its --adapter served as LoRA) through a vLLM server started for the evaluation, "
        "set up by the recipe's vllm: section; on by itself when the recipe's vllm.mode is not off.",
    )
    quantization: Literal["none", "4bit", "8bit"] | None = field(
        None, "Load the model with bitsandbytes; unset, the recipe's model.quantization (none without a recipe)."
    )
    endpoint: str | None = field(None, "OpenAI-compatible base URL to evaluate instead of a local model.")
    endpoint_model: str | None = field(None, "Model name at --endpoint.")
    api: Literal["chat", "completions"] = field(
        "chat", "Endpoint API: chat messages, or the raw prompt to /completions (HumanEval's own prompt)."
    )
    api_key_env: str | None = field(None, "Environment variable that holds the endpoint's API key (never the key).")
    concurrency: int = field(8, "Endpoint requests in flight at once.", ge=1, le=1024)
    timeout: float = field(120.0, "Seconds per endpoint request.", gt=0, le=86_400)
    max_retries: int = field(4, "Retries per endpoint request (429, 5xx, timeouts), with backoff.", ge=0, le=100)
    dataset: str | None = field(
        None,
        "Tasks to evaluate on: held-out (or another shipped split), humaneval, output-prediction (program + input "
        "-> output on held-out programs; output-prediction:FILE for a triplet file of one's own), or a task file.",
    )
    format: DataFormat | None = field(
        None,
        "The task file's own row shape (mbpp, mbpp+, humaneval+, livecodebench, kodcode, bigcodebench, ...; "
        "docs/data.md) instead of azr's fields.",
    )
    column_map: list[str] | None = field(
        None, "FIELD=COLUMN pairs mapping task fields to the task file's columns (repeatable)."
    )
    checker: str | None = field(
        None,
        "A Python file defining check(input, expected, output) -> bool, or a testlib-style program (argv: input, "
        "output, answer files; exit 0 accepts): the special judge of every task's stdin/stdout cases that has none "
        "of its own (run in the sandbox).",
    )
    samples: str | None = field(None, "Score the completions in this file instead of generating.")
    turns: int | None = field(
        None,
        "Attempts per sample with execution feedback (LiveCodeBench's self-repair): a program that fails a public "
        "test gets the failures (the recipe's feedback: section) as a new message and tries again; each turn is "
        "scored on the hidden tests and pass@1 is reported after each. Chat only; unset, the recipe's eval.turns, "
        "else 1 (one attempt on all tests).",
        ge=1,
        le=32,
    )
    public_tests: int | None = field(
        None,
        "How many leading tests of each task are public (shown as feedback); unset, the recipe's data.public_tests, "
        "else the data set's own split.",
        ge=0,
        le=1_000_000,
    )
    ks: str = field("1", "Comma-separated k values for pass@k (-k).")
    num_samples: int | None = field(None, "Samples per problem (-n); unset, the largest k.", ge=1, le=MAX_K)
    temperature: float = field(0.8, "Sampling temperature; 0 is greedy.", ge=0, le=10)
    top_p: float = field(1.0, "Nucleus sampling threshold.", gt=0, le=1)
    seed: int | None = field(
        None,
        "Sampling seed (each sample gets its own from seed, problem and index); unset, the recipe's seed, else 0.",
        ge=0,
        le=2**32 - 1,
    )
    max_new_tokens: int = field(1024, "Most tokens generated per sample.", ge=1, le=1 << 20)
    batch_size: int = field(32, "Prompts per generate call of a local model.", ge=1, le=4096)
    answer_format: Literal["strict", "relaxed"] | None = field(
        None,
        "How answers are read; unset, the recipe's answer_format, else relaxed (the last fenced block that defines a "
        "function or class).",
    )
    workers: int | None = field(
        None, "Sandbox workers; unset, the recipe's sandbox.workers (one per core).", ge=1, le=1024
    )
    output_dir: str | None = field(
        None,
        "Folder for report.json and samples.jsonl: new, empty, or an earlier evaluation (a re-run into it resumes); "
        "unset, runs/eval-<time>.",
    )


def eval_command_config(flags: dict[str, Any], recipe: bool = False, overrides: bool = False) -> EvalCommandConfig:
    """The section from `azr eval`'s flags (a None flag keeps the field's default), and the flags that go together
    (`recipe`: --config was given; `overrides`: --set was); ConfigError names the field or flag."""
    given = {name: str(value) if hasattr(value, "__fspath__") else value for name, value in flags.items()}
    given = {name: list(value) or None if isinstance(value, tuple) else value for name, value in given.items()}
    opt = build(EvalCommandConfig, {k: v for k, v in given.items() if v is not None}, "eval")
    check_eval_flags(opt, recipe, overrides)
    return opt


def check_eval_flags(opt: EvalCommandConfig, recipe: bool, overrides: bool) -> None:
    """One source of samples (a recipe, a model, an endpoint or a samples file), and each flag with what it needs."""
    sources = sum((recipe, opt.model_path is not None, opt.endpoint is not None))
    if sources > 1 or (not sources and opt.samples is None):
        raise ConfigError("eval: give exactly one of --config, --model or --endpoint (none with --samples)")
    if opt.samples is not None and (opt.model_path or opt.endpoint):
        raise ConfigError("--samples: scores given completions; leave out --model and --endpoint")
    if opt.endpoint and not opt.endpoint_model:
        raise ConfigError("--endpoint-model: required with --endpoint")
    if (opt.adapter or opt.quantization) and not (opt.model_path or recipe):
        raise ConfigError(
            f"--{'adapter' if opt.adapter else 'quantization'}: needs --model or --config (a local model)"
        )
    if opt.vllm and not (opt.model_path or recipe):
        raise ConfigError("--vllm: serves a local model; give --model or --config")
    if overrides and not recipe:
        raise ConfigError("--set: needs --config")
    if opt.samples is not None and opt.num_samples is not None:
        raise ConfigError("-n: not used with --samples (the file gives the samples)")
    if opt.turns is not None and opt.turns > 1:
        if opt.samples is not None:
            raise ConfigError("--turns: generates each turn from the feedback; not with --samples")
        if opt.api == "completions":
            raise ConfigError("--turns: the feedback is a chat message; it needs --api chat")
    if not opt.dataset:
        raise ConfigError("--dataset: required (held-out, humaneval, output-prediction or a task file)")


def parse_ks(text: str) -> list[int]:
    """-k's comma-separated values, sorted and distinct; each at most MAX_K, as -n is."""
    try:
        ks = sorted({int(k) for k in text.split(",") if k.strip()})
    except ValueError:
        raise ConfigError(f"-k: expected comma-separated integers, got {show(text)}") from None
    if not ks or ks[0] < 1:
        raise ConfigError(f"-k: expected positive integers, got {show(text)}")
    if ks[-1] > MAX_K:  # unset, -n is the largest k: samples per problem
        raise ConfigError(f"-k: must be <= {MAX_K:,} (as -n is), got {ks[-1]}")
    return ks


def eval_flag_help(name: str) -> str:
    """The help of field `name`, with its default where it has one: what `azr eval --help` prints for its flag."""
    spec = {f.name: f for f in dataclasses.fields(EvalCommandConfig)}[name]
    default = spec.default
    shown = "" if default is None or default is False else f" [default: {json.dumps(default).strip(chr(34))}]"
    return spec.metadata["help"] + shown
