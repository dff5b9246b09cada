"""Adapters through peft: the one peft config `model.adapter` asks for, and the precision of the small trained
vectors (IA³ scales, norm weights) once a trainer has been built.

peft does the rest: TRL's trainers wrap the model with the config, and saving, loading and merging stay peft's own.
Merging into full weights is `azr.models.export`. torch and peft are imported inside functions.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from azr.config import AdapterConfig
from azr.errors import ConfigError
from azr.inputs import load_json

if TYPE_CHECKING:
    import peft

log = logging.getLogger(__name__)


def read_adapter_config(folder: str | Path, flag: str = "--adapter") -> dict[str, Any]:
    """A peft adapter folder's `adapter_config.json`, checked before any model loads: a JSON object naming its
    `peft_type`; else a one-line ConfigError naming `flag` and the folder (peft itself would raise a KeyError)."""
    path = Path(folder) / "adapter_config.json"
    try:
        config = load_json(path.read_bytes())
    except FileNotFoundError:
        raise ConfigError(f"{flag} {folder}: not a peft adapter directory (no {path.name})") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{flag} {folder}: cannot read {path.name}: {exc}") from None
    if not isinstance(config, dict) or not isinstance(config.get("peft_type"), str):
        raise ConfigError(f"{flag} {folder}: {path.name} names no peft_type; not an adapter peft saved")
    return config


def build_peft_config(adapter: AdapterConfig, model) -> peft.PeftConfig | None:
    """The peft config for `adapter` on `model` (whose module names and model type fill the defaults), or None for
    kind 'none' (all weights train). TRL's trainers take it as `peft_config`."""
    if not adapter.enabled:
        return None
    import peft

    targets = adapter.target_modules
    _check_targets(targets, model)
    if adapter.kind == "lora":
        if adapter.bias != "none" and _half(model):
            log.warning(
                "model.adapter.bias=%s: the biases train in the model's %s, where Adam steps smaller than about 0.4%% "
                "of a bias round away; model.dtype: float32 keeps them exact",
                adapter.bias,
                model.dtype,
            )
        if targets in (None, "all-linear"):  # peft takes layers_to_transform with a list of names only
            targets = linear_module_names(model) if adapter.top_layers is not None else "all-linear"
        return peft.LoraConfig(
            r=adapter.r,
            lora_alpha=adapter.alpha,
            lora_dropout=adapter.dropout,
            target_modules=targets,
            use_dora=adapter.dora,
            use_rslora=adapter.rslora,
            bias=adapter.bias,
            modules_to_save=norm_module_names(model) if adapter.train_norms else None,
            layers_to_transform=_top_layers(adapter.top_layers, model),
            task_type="CAUSAL_LM",
        )
    if adapter.kind == "ia3":
        targets, forward = _ia3_modules(adapter, model.config.model_type)
        return peft.IA3Config(target_modules=targets, feedforward_modules=forward, task_type="CAUSAL_LM")
    return peft.LNTuningConfig(target_modules=targets or norm_module_names(model), task_type="CAUSAL_LM")


def linear_module_names(model) -> list[str]:
    """The names (last part) of every linear layer but the output head: what peft's 'all-linear' adapts."""
    import torch

    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    return sorted(
        {
            name.rsplit(".", 1)[-1]
            for name, module in model.named_modules()
            if isinstance(module, torch.nn.Linear) and module is not head and name
        }
    )


def _top_layers(count: int | None, model) -> list[int] | None:
    """The indices of the last `count` transformer layers (None: every layer)."""
    if count is None:
        return None
    layers = getattr(model.config, "num_hidden_layers", None)
    if not isinstance(layers, int):
        raise ConfigError("model.adapter.top_layers: the model's config gives no num_hidden_layers")
    if count > layers:
        raise ConfigError(f"model.adapter.top_layers: {count}, but the model has {layers} layers")
    return list(range(layers - count, layers))


