"""The trainer arguments a run trains with: `TrainerArgs` (TRL's GRPOConfig and SFTConfig and their token budgets),
built by `build_trainer_args` from a checked recipe through `azr.training.trl.trainer_args`: the one translation of a
recipe into TRL's settings, which the preflight runs with the vLLM server's fields empty and a run again once its
server has started. TRL's reward weights are always those of the rubric GRPO trains with (`azr.training.rubrics`,
checked here without starting a sandbox): a recipe weighs its rewards with `rewards[i].weight`, and
`grpo.reward_weights` is refused at load.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from azr.config import AzrConfig, check_batch, sequence_lengths
from azr.training.trl.trainer_args import check_grpo_inputs, grpo_args, sft_args
from azr.training.trl.vllm import grpo_fields

if TYPE_CHECKING:
    from trl import GRPOConfig, SFTConfig


@dataclass
class TrainerArgs:
    """What one run trains with: `grpo` (trl.GRPOConfig), `sft` (trl.SFTConfig, None without a warm start) and the
    token budgets they were built with."""

    grpo: GRPOConfig
    sft: SFTConfig | None
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
    modes for the server the run started (`vllm.grpo_fields`; default: those of `vllm.mode` without a server, as
    the recipe check builds them); `warn` False once the recipe check has reported the deprecations. Raises
    ConfigError naming the field at fault."""
    cpu = not on_gpu() if cpu is None else cpu
    weights = reward_weights(cfg) if weights is None else list(weights)
    vllm_fields = vllm_placeholders(cfg) if vllm_fields is None else vllm_fields
    grpo = grpo_args(cfg, weights, cpu, vllm_fields, warn)
    check_batch(cfg, grpo)
    sft = sft_args(cfg, cpu, warn) if cfg.sft.enabled else None
    lengths = sequence_lengths(cfg)
    return TrainerArgs(grpo, sft, lengths["max_completion_length"], lengths["max_seq_length"])


def vllm_placeholders(cfg: AzrConfig) -> dict[str, Any]:
    """The GRPOConfig fields of `vllm.mode` before its server runs (no address yet): what the recipe check builds."""
    check_grpo_inputs(cfg)  # the lengths below read grpo.max_completion_length

    return grpo_fields(cfg, None, 0, sequence_lengths(cfg)["max_seq_length"])


def on_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def reward_weights(cfg: AzrConfig) -> list[float]:
    """One weight per reward function TRL gets (the trained rubric's). Checks every reward name and its params
    without starting a sandbox."""
    from azr.training.rubrics import run_rewards

    return run_rewards(cfg).trained_weights
