"""What `azr train` does before any slow work, and all that `azr config check` does: the recipe's rules
(`azr.config.check_recipe`, task files read), TRL's classes built from it (`azr.training.trainer_args`: TRL's own
checks, those it makes only inside `train()` included), the rules over their batch (`azr.config.check_batch`),
reward names, Absolute Zero's seed files and the model's source. Nothing starts and nothing is written.
"""

from __future__ import annotations

from pathlib import Path

from azr.absolute_zero import read_triplets
from azr.config import AzrConfig, check_batch, check_recipe
from azr.models import check_model, quiet_third_party
from azr.training.args import TrainerArgs, on_gpu, reward_weights, trainer_args, vllm_placeholders
from azr.training.trainer_args import grpo_args, sft_args


def preflight(cfg: AzrConfig) -> TrainerArgs:
    """Every user error of a training recipe, or the trainer arguments it checked (built without the vLLM server's
    address: a run builds its own once the server is up)."""
    quiet_third_party()  # before TRL is first imported: importing it imports bitsandbytes, which talks
    check_recipe(cfg)
    weights, cpu = reward_weights(cfg), not on_gpu()
    grpo = grpo_args(cfg, weights, cpu, vllm_placeholders(cfg))
    check_batch(cfg, grpo)
    sft = sft_args(cfg, cpu) if cfg.sft.enabled else None
    if cfg.mode == "absolute_zero":
        for path in cfg.absolute_zero.seed_files:
            read_triplets(Path(path))  # a malformed seed file stops the run (file:line) before anything is written
    check_model(cfg.model)
    return trainer_args(cfg, grpo, sft)
