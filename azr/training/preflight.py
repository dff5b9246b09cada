"""A training recipe checked whole before any slow work: what `azr train` does first, and all that `azr config
check` does.

The recipe's own rules live in `azr.config` (`azr.config.recipe.check_recipe`: the rules across sections, TRL's
trainer arguments, the folders, and every task file read as tasks: its first bad row named `file:line`). This adds
what only other packages know, in the same pass: every reward name and its params (`azr.rewards`' registry,
through `reward_weights`), Absolute Zero's seed files (read by `azr.absolute_zero`), and the model's source (a
directory, or a hub id that can be fetched). Nothing starts: no sandbox, no model, no file written. Each problem
is one line naming the field (ConfigError / DataError, exit 2).
"""

from __future__ import annotations

from pathlib import Path

from azr.absolute_zero import read_triplets
from azr.config import AzrConfig
from azr.config import check_recipe as check_recipe_rules
from azr.models import check_model, quiet_third_party
from azr.training.args import TrainerArgs, on_gpu, reward_weights, trainer_args, vllm_placeholders


def check_recipe(cfg: AzrConfig) -> TrainerArgs:
    """Every user error of a training recipe, or the trainer arguments it checked (built without the vLLM server's
    address: a run builds its own once the server is up)."""
    quiet_third_party()  # before TRL is first imported: importing it imports bitsandbytes, which talks
    weights = reward_weights(cfg)
    grpo, sft = check_recipe_rules(cfg, weights, cpu=not on_gpu(), vllm_fields=vllm_placeholders(cfg))
    if cfg.mode == "absolute_zero":
        for path in cfg.absolute_zero.seed_files:
            read_triplets(Path(path))  # a malformed seed file stops the run (file:line) before anything is written
    check_model(cfg.model)
    return trainer_args(cfg, grpo, sft)
