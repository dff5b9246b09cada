"""The seed project's configuration schema (one top-level `azr:` section), mapped onto the current one.

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
    "lora.r": "model.lora.r",
    "lora.alpha": "model.lora.alpha",
    "lora.dropout": "model.lora.dropout",
    "lora.target_modules": "model.lora.target_modules",
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


def normalise_legacy(raw: dict[str, Any], source: str) -> dict[str, Any]:
    """Map the seed project's `azr:` section onto the current schema, with a warning; other sections are kept."""
    if "azr" not in raw:
        return raw
    legacy = raw.pop("azr")
    if not isinstance(legacy, dict):
        raise ConfigError(f"azr: expected a mapping (legacy schema), got {type(legacy).__name__}")
    for dotted, value in _flatten(legacy):
        target = LEGACY_KEYS.get(dotted)
        if target is None:
            raise ConfigError(f"azr.{dotted}: unknown legacy key{did_you_mean(dotted, LEGACY_KEYS)}")
        if target == "model.quantization" and (value is None or isinstance(value, (str, bool))):
            value = _LEGACY_QUANTIZATION.get(value, value)
        node = raw
        *parents, leaf = target.split(".")
        for depth, part in enumerate(parents):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{'.'.join(parents[: depth + 1])}: expected a mapping, got {show(node)}")
        if leaf in node:
            raise ConfigError(f"{target}: set twice, as {target} and as legacy azr.{dotted}")
        node[leaf] = value
    log.warning(
        "%s: legacy 'azr:' schema converted; `azr config show --config %s` prints the current form", source, source
    )
    return raw


def _flatten(node: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for key, value in node.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and dotted in ("lora", "rlhf"):
            out.extend(_flatten(value, dotted + "."))
        else:
            out.append((dotted, value))
    return out
