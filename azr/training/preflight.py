"""What `azr train` does before any slow work, and all that `azr config check` does: the recipe's rules
(`azr.config.check_recipe`, task files read), TRL's classes built from it (`azr.training.trl.trainer_args`: TRL's own
checks, those it makes only inside `train()` included, and the rules over their batch, `azr.config.check_batch`),
reward names, Absolute Zero's seed files and the model's source. Nothing starts and nothing is written.
"""

from __future__ import annotations

import logging
from pathlib import Path

from azr.absolute_zero import read_triplets
from azr.config import AzrConfig, check_recipe
from azr.models import check_model, quiet_third_party
from azr.training.trl import TrainerArgs, build_trainer_args, on_gpu, reward_weights

log = logging.getLogger(__name__)


def preflight(cfg: AzrConfig) -> TrainerArgs:
    """Every user error of a training recipe, or the trainer arguments it checked (built without the vLLM server's
    address: a run builds its own once the server is up)."""
    quiet_third_party()  # before TRL is first imported: importing it imports bitsandbytes, which talks
    check_recipe(cfg)
    cpu = not on_gpu()
    args = build_trainer_args(cfg, reward_weights(cfg), cpu)  # the one translation of a recipe into TRL's settings
    if cfg.mode == "absolute_zero":
        for path in cfg.absolute_zero.seed_files:
            read_triplets(Path(path))  # a malformed seed file stops the run (file:line) before anything is written
    check_model(cfg.model)
    if cpu:
        warn_memory(cfg, args.grpo.per_device_train_batch_size)
    return args


PROMPT_ALLOWANCE = 512  # tokens of prompt counted per sequence (the shipped tasks' prompts take 150-400)
MEMORY_SHARE = 0.9  # of the machine's RAM, beyond which a recipe is warned about


def warn_memory(cfg: AzrConfig, micro_batch: int) -> None:
    """A warning, before the model loads, when the recipe's step is estimated to need more than this machine has
    (`azr.models.memory`), naming the knobs that bring it down."""
    from azr.config import sequence_lengths
    from azr.models import GIB, estimate_training_memory, machine_memory, model_shape

    shape, total = model_shape(cfg.model.name_or_path), machine_memory()
    if shape is None or total is None:
        return
    tokens = sequence_lengths(cfg)["max_completion_length"] + PROMPT_ALLOWANCE
    estimate = estimate_training_memory(shape, cfg.model, micro_batch, tokens, cfg.vllm)
    if estimate is None or estimate.total <= MEMORY_SHARE * total:
        return
    log.warning(
        "memory: this recipe's training step is estimated at %s, more than this machine's %.1f GiB; lower "
        "grpo.per_device_train_batch_size (now %d; raise gradient_accumulation_steps to keep the batch), "
        "grpo.max_completion_length, or set model.gradient_checkpointing: true or model.adapter.top_layers",
        estimate.describe(),
        total / GIB,
        micro_batch,
    )
