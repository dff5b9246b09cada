"""The model card written beside the final adapter or model: what it was trained from, on what, and how it did.

Built with huggingface_hub's ModelCard so the metadata block is what the Hub expects.
"""

from __future__ import annotations

from pathlib import Path

from azr import __version__
from azr.config import AdapterConfig, AzrConfig
from azr.inputs import load_json
from azr.logs import atomic_write_text
from azr.training.state import RunState


def write_model_card(folder: Path, cfg: AzrConfig, policy_dir: str, state: RunState) -> Path:
    from huggingface_hub import ModelCard, ModelCardData

    adapter = cfg.model.adapter
    data = ModelCardData(
        base_model=None if Path(cfg.model.name_or_path).exists() else cfg.model.name_or_path,
        library_name="peft" if adapter.enabled else "transformers",
        tags=["azr", "grpo", "trl", "code", *([adapter.kind.replace("_", "-")] if adapter.enabled else [])],
    )
    before = state.info("eval_before") or {}
    rewards = ", ".join(f"{spec.weight:g} x {spec.name}" for spec in cfg.rewards)
    lines = [
        f"---\n{data.to_yaml()}\n---",
        f"# {_TITLES[adapter.kind]} trained with azr {__version__} (GRPO, code-execution rewards)",
        "",
        f"- Base model: `{cfg.model.name_or_path}`"
        + (f" (quantization {cfg.model.quantization})" if adapter.enabled else ""),
        f"- Adapter: {adapter_summary(adapter, Path(folder))}",
        f"- Warm start: {_warm_start(cfg, policy_dir)}",
        f"- Training tasks: `{cfg.data.train}`; rewards: {rewards}; answer format: {cfg.answer_format}",
        f"- GRPO steps: {(state.info('grpo') or {}).get('steps', '?')}; seed {cfg.seed}",
    ]
    if before.get("pass_rate") is not None:
        lines.append(f"- Train pass rate before GRPO: {before['pass_rate']:.3f} (mean reward {before['reward']:.3f})")
    lines += ["", "The run's resolved `config.yaml`, `metrics.jsonl` and `summary.json` sit in the parent folder.", ""]
    card = ModelCard("\n".join(lines))
    return atomic_write_text(Path(folder) / "README.md", str(card))  # as ModelCard.save, through azr's one writer


_TITLES = {"lora": "LoRA adapter", "ia3": "IA³ adapter", "ln_tuning": "LN-tuning adapter", "none": "Model"}


def adapter_summary(adapter: AdapterConfig, folder: Path) -> str:
    """The adapter's kind and options as trained, with the modules peft resolved (read from adapter_config.json)."""
    if not adapter.enabled:
        return "none (all weights trained)"
    try:
        saved = load_json((folder / "adapter_config.json").read_text())
    except (OSError, ValueError):
        saved = {}
    targets = saved.get("target_modules") or adapter.target_modules
    targets = ", ".join(sorted(targets)) if isinstance(targets, list) else targets
    parts = [f"kind {adapter.kind}", f"target modules {targets}"]
    if adapter.kind == "lora":
        parts += [f"r {adapter.r}", f"alpha {adapter.alpha}", f"dropout {adapter.dropout:g}"]
        parts += ["DoRA"] * adapter.dora + ["rsLoRA"] * adapter.rslora
        parts += [f"bias {adapter.bias} (BitFit)"] * (adapter.bias != "none")
        parts += ["norm weights trained (modules_to_save)"] * adapter.train_norms
    if adapter.kind == "ia3":
        forward = saved.get("feedforward_modules") or adapter.feedforward_modules or []
        parts.append(f"feed-forward modules {', '.join(sorted(forward)) or 'none'}")
    return "; ".join(parts)


def _warm_start(cfg: AzrConfig, policy_dir: str) -> str:
    if not cfg.sft.enabled:
        return "none"
    misses = f" and up to {cfg.sft.near_misses} failing near misses per task" if cfg.sft.near_misses else ""
    return f"SFT on reference answers{misses}, then GRPO from {policy_dir}"