def _ia3_modules(adapter: AdapterConfig, model_type: str) -> tuple[Any, list[str]]:
    """IA³'s target and feed-forward modules: the section's, else peft's own tables for the model type."""
    from peft.utils.constants import (
        TRANSFORMERS_MODELS_TO_IA3_FEEDFORWARD_MODULES_MAPPING as FEEDFORWARD,
    )
    from peft.utils.constants import (
        TRANSFORMERS_MODELS_TO_IA3_TARGET_MODULES_MAPPING as TARGETS,
    )

    targets = adapter.target_modules
    if targets is None:
        if model_type not in TARGETS:
            raise ConfigError(
                f"model.adapter.target_modules: peft has no IA³ default for model type '{model_type}'; list the "
                "modules to scale (and model.adapter.feedforward_modules)"
            )
        targets = list(TARGETS[model_type])
    forward = adapter.feedforward_modules
    if forward is None:
        forward = [m for m in FEEDFORWARD.get(model_type, []) if not isinstance(targets, list) or m in targets]
    return targets, list(forward)


def _check_targets(targets: str | list[str] | None, model) -> None:
    """Each listed module name must match a module of the model (peft would fail later, inside the trainer)."""
    if not isinstance(targets, list):
        return
    names = [name for name, _ in model.named_modules()]
    for target in targets:
        if not any(name == target or name.endswith("." + target) for name in names):
            leaves = sorted({n.rsplit(".", 1)[-1] for n in names if n and not n.rsplit(".", 1)[-1].isdigit()})
            raise ConfigError(
                f"model.adapter.target_modules: '{target}' matches no module of this {model.config.model_type} "
                f"model (it has {', '.join(leaves[:12])}, ...)"
            )


def norm_module_names(model) -> list[str]:
    """The names (last part) of the model's LayerNorm/RMSNorm modules: for Qwen2 input_layernorm,
    post_attention_layernorm and the final norm."""
    return sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules() if name and _is_norm(module)})


def _is_norm(module) -> bool:
    import torch

    return isinstance(module, torch.nn.LayerNorm) or type(module).__name__.endswith(("RMSNorm", "LayerNorm"))


def _half(model) -> bool:
    import torch

    return getattr(model, "dtype", None) in (torch.bfloat16, torch.float16)


def keep_vectors_fp32(model) -> list[str]:
    """Hold the trained IA³ scales and norm weights in float32; returns the names of the parameters changed.

    They start at 1.0, where a bfloat16 step is 2^-7: Adam's updates (about the learning rate, 1e-6 to 1e-4 in
    GRPO) round away and the vectors never move. TRL casts every trainable parameter of a quantized model to
    bfloat16 (LoRA's A and B start near zero, where bfloat16 is fine), and peft leaves norm copies in the model's
    dtype. So call this after the trainer is built and before it creates its optimizer (in `train()`). A norm
    kept in float32 returns its output in its input's dtype (a forward hook), so the layers after it still see
    the model's dtype; peft's IA³ layers convert on their own. BitFit biases stay in the model's dtype: bitsandbytes
    casts a 4-bit layer's bias to its compute dtype at every forward.
    """
    import torch

    if not hasattr(model, "peft_config"):  # all weights train (kind none): the model's dtype is the user's choice
        return []
    changed = []
    for module_name, module in model.named_modules():
        is_norm = _is_norm(module)
        if not (is_norm or module_name.endswith(".ia3_l")):
            continue
        for name, param in module.named_parameters(recurse=False):
            if param.requires_grad and param.dtype in (torch.bfloat16, torch.float16):
                param.data = param.data.float()
                changed.append(f"{module_name}.{name}")
                if is_norm and not getattr(module, "_azr_output_cast", False):
                    module.register_forward_hook(_output_like_input)
                    module._azr_output_cast = True
    if changed:
        log.info("adapter: %d trained vectors (IA³ scales, norm weights) kept in float32", len(changed))
    return changed


def _output_like_input(module, args, output):
    if args and hasattr(args[0], "dtype") and hasattr(output, "to"):
        return output.to(args[0].dtype)
    return output


def trainable_parameters(model) -> dict[str, int]:
    """Trainable and total parameter counts, as in the unquantized model (4-bit weights hold two per byte)."""
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if hasattr(model, "get_nb_trainable_parameters"):  # a PeftModel counts 4-bit weights unpacked
        trainable, total = model.get_nb_trainable_parameters()
        return {"trainable": trainable, "total": total}
    return {"trainable": trainable, "total": sum(p.numel() for p in model.parameters())}
