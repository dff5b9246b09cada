"""The seed project's configuration schema (a top-level `azr:` section, and its `ia3:` section), mapped onto the
current one.

Owns only the key mapping and its conversion; `azr.config.load_config` calls `normalise_legacy` before validating,
so every legacy key ends up checked like a current one.
"""

from __future__ import annotations

import logging
from typing import Any

from azr.errors import ConfigError, did_you_mean, show

log = logging.getLogger(__name__)

# Legacy schema (a single top-level `azr:` section) -> new dotted field.
LEGACY_KEYS = {
    "model_id": "model.name_or_path",
    "quantization": "model.quantization",
    "lora.r": "model.adapter.r",
    "lora.alpha": "model.adapter.alpha",
    "lora.dropout": "model.adapter.dropout",
    "lora.target_modules": "model.adapter.target_modules",
    "rlhf.num_generations": "grpo.num_generations",
    "rlhf.max_completion_length": "grpo.max_completion_length",
    "rlhf.temperature": "grpo.temperature",
    "rlhf.top_p": "grpo.top_p",
    "rlhf.clip_range_ratio": "grpo.epsilon",
    "rlhf.kl_coeff": "grpo.beta",
    "rlhf.importance_sampling_level": "grpo.importance_sampling_level",
    "rlhf.gradient_accumulation_steps": "grpo.gradient_accumulation_steps",
}
_LEGACY_QUANTIZATION = {None: "none", False: "none", "nf4": "4bit", "int4": "4bit", "int8": "8bit"}
# Fields of earlier versions that were replaced, with what replaced them.
REPLACED = {
    "vllm.sidecar": "replaced by vllm.mode (off | adapter | server | colocate)",
    "vllm.host": "removed: the server azr launches listens on 127.0.0.1 only",
}


def check_replaced(raw: dict[str, Any]) -> None:
    """A one-line error for a field an earlier version had, naming what replaced it."""
    for dotted, reason in REPLACED.items():
        section, leaf = dotted.split(".")
        if isinstance(raw.get(section), dict) and leaf in raw[section]:
            raise ConfigError(f"{dotted}: {reason}")


# The seed's `ia3:` section stacked extra trainables on its LoRA adapter. Two have a peft equivalent as LoRA options;
# the rest were its own modules, which never learned there (its warm-up wrote their starting values back at every
# step, a clamp pinned the IA³ gates at exactly 1, the q/k gates were never applied), so they are not ported.
_IA3_MAPPED = {"layernorm_gamma": ("model.adapter.train_norms", True), "bitfit": ("model.adapter.bias", "all")}
_IA3_NOT_PORTED = {
    "per_layer_head_gates": "per-head and grouped gates",
    "ffn_channel_gates": "FFN channel gates",
    "lora_mlp_down": "LoRA-MLP adapters",
    "attention_logit_gates": "attention-logit gates",
    "projection_dim_gates": "projection gates",
    "rope_scale": "RoPE scalers",
    "residual_gates": "residual gates",
    "prefix_prompts": "soft prompts",
}


def normalise_legacy(raw: dict[str, Any], source: str) -> dict[str, Any]:
    """Map the seed project's `azr:` section (and its top-level `ia3:` section) onto the current schema, with a
    warning; other sections are kept."""
    if "azr" not in raw and "ia3" not in raw:
        return raw
    legacy = raw.pop("azr", {})
    if not isinstance(legacy, dict):
        raise ConfigError(f"azr: expected a mapping (legacy schema), got {type(legacy).__name__}")
    pairs = []
    for dotted, value in _flatten(legacy):
        target = LEGACY_KEYS.get(dotted)
        if target is None:
            raise ConfigError(f"azr.{dotted}: unknown legacy key{did_you_mean(dotted, LEGACY_KEYS)}")
        if target == "model.quantization" and (value is None or isinstance(value, (str, bool))):
            value = _LEGACY_QUANTIZATION.get(value, value)
        pairs.append((target, value, f"azr.{dotted}"))
    if "ia3" in raw:
        pairs += _ia3_pairs(raw.pop("ia3"))
    for target, value, legacy_name in pairs:
        node = raw
        *parents, leaf = target.split(".")
        for depth, part in enumerate(parents):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{'.'.join(parents[: depth + 1])}: expected a mapping, got {show(node)}")
        if leaf in node:
            raise ConfigError(f"{target}: set twice, as {target} and as legacy {legacy_name}")
        node[leaf] = value
    log.warning(
        "%s: legacy 'azr:' schema converted; `azr config show --config %s` prints the current form", source, source
    )
    return raw


def _ia3_pairs(section: Any) -> list[tuple[str, Any, str]]:
    """The seed's `ia3:` section as (field, value, legacy name) triples; a one-line error where it does not map."""
    if not isinstance(section, dict):
        raise ConfigError(f"ia3: expected a mapping (legacy schema), got {show(section)}")
    known = {"enabled", "init_value", *_IA3_MAPPED, *_IA3_NOT_PORTED}
    for key in section:
        if key not in known:
            raise ConfigError(f"ia3.{key}: unknown legacy key{did_you_mean(str(key), known)}")
    if not section.get("enabled"):
        return []  # the seed read nothing else from a disabled section
    init = section.get("init_value", 1.0)
    if isinstance(init, bool) or init != 1.0:
        raise ConfigError(
            f"ia3.init_value: gates starting at {show(init)} are not ported (peft's IA³ starts at 1, the identity); "
            "set model.adapter.kind: ia3"
        )
    for key, what in _IA3_NOT_PORTED.items():
        if _on(section.get(key)):
            raise ConfigError(
                f"ia3.{key}: the seed's {what} are not ported: they never learned there (its warm-up wrote their "
                "starting values back every step); use model.adapter (kind: lora or ia3)"
            )
    log.warning(
        "ia3.enabled: the seed's IA³ gates stayed at 1 throughout its training (its clamp pinned them), so only "
        "its LoRA adapter learned, as here; set model.adapter.kind: ia3 to train peft's IA³ vectors instead"
    )
    return [(*_IA3_MAPPED[key], f"ia3.{key}") for key in _IA3_MAPPED if _on(section.get(key))]


def _on(value: Any) -> bool:
    return value is True or (isinstance(value, dict) and bool(value.get("enabled")))


def _flatten(node: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for key, value in node.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and dotted in ("lora", "rlhf"):
            out.extend(_flatten(value, dotted + "."))
        else:
            out.append((dotted, value))
    return out
