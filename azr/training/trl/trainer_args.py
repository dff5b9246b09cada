"""TRL's trainer arguments from a recipe: `trl.GRPOConfig` and `trl.SFTConfig` with azr's managed fields (output
folders, seed, checkpointing, completion length, thinking switch, reward weights, CPU defaults, TRL's vLLM fields),
and TRL's checks named in the recipe's terms: its late rules (`contract`), its keys and types (`passthrough`),
and whatever its `__post_init__` raises, turned into one line naming the field at fault. Imports TRL when called.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from azr.config import AzrConfig, environment_of, sequence_lengths
from azr.errors import ConfigError, did_you_mean, show
from azr.training.trl.contract import check_trl_contract
from azr.training.trl.passthrough import validate_grpo

log = logging.getLogger(__name__)
# The keys that decide whether a generation batch holds whole groups: an error names those the user set.
BATCH_FIELDS = ("num_generations", "per_device_train_batch_size", "generation_batch_size", "steps_per_generation")
# Ceilings on the `grpo:` counts that multiply the work of a step (TRL bounds none of them): past these, a recipe is a
# typo, not a run, and is refused at load rather than left to allocate.
GRPO_CEILINGS = {
    "num_generations": 4096,
    "per_device_train_batch_size": 65_536,
    "gradient_accumulation_steps": 65_536,
    "generation_batch_size": 1 << 20,
    "steps_per_generation": 65_536,
    "num_iterations": 1024,
    "max_completion_length": 1 << 20,
    "max_prompt_length": 1 << 24,
    "max_steps": 1 << 30,
}


def grpo_args(
    cfg: AzrConfig,
    weights: Sequence[float],
    cpu: bool,
    vllm_fields: dict[str, Any] | None = None,
    warn: bool = True,
):
    """trl.GRPOConfig from `grpo:`, with azr's managed fields (`weights`: the trained rubric's, TRL's
    `reward_weights`), the thinking switch and budget, CPU defaults, and
    `vllm_fields`, the fields of TRL's vLLM modes for `vllm.mode` server and colocate (`vllm.grpo_fields`; none
    by default, as with `vllm.mode: off`).
    `warn`: deprecation warnings naming a user key are logged as warnings (else, once checked, to the debug log)."""
    from trl import GRPOConfig

    check_trl_contract(cfg.grpo, cfg.model.adapter.kind)  # what TRL refuses only inside train(), named first
    check_grpo_inputs(cfg)
    _check_grpo_values(cfg.grpo)
    values: dict[str, Any] = {"logging_steps": 1, "save_steps": 50, "report_to": "none", **cfg.grpo}
    if cpu:
        for half in ("bf16", "fp16"):
            if values.get(half):
                log.warning("grpo.%s: no GPU here, so training runs on the CPU in float32 (%s=false)", half, half)
        values.update(use_cpu=True, bf16=False, fp16=False)
    values["max_completion_length"] = sequence_lengths(cfg)["max_completion_length"]
    values["chat_template_kwargs"] = cfg.template_kwargs()
    managed = {"output_dir": str(Path(cfg.output_dir) / "checkpoints"), "seed": cfg.seed, "disable_tqdm": True}
    managed["reward_weights"] = list(weights)  # the rubric's (grpo.reward_weights is refused at load)
    managed[_checkpointing_field(GRPOConfig)] = cfg.model.gradient_checkpointing
    managed |= vllm_fields or {}
    args = trl_config(GRPOConfig, "grpo", cfg.grpo, {**values, **managed}, warn)
    _check_trainer_use(args, "grpo")
    if cfg.vllm.mode == "off":  # otherwise the sidecar checks the vLLM it needs, and says where it looked
        _check_vllm(args)
    return args


def sft_args(cfg: AzrConfig, cpu: bool, warn: bool = True):
    """trl.SFTConfig from `sft.args`, with azr's managed fields and CPU defaults; the warm start's folder is
    `output_dir/sft`. The loss is on the completion (reference answers), or on the assistant turns when it learns
    recorded episodes (`sft.rollouts`; feedback episodes are pre-tokenized, their mask a column of their own)."""
    from trl import SFTConfig

    validate_grpo(cfg.sft.args, "sft.args", "SFTConfig")
    values: dict[str, Any] = {
        "logging_steps": 10,
        "save_strategy": "steps",  # per epoch would mean a save every few steps on small data sets
        "save_steps": 100,
        "save_total_limit": 1,
        "report_to": [],
        "lr_scheduler_type": "cosine",
        # the loss on the assistant turns of recorded episodes (a feedback episode's from its token ids' mask), or on
        # the completion after a task's prompt
        **(
            {"assistant_only_loss": not environment_of(cfg).token_episodes, "completion_only_loss": False}
            if cfg.sft.rollouts
            else {"completion_only_loss": True}
        ),
        **cfg.sft.args,
    }
    if cpu:
        values.update(use_cpu=True, bf16=False, fp16=False)  # mixed precision needs a GPU
    managed = {"output_dir": str(Path(cfg.output_dir) / "sft" / "checkpoints"), "seed": cfg.seed}
    managed |= {"disable_tqdm": True, _checkpointing_field(SFTConfig): cfg.model.gradient_checkpointing}
    args = trl_config(SFTConfig, "sft.args", cfg.sft.args, {**values, **managed}, warn)
    _check_trainer_use(args, "sft.args")
    return args


def _checkpointing_field(cls: type) -> str:
    """transformers 5 renamed gradient_checkpointing; the old name still works but warns on every build."""
    names = {f.name for f in dataclasses.fields(cls)}
    return "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"


def trl_config(cls: type, section: str, user: dict[str, Any], values: dict[str, Any], warn: bool = True):
    """`cls(**values)`, with what it raises turned into a one-line ConfigError naming the culprit among the user's
    keys (`user`, the recipe's `section`): the keys without which it builds, else those its message names. An error
    no user key is part of is not the user's to fix, and propagates as it is."""
    try:
        return _quietly(cls, values, section, user, warn)
    except Exception as exc:  # whatever the library raises: judged below by whether a user key causes it
        reason = _first_line(exc)
        culprits = [key for key in user if _builds(cls, {k: v for k, v in values.items() if k != key})]
        culprits = culprits or [key for key in user if re.search(rf"\b{re.escape(key)}\b", reason)]
        if not culprits and not isinstance(exc, (ValueError, TypeError)):
            raise
        where = ", ".join(f"{section}.{key}" for key in culprits) or section
        raise ConfigError(f"{where}: {_plain(reason, cls)}") from None


def _quietly(cls: type, values: dict[str, Any], section: str, user: dict[str, Any], warn: bool = True):
    """Build, turning the deprecation warnings it raises into one azr warning per user key they name (the rest, the
    library's own business, go to the debug log)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        built = cls(**values)
    for warning in caught:
        text = str(warning.message).splitlines()[0]
        named = [key for key in user if re.search(rf"`?\b{re.escape(key)}\b`?", text)]
        if warn and named and issubclass(warning.category, (DeprecationWarning, FutureWarning)):
            log.warning("%s.%s: %s", section, named[0], text)
        else:
            log.debug("%s: %s: %s", cls.__name__, warning.category.__name__, text)
    return built


def _builds(cls: type, values: dict[str, Any]) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            cls(**values)
        except Exception:  # any failure: this key alone is not the culprit
            return False
    return True


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split("\n\n")[0].split())


def _plain(reason: str, cls: type) -> str:
    """Python's wording for a bad keyword is about `__init__`; say it in the recipe's terms."""
    found = re.search(r"unexpected keyword argument '(\w+)'", reason)
    if found:
        known = [f.name for f in dataclasses.fields(cls) if f.init]
        return f"not a trl.{cls.__name__} field{did_you_mean(found.group(1), known)}"
    return reason[:400]


def check_grpo_inputs(cfg: AzrConfig) -> None:
    """`grpo:`'s names and scalar types (numeric strings become numbers), then the values azr itself computes with
    (TRL would take other forms of them): what `sequence_lengths` and the rest read."""
    validate_grpo(cfg.grpo)
    _check_managed_inputs(cfg.grpo)


def _check_managed_inputs(grpo: dict[str, Any]) -> None:
    for key, ceiling in GRPO_CEILINGS.items():
        value = grpo.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > ceiling:
            raise ConfigError(f"grpo.{key}: must be <= {ceiling:,}, got {show(value)}")
    length = grpo.get("max_completion_length", 256)
    if not _ints(length):
        raise ConfigError(f"grpo.max_completion_length: expected a positive integer, got {show(length)}")
    if not isinstance(grpo.get("chat_template_kwargs", {}), dict):
        raise ConfigError(f"grpo.chat_template_kwargs: expected a mapping, got {show(grpo['chat_template_kwargs'])}")


def _check_grpo_values(grpo: dict[str, Any]) -> None:
    """The usual GRPO batch mistakes, named in the recipe's terms before TRL words them in its own."""
    from trl import GRPOConfig

    defaults = {f.name: f.default for f in dataclasses.fields(GRPOConfig) if f.init}
    value = {**defaults, **grpo}.get
    n = value("num_generations")
    if isinstance(n, int) and n < 2:
        raise ConfigError(f"grpo.num_generations: GRPO needs at least 2 generations per prompt, got {n}")
    if grpo.get("generation_batch_size") is not None and grpo.get("steps_per_generation") is not None:
        raise ConfigError("grpo.generation_batch_size: set it or grpo.steps_per_generation, not both")
    per_device, processes = value("per_device_train_batch_size"), int(os.environ.get("WORLD_SIZE", "1"))
    steps = value("steps_per_generation") or value("gradient_accumulation_steps")
    batch = value("generation_batch_size") or (per_device * processes * steps if _ints(per_device, steps) else None)
    if _ints(n, batch) and n >= 2 and batch % n:
        named = ", ".join(f"grpo.{key}" for key in BATCH_FIELDS if key in grpo) or "grpo.num_generations"
        raise ConfigError(
            f"{named}: a generation batch of {batch} completions (per_device_train_batch_size x processes x "
            f"steps_per_generation) does not hold whole groups of num_generations={n}; make it a multiple of {n}"
        )


def _ints(*values: object) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values)


