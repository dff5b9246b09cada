"""The trainer arguments a run trains with: `TrainerArgs` (the `trl.GRPOConfig` and `trl.SFTConfig` and the token
budgets they were built with), built by `build_trainer_args` from a recipe whose rules `azr.config` has checked
(`azr.config.check_recipe`) through `azr.training.trainer_args`. A run builds them once, in its context, after its
vLLM server has started (TRL's server mode needs the server's address); the preflight builds them with the server's
fields left empty.

The reward weights TRL gets are the recipe's, blended with self-play's when it is on (`reward_weights`, which checks
every reward name and its params without starting a sandbox); in Absolute Zero mode, 1 for each of its own two.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from azr.config import AzrConfig, check_groups, sequence_lengths
from azr.training.trainer_args import check_grpo_inputs, grpo_args, sft_args


@dataclass
class TrainerArgs:
    """What one run trains with: `grpo` (trl.GRPOConfig), `sft` (trl.SFTConfig, None without a warm start) and the
    token budgets they were built with."""

    grpo: Any
    sft: Any | None
    max_completion_length: int
    max_seq_length: int


def build_trainer_args(
    cfg: AzrConfig,
    weights: Sequence[float] | None = None,
    cpu: bool | None = None,
    vllm_fields: dict[str, Any] | None = None,
    warn: bool = True,
) -> TrainerArgs:
    """The run's trainer arguments; `weights` are the reward weights TRL gets (default: `reward_weights(cfg)`),
    `cpu` whether it trains on the CPU (default: no GPU visible), `vllm_fields` the GRPOConfig fields of TRL's vLLM
    modes for the server the run started (`Sidecar.grpo_fields`; default: those of `vllm.mode` without a server, as
    the recipe check builds them); `warn` False once the recipe check has reported the deprecations. Raises
    ConfigError naming the field at fault."""
    cpu = not on_gpu() if cpu is None else cpu
    weights = reward_weights(cfg) if weights is None else list(weights)
    vllm_fields = vllm_placeholders(cfg) if vllm_fields is None else vllm_fields
    grpo = grpo_args(cfg, weights, cpu, vllm_fields, warn)
    check_groups(cfg, grpo)
    sft = sft_args(cfg, cpu, warn) if cfg.sft.enabled else None
    return trainer_args(cfg, grpo, sft)


def trainer_args(cfg: AzrConfig, grpo: Any, sft: Any | None) -> TrainerArgs:
    lengths = sequence_lengths(cfg)
    return TrainerArgs(grpo, sft, lengths["max_completion_length"], lengths["max_seq_length"])


def vllm_placeholders(cfg: AzrConfig) -> dict[str, Any]:
    """The GRPOConfig fields of `vllm.mode` before its server runs (no address yet): what the recipe check builds."""
    from azr.serving import grpo_fields

    check_grpo_inputs(cfg)  # the lengths below read grpo.max_completion_length

    return grpo_fields(cfg, None, 0, sequence_lengths(cfg)["max_seq_length"])


def on_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def reward_weights(cfg: AzrConfig) -> list[float]:
    """One weight per reward function TRL gets: the recipe's, blended with self-play's when it is on; in Absolute
    Zero mode, 1 for each of its own two (propose, solve). Checks every reward name and its params without starting
    a sandbox."""
    from azr.rewards import check_rewards

    if cfg.mode == "absolute_zero":
        return [1.0, 1.0]

    funcs = check_rewards(cfg.rewards)
    weights = [float(spec.weight) for spec in cfg.rewards]
    if cfg.self_play.enabled:
        from azr.selfplay import blend_rewards

        funcs, weights = blend_rewards(funcs, weights, None, cfg.self_play.weight)
    return weights
