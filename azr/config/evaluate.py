"""`azr eval`'s settings as a section: one field per flag, each with its default, bounds and `help` string.

The flags' help (`azr eval --help`) and the table in docs/evaluation.md are generated from these fields, and the
flags are built into this section by the schema (types, bounds, one-line errors) before anything is loaded. Which
flags go together (one source of samples, --endpoint-model with --endpoint, ...) is `azr.evaluation`'s to check.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Literal

from azr.config.schema import build, field
from azr.config.sections import DataFormat


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
    ks: str = field("1", "Comma-separated k values for pass@k (-k).")
    num_samples: int | None = field(None, "Samples per problem (-n); unset, the largest k.", ge=1, le=1024)
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
        None, "How answers are read; unset, the recipe's answer_format, else relaxed (the last fenced block)."
    )
    workers: int | None = field(
        None, "Sandbox workers; unset, the recipe's sandbox.workers (one per core).", ge=1, le=1024
    )
    output_dir: str | None = field(
        None,
        "Folder for report.json and samples.jsonl: new, empty, or an earlier evaluation (a re-run into it resumes); "
        "unset, runs/eval-<time>.",
    )


def eval_command_config(flags: dict[str, Any]) -> EvalCommandConfig:
    """The section from `azr eval`'s flags (a None flag keeps the field's default); ConfigError names the field."""
    given = {name: str(value) if hasattr(value, "__fspath__") else value for name, value in flags.items()}
    given = {name: list(value) or None if isinstance(value, tuple) else value for name, value in given.items()}
    return build(EvalCommandConfig, {k: v for k, v in given.items() if v is not None}, "eval")


def eval_flag_help(name: str) -> str:
    """The help of field `name`, with its default where it has one: what `azr eval --help` prints for its flag."""
    spec = {f.name: f for f in dataclasses.fields(EvalCommandConfig)}[name]
    default = spec.default
    shown = "" if default is None or default is False else f" [default: {json.dumps(default).strip(chr(34))}]"
    return spec.metadata["help"] + shown
