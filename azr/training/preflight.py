"""A recipe checked whole for training before any slow work: what `azr train` does first, and all that
`azr config check` does.

`check_recipe` builds the trainer arguments (TRL's own checks and azr's, see `azr.training.args`), then checks that
every reward exists, that the folders and files the recipe names do (output_dir can be made, task files, the model
directory, or a hub id that can be fetched), all before a sandbox starts, a model loads or a file is written. Each
problem is one line naming the field (ConfigError / DataError, exit 2).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from azr.config import AzrConfig
from azr.data import check_task_source
from azr.errors import ConfigError
from azr.models import check_model, quiet_third_party
from azr.training.args import TrainerArgs, build_trainer_args


def check_recipe(cfg: AzrConfig) -> TrainerArgs:
    """Every user error of a training recipe, or the trainer arguments the run will use."""
    quiet_third_party()  # before TRL is first imported: importing it imports bitsandbytes, which talks
    if cfg.mode == "absolute_zero":
        from azr.training.absolute_zero import check_launch, prompt_groups

        check_launch(cfg)
    args = build_trainer_args(cfg)
    if cfg.mode == "absolute_zero":
        prompt_groups(cfg, args.grpo)
    check_output_dir(Path(cfg.output_dir))
    for source in (cfg.data.train, cfg.data.eval, cfg.eval.tasks):
        if source:
            check_task_source(source)
    check_model(cfg.model)
    return args


def check_output_dir(out: Path) -> None:
    """`out` exists as a writable folder or can be made: its nearest existing ancestor is a writable folder."""
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        reason = os.strerror(errno.ENOTDIR)
    elif not os.access(existing, os.W_OK | os.X_OK):
        reason = os.strerror(errno.EACCES)
    else:
        return
    raise ConfigError(f"output_dir: cannot create {out}: {reason}")
