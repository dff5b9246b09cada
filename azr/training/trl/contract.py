"""TRL's own rules for `grpo:` that TRL checks only late: inside `GRPOTrainer.__init__` (after the model has loaded)
or at the first loss step (after the warm start), read from TRL's source and checked here at load instead.

A table of the enumerated `GRPOConfig` fields with the values TRL's code branches on (a value outside them raises
deep inside `train()`), and the cross-field rules the trainer raises on. It imports no TRL: the values are TRL's as
of the version in constraints.txt, and a test holds the table to the installed TRL's defaults and help texts.
What TRL checks when its config is built (`__post_init__`, transformers' enums) stays with TRL, named by
`azr.training` when it builds the class.
"""

from __future__ import annotations

from typing import Any

from azr.errors import ConfigError, show

# field -> the values TRL accepts (the branches of its code; True/False where TRL maps booleans itself)
ENUMERATED: dict[str, tuple[Any, ...]] = {
    "loss_type": ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"),
    "scale_rewards": ("group", "batch", "none", True, False),
    "importance_sampling_level": ("token", "sequence"),
    "multi_objective_aggregation": ("sum_then_normalize", "normalize_then_sum"),
    "vllm_mode": ("server", "colocate"),
    "vllm_model_impl": ("transformers", "vllm"),
    "vllm_importance_sampling_mode": ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask"),
    "include_num_input_tokens_seen": ("all", "non_padding", "no", True, False),
}
# TRL's defaults for the fields the cross-field rules read (a test compares them with the installed TRL).
DEFAULTS: dict[str, Any] = {
    "beta": 0.0,
    "loss_type": "dapo",
    "use_vllm": False,
    "vllm_importance_sampling_correction": True,
    "vllm_importance_sampling_mode": "sequence_mask",
    "sync_ref_model": False,
    "use_liger_kernel": False,
    "liger_kernel_config": None,
}


def check_trl_contract(grpo: dict[str, Any], adapter_kind: str, section: str = "grpo") -> None:
    """Raise a one-line ConfigError naming `section.field` for a `grpo:` value TRL would reject only once training
    has started. `adapter_kind` is `model.adapter.kind` (TRL refuses some features on a peft model)."""
    for key, allowed in ENUMERATED.items():
        if key in grpo and not any(grpo[key] == ok and type(grpo[key]) is type(ok) for ok in allowed):
            raise ConfigError(f"{section}.{key}: expected one of {', '.join(map(str, allowed))}; got {show(grpo[key])}")
    value = {**DEFAULTS, **grpo}.get
    mode = value("vllm_importance_sampling_mode")
    vespo_vllm = value("loss_type") == "vespo" and value("use_vllm") and value("vllm_importance_sampling_correction")
    if vespo_vllm and mode not in ("token_truncate", "token_mask"):
        raise ConfigError(
            f"{section}.vllm_importance_sampling_mode: loss_type vespo with vLLM needs token_truncate or token_mask, "
            f"got {mode!r}"
        )
    if value("sync_ref_model"):
        if not value("beta"):
            raise ConfigError(f"{section}.sync_ref_model: needs {section}.beta > 0 (with beta 0 there is no reference)")
        if adapter_kind != "none":
            raise ConfigError(
                f"{section}.sync_ref_model: TRL does not support it with an adapter (model.adapter.kind is "
                f"{adapter_kind}); the reference model is the base with the adapter switched off"
            )
    liger = value("liger_kernel_config")
    if value("use_liger_kernel") and isinstance(liger, dict) and liger.get("fused_linear_cross_entropy"):
        raise ConfigError(f"{section}.liger_kernel_config: fused_linear_cross_entropy is not supported by GRPO")
