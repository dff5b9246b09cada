"""Run configuration: one dataclass per section, loaded from YAML/JSON, overridden by `--set a.b=c`, validated.

Owns the schema (each field's `help` is its only documentation), path resolution relative to the config file,
the legacy `azr:` schema, and saving the resolved config. Generic coercion lives in `azr.schema`. Nothing here
imports torch/transformers/trl at module level; `grpo:` keys are checked against TRL's `GRPOConfig` only when the
caller asks (`check_grpo=True`, done by `azr train`), because importing TRL takes seconds.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from azr.data import SPLITS
from azr.legacy import normalise_legacy
from azr.logs import atomic_write_text
from azr.schema import (
    ConfigError,
    build,
    check_passthrough,
    field,
    load_raw,
    parse_pairs,
    set_dotted,
)

log = logging.getLogger(__name__)

# Trainer fields that azr sets from its own fields, so each has one source of truth.
MANAGED_TRAINER_FIELDS = {
    "output_dir": "output_dir",
    "seed": "seed",
    "gradient_checkpointing": "model.gradient_checkpointing",
    "activation_checkpointing": "model.gradient_checkpointing",  # transformers 5's name for the same switch
}
# Fields that may hold a local path, each with the test of whether its value is one (vs a hub id, a split name).
PATH_FIELDS: dict[str, typing.Callable[[str, Path], bool]] = {
    "output_dir": lambda value, base: True,
    "model.name_or_path": lambda value, base: value.startswith((".", "/", "~")) or (base / value).exists(),
    "data.train": lambda value, base: value not in SPLITS,
    "data.eval": lambda value, base: value not in SPLITS,
    "vllm.python": lambda value, base: "/" in value,
}


@dataclass
class LoraConfig:
    enabled: bool = field(True, "Train LoRA adapters (peft) instead of all weights.")
    r: int = field(16, "LoRA rank.", gt=0)
    alpha: int = field(32, "LoRA alpha; the update is scaled by alpha / r.", gt=0)
    dropout: float = field(0.05, "Dropout on the LoRA branch.", ge=0, le=1)
    target_modules: str | list[str] = field(
        "all-linear", "Modules to adapt: a list of module names, or 'all-linear' for every linear layer but the head."
    )


@dataclass
class ModelConfig:
    name_or_path: str = field(
        "",
        "Hub id (e.g. Qwen/Qwen2.5-Coder-7B-Instruct) or local directory; a path starting with ./ ../ / or ~, "
        "or one that exists beside the config file, is resolved relative to the config file.",
    )
    revision: str | None = field(None, "Hub revision (branch, tag or commit) to load.")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = field(
        "auto", "Weight dtype; 'auto' is bfloat16 on a GPU that supports it and float32 on CPU."
    )
    backend: Literal["hf", "unsloth"] = field(
        "hf", "Model loader: transformers ('hf') or unsloth (GPU, optional extra)."
    )
    quantization: Literal["none", "4bit", "8bit"] = field("none", "Load the base model quantized with bitsandbytes.")
    trust_remote_code: bool = field(False, "Allow model code from the hub repository to run (transformers flag).")
    attn_implementation: str | None = field(
        None, "Attention kernel, e.g. 'sdpa' or 'flash_attention_2'; default lets transformers choose."
    )
    gradient_checkpointing: bool = field(True, "Recompute activations in the backward pass to save memory.")
    lora: LoraConfig = field(factory=LoraConfig, help="LoRA adapter settings.")


@dataclass
class DataConfig:
    train: str = field(
        "train",
        "Training tasks: a shipped split ('train', 'held-out') or a path to a .jsonl, .json or "
        ".parquet file (relative to the config file).",
    )
    eval: str | None = field("held-out", "Evaluation tasks, same forms as 'train'; null for none.")
    column_map: dict[str, str] = field(
        factory=dict,
        help="Task field -> column in the training file, e.g. {prompt: text, solution: code, tests: test_list} "
        "for MBPP-style data; unmapped columns are ignored.",
    )
    eval_column_map: dict[str, str] = field(factory=dict, help="Like column_map, for the evaluation file.")
    max_tasks: int | None = field(None, "Use at most this many training tasks (after shuffling); null for all.", gt=0)
    shuffle: bool = field(True, "Shuffle the training tasks with the run's seed.")
    max_solution_tokens: int | None = field(
        None,
        "Keep only training tasks whose reference answer fits in this many policy tokens (before max_tasks); "
        "null keeps all. For small models with short completion budgets.",
        gt=0,
    )


@dataclass
class SandboxConfig:
    backend: Literal["auto", "bwrap", "nsjail", "process"] = field(
        "auto",
        "Isolation for model code: 'auto' picks the strongest that works (bwrap, then nsjail); 'process' has "
        "no namespaces and is used only when chosen or when nothing else works.",
    )
    workers: int | None = field(None, "Sandbox worker processes; null for one per CPU core.", gt=0)
    timeout_s: float = field(
        5.0, "Default wall-clock limit for one program with its tests (a task may set its own).", gt=0
    )
    memory_mb: int = field(512, "Default address-space limit for one program, in MiB (a task may set its own).", gt=0)
    max_output_kb: int = field(64, "Cap on captured stdout and stderr, each, in KiB.", gt=0)
    processes: int = field(32, "Most processes and threads one program may run at once.", gt=0)
    open_files: int = field(64, "Most file descriptors one program may hold open.", gt=0)
    file_size_mb: int = field(16, "Largest file one program may write, in MiB.", gt=0)
    tmp_size_mb: int = field(256, "Size of each worker's private /tmp (bwrap, nsjail), in MiB.", gt=0)
    max_infra_failure_rate: float = field(
        0.05,
        "Stop the run when more than this fraction of a step's executions fail for infrastructure reasons.",
        ge=0,
        le=1,
    )


@dataclass
class RewardSpec:
    name: str = field(
        "", "Reward function: a registered name (e.g. 'tests', 'format') or a dotted path 'pkg.mod:func'."
    )
    weight: float = field(1.0, "Weight of this reward in the weighted sum.")
    params: dict[str, Any] = field(factory=dict, help="Keyword arguments for a parametrised reward.")


def _default_rewards() -> list[RewardSpec]:
    return [RewardSpec("tests", 1.0), RewardSpec("format", 0.1)]


@dataclass
class EndpointConfig:
    """Fields shared by the remote models (opponent, teacher)."""

    enabled: bool = field(False, "Use this remote model.")
    api: Literal["chat", "responses"] = field(
        "chat", "Chat Completions (any OpenAI-compatible server) or OpenAI Responses."
    )
    base_url: str = field("", "API base URL, e.g. https://api.together.xyz/v1 or http://127.0.0.1:8000/v1.")
    model: str = field("", "Model name at the endpoint.")
    api_key_env: str | None = field(None, "Name of the environment variable holding the API key (never the key).")
    max_tokens: int = field(4096, "Completion token budget; large enough for the answer after any reasoning.", gt=0)
    temperature: float = field(0.7, "Sampling temperature.", ge=0)
    top_p: float = field(1.0, "Nucleus sampling threshold.", gt=0, le=1)
    timeout_s: float = field(120.0, "Per-request timeout.", gt=0)
    max_retries: int = field(4, "Retries on 429/5xx/timeouts, with exponential backoff and jitter.", ge=0)
    concurrency: int = field(8, "Requests in flight at once.", gt=0)
    reasoning_effort: Literal["low", "medium", "high"] | None = field(None, "Reasoning effort for models that take it.")
    extra_body: dict[str, Any] = field(
        factory=dict, help="Extra JSON fields sent with every request (provider options)."
    )
    price_in_per_mtok: float = field(0.0, "USD per million prompt tokens, for the cost in usage logs (0: none).", ge=0)
    price_out_per_mtok: float = field(0.0, "USD per million completion tokens (reasoning included).", ge=0)


@dataclass
class SelfPlayConfig(EndpointConfig):
    weight: float = field(0.3, "w in the blended reward (1 - w) * base + w * self-play.", ge=0, le=1)
    scoreboard_every: int = field(
        10, "Write scoreboard.json and frontier.json into output_dir every this many steps, and at the end.", gt=0
    )
    max_wait_s: float | None = field(
        None,
        "Longest wait for a batch's opponent after the policy has generated; late tasks count unavailable "
        "(null: wait; timeout_s and max_retries bound it).",
        gt=0,
    )


@dataclass
class TeacherConfig(EndpointConfig):
    pass


@dataclass
class TeacherAssistConfig:
    enabled: bool = field(
        False, "Ask the teacher for hints on tasks the policy failed; needs teacher and self_play enabled."
    )
    hint_prob_neither: float = field(0.5, "Chance of a hint when both policy and opponent failed a task.", ge=0, le=1)
    hint_prob_opponent_only: float = field(0.5, "Chance of a hint when only the opponent solved a task.", ge=0, le=1)
    max_hint_chars: int = field(600, "Hints are cut to this many characters (after removing code).", gt=0)
    solution_prob: float = field(0.0, "Chance of also asking for a full solution, saved to the SFT buffer.", ge=0, le=1)
    sft_buffer: str = field("teacher_solutions.jsonl", "SFT buffer file for teacher solutions, relative to output_dir.")
    hint_share: float = field(
        0.25, "Most share of a batch's prompt groups (rounded down) replaced by hinted retries, each whole.", ge=0, le=1
    )


@dataclass
class CurriculumConfig:
    replay: bool = field(
        False,
        "Mix frontier tasks (neither / opponent-only, not solved since) back into training, as whole prompt groups. "
        "Needs self_play.enabled.",
    )
    replay_rate: float = field(
        0.25, "Share of a generation batch's prompt groups (rounded down) given to frontier replay.", ge=0, le=1
    )


@dataclass
class ThinkingConfig:
    policy: bool = field(False, "Let the policy think: passes enable_thinking to its chat template.")
    policy_budget_tokens: int = field(0, "Tokens added to the completion length for the policy's thinking.", ge=0)
    opponent: bool = field(False, "Ask the opponent to reason before answering (where its API supports it).")
    opponent_budget_tokens: int = field(0, "Tokens added to the opponent's max_tokens for reasoning.", ge=0)
    teacher: bool = field(False, "Ask the teacher to reason before answering (where its API supports it).")
    teacher_budget_tokens: int = field(0, "Tokens added to the teacher's max_tokens for reasoning.", ge=0)


@dataclass
class VllmConfig:
    sidecar: bool = field(
        False,
        "Launch a vLLM server beside the trainer and generate with it (TRL server mode). Not in this version yet: "
        "azr-train stops with exit 1; TRL's own use_vllm / vllm_mode settings under grpo: work meanwhile.",
    )
    python: str | None = field(None, "Python interpreter of the vLLM environment; null for the trainer's own.")
    host: str = field("127.0.0.1", "Address the sidecar listens on.")
    port: int = field(8000, "Port the sidecar listens on.", gt=0, le=65535)
    gpu_memory_utilization: float = field(0.85, "Fraction of the sidecar GPU's memory vLLM may use.", gt=0, le=1)
    tensor_parallel_size: int = field(1, "GPUs the sidecar shards the model over.", gt=0)
    max_model_len: int | None = field(None, "Context length for the sidecar; null for the model's own.", gt=0)
    startup_timeout_s: float = field(600.0, "How long to wait for the sidecar's health check.", gt=0)
    extra_args: list[str] = field(factory=list, help="Extra command-line arguments for the vLLM server.")


@dataclass
class SftConfig:
    enabled: bool = field(
        False,
        "Warm start: supervised fine-tuning on the training tasks' reference answers before GRPO (the same LoRA "
        "adapter, or all weights, then continues under GRPO).",
    )
    args: dict[str, Any] = field(
        factory=dict, help="Any trl.SFTConfig field (num_train_epochs, learning_rate, ...), passed through."
    )
    near_misses: int = field(
        0,
        "Per task, this many variants of the reference answer with one operator, keyword or constant changed, each "
        "checked to fail the tests, are learned beside it: a policy that knows the answer's shape but not which way "
        "a few decisions go, for GRPO to sharpen (the tiny demo's weak base model). 0 for real models.",
        ge=0,
    )


@dataclass
class LoggingConfig:
    level: Literal["debug", "info", "warning", "error"] = field("info", "Console log level.")
    generations: bool = field(True, "Write prompts, completions and per-test outcomes to generations/*.jsonl.")
    generations_max_mb: float = field(64.0, "Rotate a generations file once it reaches this size.", gt=0)
    console: Literal["rich", "plain"] = field("rich", "Progress bar and summary table ('rich') or plain log lines.")
    pass_rate_tasks: int = field(
        64, "Training tasks sampled before and after GRPO to measure the train pass rate; 0 skips it.", ge=0
    )
    pass_rate_samples: int = field(4, "Completions per task for that measurement.", gt=0)


@dataclass
class AzrConfig:
    output_dir: str = field(
        "runs/azr",
        "Where the run writes config, logs, checkpoints and the final adapter; relative to the recipe when set "
        "there, else to the current directory.",
    )
    seed: int = field(42, "Seed for data shuffling, sampling and TRL (grpo.seed is set from it).")
    model: ModelConfig = field(factory=ModelConfig, help="Policy model.")
    grpo: dict[str, Any] = field(factory=dict, help="Any trl.GRPOConfig field, passed through untouched.")
    sft: SftConfig = field(factory=SftConfig, help="Optional supervised warm start before GRPO.")
    data: DataConfig = field(factory=DataConfig, help="Task datasets.")
    sandbox: SandboxConfig = field(factory=SandboxConfig, help="Execution of model code.")
    rewards: list[RewardSpec] = field(factory=_default_rewards, help="Reward functions and their weights.")
    answer_format: Literal["strict", "relaxed"] = field(
        "strict",
        "How answers are read: 'strict' runs code only from exactly one python block followed by a 'Final answer:' "
        "line; 'relaxed' runs the last fenced block.",
    )
    self_play: SelfPlayConfig = field(factory=SelfPlayConfig, help="Remote opponent on the same tasks.")
    teacher: TeacherConfig = field(factory=TeacherConfig, help="Stronger remote model that gives hints.")
    teacher_assist: TeacherAssistConfig = field(factory=TeacherAssistConfig, help="When and how the teacher helps.")
    curriculum: CurriculumConfig = field(factory=CurriculumConfig, help="Replay of tasks the policy failed.")
    thinking: ThinkingConfig = field(factory=ThinkingConfig, help="Reasoning switches and budgets.")
    vllm: VllmConfig = field(factory=VllmConfig, help="vLLM generation sidecar.")
    logging: LoggingConfig = field(factory=LoggingConfig, help="Logs and console output.")


def load_config(
    path: str | Path | None = None, overrides: Sequence[str] = (), *, check_grpo: bool = False
) -> AzrConfig:
    """Read FILE (YAML or JSON), apply `--set` overrides, validate, resolve paths; raise ConfigError on bad input.

    Relative paths written in the file are relative to the file; those from `--set` and defaults, to the CWD.
    """
    raw: dict[str, Any] = {}
    file_base = Path.cwd()
    if path is not None:
        raw = normalise_legacy(load_raw(Path(path)), str(path))
        file_base = Path(path).resolve().parent
    from_cli = set()
    defaults = dataclasses.asdict(AzrConfig())
    for dotted, value in parse_pairs(overrides, "--set", "KEY=VALUE with a dotted KEY, e.g. model.lora.r=8", True):
        set_dotted(raw, dotted, value, defaults)
        from_cli.add(dotted)
    cfg = build(AzrConfig, raw, "")
    _check_cross_fields(cfg)
    _resolve_paths(cfg, file_base, from_cli | _unset_paths(raw))
    if check_grpo:
        validate_grpo(cfg.grpo)
        validate_grpo(cfg.sft.args, "sft.args", "SFTConfig")
    return cfg


def _resolve_paths(cfg: AzrConfig, file_base: Path, from_cli: set[str]) -> None:
    """Make relative paths absolute: against the config file's folder if written there, else against the CWD."""
    for dotted, is_path in PATH_FIELDS.items():
        *parents, leaf = dotted.split(".")
        owner = functools.reduce(getattr, parents, cfg)
        value = getattr(owner, leaf)
        base = Path.cwd() if dotted in from_cli else file_base
        if value and is_path(value, base):
            setattr(owner, leaf, str((base / Path(value).expanduser()).resolve()))


