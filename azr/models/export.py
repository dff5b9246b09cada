"""`azr export`: an adapter merged into its base and saved as a full Hugging Face model (weights, tokenizer, model
card) that vLLM serves without LoRA support. `plan_export` checks the arguments and finds the base without
importing torch; `export_merged` merges with peft and writes, a quantized base dequantized first (docs/models.md).
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from azr.config import ModelConfig, load_config
from azr.errors import ConfigError
from azr.logs import atomic_write_text
from azr.models.adapters import read_adapter_config

log = logging.getLogger(__name__)
DTYPES = ("bfloat16", "float16", "float32")
MERGEABLE = {"LORA": "LoRA", "IA3": "IA³", "LN_TUNING": "LN tuning"}


@dataclass(frozen=True)
class ExportPlan:
    adapter: Path
    out: Path
    dtype: str
    model: ModelConfig  # the base, as it was trained on (quantization included)
    peft: dict[str, Any]  # adapter_config.json
    base_from: str  # where the base's settings came from


ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")  # the names peft saves and loads


def plan_export(adapter: str | Path, out: str | Path, dtype: str = "bfloat16", base: str | None = None) -> ExportPlan:
    """Check the export's arguments (one-line ConfigErrors, before anything heavy loads) and find the base model."""
    adapter, out = Path(adapter).expanduser(), Path(out).expanduser()
    if not adapter.is_dir():
        raise ConfigError(f"--adapter {adapter}: no such directory")
    peft_cfg = read_adapter_config(adapter)
    kind = peft_cfg["peft_type"]
    if kind not in MERGEABLE:
        raise ConfigError(f"--adapter {adapter}: peft type {kind!r} is not one azr merges ({', '.join(MERGEABLE)})")
    if dtype not in DTYPES:
        raise ConfigError(f"--dtype: expected one of {', '.join(DTYPES)}, got {dtype!r}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out}: already exists and is not an empty folder; choose a new one")
    if not any((adapter / name).is_file() for name in ADAPTER_WEIGHTS):
        raise ConfigError(f"--adapter {adapter}: no adapter weights ({' or '.join(ADAPTER_WEIGHTS)}) in it")
    model, base_from = _base_model(adapter, peft_cfg, base)
    return ExportPlan(adapter.resolve(), out.resolve(), dtype, model, peft_cfg, base_from)


def _base_model(adapter: Path, peft_cfg: dict[str, Any], base: str | None) -> tuple[ModelConfig, str]:
    """The base as trained: the run's recipe (final/, sft/final/ or a checkpoint of the run that saved the adapter,
    when it names the same base), else the base named in adapter_config.json, unquantized; `base` overrides."""
    named = peft_cfg.get("base_model_name_or_path")
    for parent in list(adapter.resolve().parents)[:3]:
        recipe = parent / "config.yaml"
        if recipe.is_file():
            try:
                model = load_config(recipe).model
            except ConfigError as exc:
                log.warning("export: %s not used: %s", recipe, exc)
                continue
            if base is None and model.name_or_path == named:
                return model, str(recipe)
    if base is not None:
        return ModelConfig(name_or_path=base), "--base"
    if not named:
        raise ConfigError(f"--adapter {adapter}: adapter_config.json names no base model; pass --base")
    return ModelConfig(name_or_path=named), "adapter_config.json"


def export_merged(plan: ExportPlan) -> Path:
    """Load the base in float32 (dequantized if it was trained quantized), merge the adapter with peft, round once
    to `plan.dtype`, and save model, tokenizer and model card; the folder appears whole or not at all."""
    import torch
    from peft import PeftModel
    from transformers import AutoTokenizer

    from azr.models.loading import build_model_and_tokenizer
    from azr.models.noise import quiet_third_party

    quiet_third_party()
    base, tokenizer = build_model_and_tokenizer(dataclasses.replace(plan.model, dtype="float32"))
    if plan.model.quantization != "none":
        log.warning(
            "export: the base was trained %s-quantized; it is dequantized to float32 and the adapter merged there, "
            "then rounded to %s: the merged model matches the trained one up to that rounding, not bit for bit",
            plan.model.quantization,
            plan.dtype,
        )
        base = base.dequantize(dtype=torch.float32)
        # transformers drops the quantization config but leaves these flags set, and peft refuses to merge IA³ into
        # a model that claims to be 4-bit or 8-bit.
        base.is_loaded_in_4bit = base.is_loaded_in_8bit = False
    merged = PeftModel.from_pretrained(base, str(plan.adapter)).merge_and_unload()
    merged = merged.to(getattr(torch, plan.dtype))
    if (plan.adapter / "tokenizer_config.json").is_file():  # a run saves the tokenizer it trained with
        tokenizer = AutoTokenizer.from_pretrained(str(plan.adapter))
    partial = plan.out.with_name(plan.out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    merged.save_pretrained(str(partial))
    tokenizer.save_pretrained(str(partial))
    _write_card(partial, plan)
    if plan.out.exists():
        plan.out.rmdir()  # empty, as plan_export checked
    partial.rename(plan.out)
    log.info("export: %s merged into %s, saved to %s (%s)", plan.adapter, plan.model.name_or_path, plan.out, plan.dtype)
    return plan.out


def _write_card(folder: Path, plan: ExportPlan) -> None:
    from huggingface_hub import ModelCard, ModelCardData

    local = Path(plan.model.name_or_path).exists()
    data = ModelCardData(
        base_model=None if local else plan.model.name_or_path,
        library_name="transformers",
        tags=["azr", "merged", MERGEABLE[plan.peft["peft_type"]].lower().replace(" ", "-")],
    )
    options = {k: plan.peft.get(k) for k in _OPTIONS.get(plan.peft["peft_type"], ()) if plan.peft.get(k) is not None}
    lines = [
        f"---\n{data.to_yaml()}\n---",
        f"# {MERGEABLE[plan.peft['peft_type']]} adapter merged into its base by azr export",
        "",
        f"- Base model: `{plan.model.name_or_path}` (quantization {plan.model.quantization}; from {plan.base_from})",
        f"- Adapter: `{plan.adapter}`; {', '.join(f'{k}={v}' for k, v in options.items())}",
        f"- Merged in float32, saved in {plan.dtype}"
        + (
            f"; the {plan.model.quantization} base was dequantized first, so this equals the trained model up to "
            "rounding"
            if plan.model.quantization != "none"
            else ""
        ),
        "",
    ]
    atomic_write_text(folder / "README.md", str(ModelCard("\n".join(lines))))  # as ModelCard.save, any string


_OPTIONS = {
    "LORA": ("r", "lora_alpha", "target_modules", "use_dora", "use_rslora", "bias", "modules_to_save"),
    "IA3": ("target_modules", "feedforward_modules"),
    "LN_TUNING": ("target_modules",),
}
