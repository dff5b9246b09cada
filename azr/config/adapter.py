"""The `model.adapter` section: which peft adapter trains on the frozen base (LoRA and its options, IA³, LN tuning,
or none), the checks between its fields, and whether vLLM can serve the result as a plain LoRA adapter.

Owns the recipe side only; turning the section into a peft config, and merging, are `azr.models.adapters` and
`azr.models.export`. Nothing here imports peft or torch.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from azr.config.schema import field
from azr.errors import ConfigError

_NO_PROMPT_TUNING = (
    "prompt tuning is not offered: soft prompts cannot be merged into the weights for `azr export`, and vLLM "
    "dropped prompt adapters; use kind: lora (or ia3, ln_tuning)"
)


@dataclass
class AdapterConfig:
    kind: Literal["lora", "ia3", "ln_tuning", "none"] = field(
        "lora",
        "What trains on the frozen base, as exactly one peft config: 'lora' (low-rank updates, with the DoRA, "
        "rsLoRA, bias and norm options below), 'ia3' (learned scaling vectors, Liu et al. 2022), 'ln_tuning' "
        "(the LayerNorm/RMSNorm weights only), or 'none' to train all weights. Prompt tuning is not offered.",
        refused={name: _NO_PROMPT_TUNING for name in ("prompt_tuning", "prefix_tuning", "p_tuning")},
    )
    r: int = field(16, "LoRA: rank of the update.", gt=0, le=4096)
    alpha: int = field(
        32, "LoRA: alpha; the update is scaled by alpha / r (alpha / sqrt(r) with rslora).", gt=0, le=65_536
    )
    dropout: float = field(0.05, "LoRA: dropout on the adapter branch.", ge=0, le=1)
    target_modules: str | list[str] | None = field(
        None,
        "Modules to adapt: names (matched as suffixes, e.g. [q_proj, v_proj]), or 'all-linear'. Null for the "
        "kind's default: every linear layer but the head for LoRA; peft's table for the model type for IA³ "
        "(Qwen2: q_proj, v_proj, down_proj); every LayerNorm/RMSNorm for LN tuning.",
    )
    top_layers: int | None = field(
        None,
        "LoRA: adapt only the last N transformer layers (peft's layers_to_transform); null for every layer. The "
        "backward pass then stops at the lowest adapted layer: with a third of the layers, a training step costs "
        "about half (the knob that most shortens a step on a CPU).",
        gt=0,
        le=4096,
    )
    dora: bool = field(
        False,
        "LoRA: weight-decomposed LoRA (DoRA, Liu et al. 2024): a trained magnitude per output channel beside the "
        "low-rank direction; slower steps, and vLLM cannot serve it unmerged.",
    )
    rslora: bool = field(
        False, "LoRA: rank-stabilised scaling alpha / sqrt(r) (Kalajdzievski 2023), so higher ranks keep learning."
    )
    bias: Literal["none", "all", "lora_only"] = field(
        "none",
        "LoRA: also train biases (BitFit): 'all' every bias of the model, 'lora_only' those of the adapted layers. "
        "They are saved with the adapter; disabling the adapter does not restore the base's biases (peft).",
    )
    train_norms: bool = field(
        False,
        "LoRA: also train every LayerNorm/RMSNorm weight (gamma) beside the adapter, as copies saved with it "
        "(peft's modules_to_save).",
    )
    feedforward_modules: list[str] | None = field(
        None,
        "IA³: which of the target modules are feed-forward layers, scaled on their input rather than their output; "
        "null for peft's table for the model type (Qwen2: down_proj).",
    )

    @property
    def enabled(self) -> bool:
        """True when an adapter is trained (every kind but 'none')."""
        return self.kind != "none"


# Which kind each option belongs to; an option changed from its default under another kind is a mistake.
_OPTION_KIND = {
    "r": "lora",
    "alpha": "lora",
    "dropout": "lora",
    "dora": "lora",
    "rslora": "lora",
    "top_layers": "lora",
    "bias": "lora",
    "train_norms": "lora",
    "feedforward_modules": "ia3",
}


def check_adapter(adapter: AdapterConfig, quantization: str) -> None:
    """Cross-field checks of `model.adapter` (and its pairing with `model.quantization`), as one-line errors."""
    defaults = AdapterConfig()
    for f in fields(AdapterConfig):
        owner = _OPTION_KIND.get(f.name)
        if owner and owner != adapter.kind and getattr(adapter, f.name) != getattr(defaults, f.name):
            label = {"lora": "a LoRA", "ia3": "an IA³"}[owner]
            raise ConfigError(f"model.adapter.{f.name}: {label} option, but model.adapter.kind is {adapter.kind}")
    if adapter.kind == "none" and adapter.target_modules is not None:
        raise ConfigError("model.adapter.target_modules: kind none trains all weights; there is nothing to target")
    targets, forward = adapter.target_modules, adapter.feedforward_modules
    if adapter.top_layers is not None and isinstance(targets, str) and targets != "all-linear":
        raise ConfigError(
            "model.adapter.top_layers: needs target_modules as a list of names (or all-linear); a pattern already "
            "chooses its own layers"
        )
    if isinstance(targets, list) and forward is not None and not set(forward) <= set(targets):
        extra = sorted(set(forward) - set(targets))
        raise ConfigError(f"model.adapter.feedforward_modules: {extra} not among target_modules {targets}")
    if quantization != "none" and not adapter.enabled:
        raise ConfigError(
            f"model.quantization={quantization}: a quantized base model cannot be fully fine-tuned; "
            f"set model.adapter.kind (lora, ia3, ln_tuning) or model.quantization=none"
        )


def vllm_lora_problem(adapter: AdapterConfig) -> str | None:
    """Why vLLM cannot serve this adapter as a plain LoRA adapter (its adapter hot-reload), or None when it can.

    vLLM loads LoRA only, and of LoRA's options neither DoRA, trained biases nor extra trained modules (the norms
    of train_norms travel as peft's modules_to_save); rsLoRA is only a scale and is fine. `azr export` merges any
    of these into full weights, which vLLM serves like any model.
    """
    if not adapter.enabled:
        return "model.adapter.kind is none: all weights train, so there is no adapter for vLLM to load"
    if adapter.kind != "lora":
        return f"model.adapter.kind is {adapter.kind}: vLLM serves LoRA adapters only"
    if adapter.dora:
        return "model.adapter.dora: vLLM does not serve DoRA adapters (the trained magnitude vector)"
    if adapter.bias != "none":
        return f"model.adapter.bias={adapter.bias}: vLLM does not serve LoRA adapters with trained biases"
    if adapter.train_norms:
        return "model.adapter.train_norms: vLLM does not load the trained norm weights (peft's modules_to_save)"
    return None