def _unset_paths(raw: dict[str, Any]) -> set[str]:
    """Path fields the file does not set: their defaults are relative to the CWD, not to the config file."""

    def given(dotted: str) -> bool:
        node: Any = raw
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True

    return {key for key in PATH_FIELDS if not given(key)}


def _check_cross_fields(cfg: AzrConfig) -> None:
    if not cfg.model.name_or_path:
        raise ConfigError("model.name_or_path: required (a hub id or a local model directory)")
    for name in ("self_play", "teacher"):
        endpoint = getattr(cfg, name)
        for required in ("base_url", "model"):
            if endpoint.enabled and not getattr(endpoint, required):
                raise ConfigError(f"{name}.{required}: required when {name}.enabled is true")
    if cfg.teacher_assist.enabled and not cfg.teacher.enabled:
        raise ConfigError("teacher_assist.enabled: needs teacher.enabled: true")
    needs_opponent = {"teacher_assist.enabled": cfg.teacher_assist.enabled, "curriculum.replay": cfg.curriculum.replay}
    for name in (n for n, on in needs_opponent.items() if on and not cfg.self_play.enabled):
        raise ConfigError(f"{name}: needs self_play.enabled: true (it works from the self-play scoreboard)")
    if cfg.sft.near_misses and not cfg.sft.enabled:
        raise ConfigError("sft.near_misses: needs sft.enabled: true (they are part of the warm start)")
    if not cfg.rewards:
        raise ConfigError("rewards: at least one reward is required")
    for i, spec in enumerate(cfg.rewards):
        if not spec.name:
            raise ConfigError(f"rewards[{i}].name: required")
    for section, values in (("grpo", cfg.grpo), ("sft.args", cfg.sft.args)):
        for key, owner in MANAGED_TRAINER_FIELDS.items():
            if key in values:
                raise ConfigError(f"{section}.{key}: azr sets it from '{owner}'; set that instead")


def validate_grpo(grpo: dict[str, Any], section: str = "grpo", kind: str = "GRPOConfig") -> None:
    """Check `grpo:` keys against trl.GRPOConfig (or `sft.args` against SFTConfig); turn numeric strings ('1e-5')
    into numbers for numeric fields."""
    if grpo:
        import trl  # lazy: pulls in torch and transformers

        check_passthrough(grpo, getattr(trl, kind), section, f"trl.{kind}")


def dump_yaml(cfg: AzrConfig) -> str:
    """The resolved config as YAML, in schema order (what `save_config` writes and `azr config show` prints)."""
    return yaml.safe_dump(dataclasses.asdict(cfg), sort_keys=False, allow_unicode=True)


def save_config(cfg: AzrConfig, path: str | Path) -> Path:
    """Write the resolved config as YAML, atomically, so a run's outputs always say what produced them."""
    return atomic_write_text(Path(path), dump_yaml(cfg))