def _check_trainer_use(args, section: str) -> None:
    """What the trainer itself would refuse only once the model has loaded: evaluation settings (azr gives its
    trainers no eval dataset; the run's own measurement is `logging.pass_rate_tasks`), and report targets."""
    evaluating = {
        "eval_strategy": str(getattr(args.eval_strategy, "value", args.eval_strategy)) != "no",
        "save_strategy": str(getattr(args.save_strategy, "value", args.save_strategy)) == "best",
        "load_best_model_at_end": args.load_best_model_at_end,
    }
    for name, asks in evaluating.items():
        if asks:
            raise ConfigError(
                f"{section}.{name}: needs evaluation through the trainer, which azr does not do (it gives the "
                "trainer no eval dataset; logging.pass_rate_tasks measures the policy before and after)"
            )
    from transformers.integrations.integration_utils import (
        INTEGRATION_TO_CALLBACK,
        get_available_reporting_integrations,
    )

    targets = args.report_to or []
    available = get_available_reporting_integrations() if targets else []
    for name in targets:
        if not isinstance(name, str) or name not in INTEGRATION_TO_CALLBACK:
            close = did_you_mean(name, INTEGRATION_TO_CALLBACK) if isinstance(name, str) else ""
            raise ConfigError(f"{section}.report_to: unknown target {show(name)}{close} (or 'none')")
        if name not in available:
            raise ConfigError(f"{section}.report_to: '{name}' is not installed here; pip install {name}")


def _check_vllm(args) -> None:
    import importlib.util

    if args.use_vllm and importlib.util.find_spec("vllm") is None:
        raise ConfigError(
            "grpo.use_vllm: TRL's vLLM generation needs the vllm package in this environment; pip install vllm"
        )
