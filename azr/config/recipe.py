"""A training recipe checked whole, before any slow work: the rules across sections, the trainer arguments TRL
would refuse (`azr.config.trainer_args`), and the folders and task files the recipe names.

`check_recipe` is what `azr train` and `azr config check` run first (through `azr.training.check_recipe`, which
adds what only other packages know: the reward functions' registry and the model's source). Each problem is one
line naming the field (ConfigError / DataError, exit 2); a mode this version cannot run under the current launch
is NotAvailableError (exit 1). The machine's own facts (GPUs, the vLLM installs) are checked at launch by
`azr.serving` (`Sidecar.check`), not here: a recipe can be checked on another machine than the one it runs on.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from azr.config.sections import AzrConfig
from azr.config.trainer_args import check_groups, grpo_args, sft_args
from azr.data import check_task_limits, load_tasks
from azr.errors import ConfigError, NotAvailableError

log = logging.getLogger(__name__)


def check_recipe(cfg: AzrConfig, weights: Sequence[float], cpu: bool, vllm_fields: dict[str, Any]) -> tuple:
    """Every rule a training recipe must pass, or its checked (trl.GRPOConfig, trl.SFTConfig or None). `weights`
    are the reward weights TRL gets, `cpu` whether it trains on the CPU, `vllm_fields` the GRPOConfig fields of
    TRL's vLLM modes (without a server's address yet)."""
    if cfg.mode == "absolute_zero":
        check_launch(cfg)
    grpo = grpo_args(cfg, weights, cpu, vllm_fields)
    check_groups(cfg, grpo)
    sft = sft_args(cfg, cpu) if cfg.sft.enabled else None
    if cfg.mode == "absolute_zero":
        prompt_groups(cfg, grpo)
    check_output_dir(Path(cfg.output_dir))
    check_task_files(cfg)
    return grpo, sft


def check_task_files(cfg: AzrConfig) -> None:
    """Every task file the recipe names reads as tasks (column maps and formats applied; its first bad row named
    `file:line`), and no task asks for limits over the sandbox's ceilings."""
    data, sandbox = cfg.data, cfg.sandbox
    if data.min_kill_rate is not None and data.audit is None:
        raise ConfigError("data.min_kill_rate: needs data.audit (an audit.jsonl from `azr data audit TRAIN --out DIR`)")
    if data.audit is not None and not Path(data.audit).is_file():
        raise ConfigError(f"data.audit: {data.audit}: file not found (`azr data audit TRAIN --out DIR` writes one)")
    train = load_tasks(data.train, data.column_map, data.format, data.compare, data.float_tol)
    check_task_limits(train, sandbox.max_task_timeout_s, sandbox.max_task_memory_mb, str(data.train))
    for held_out in {data.eval, cfg.eval.tasks} - {None}:  # eval.tasks: the held-out evaluation during GRPO
        tasks = load_tasks(held_out, data.eval_column_map, data.eval_format, data.compare, data.float_tol)
        check_task_limits(tasks, sandbox.max_task_timeout_s, sandbox.max_task_memory_mb, str(held_out))


def check_launch(cfg: AzrConfig) -> None:
    """Refuse what Absolute Zero mode cannot do, before the trainer arguments are built (under a launcher, building
    them starts the distributed set-up) and before anything is written."""
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if world > 1:
        raise NotAvailableError(
            f"mode absolute_zero: runs in one training process in this version (WORLD_SIZE={world}); its buffers "
            "and rollout are per process. Launch it without multiple ranks (vLLM server mode can still generate)."
        )
    if cfg.sft.near_misses:
        raise ConfigError("sft.near_misses: not used with mode absolute_zero (its warm start teaches seed triplets)")
    for name, on in {"sampling.dynamic": cfg.sampling.dynamic, "curriculum.enabled": cfg.curriculum.enabled}.items():
        if on:  # the rollout composes its own batches of proposer and solver groups from the buffers
            raise ConfigError(f"{name}: not with mode absolute_zero (its batches are proposer and solver rows)")
    if cfg.rewards != AzrConfig().rewards:
        log.warning("rewards: not used with mode absolute_zero (its rewards are set under absolute_zero:)")


def prompt_groups(cfg: AzrConfig, args: Any) -> int:
    """The prompt groups per generation batch of the run's trl.GRPOConfig `args`: a multiple of one proposer and one
    solver share per task type (ConfigError otherwise)."""
    groups, slots = args.generation_batch_size // args.num_generations, 2 * len(cfg.absolute_zero.types)
    if groups % slots:
        raise ConfigError(
            f"grpo: a generation batch holds {groups} prompt groups (generation_batch_size {args.generation_batch_size}"
            f" / num_generations {args.num_generations}); mode absolute_zero needs a multiple of {slots}: one proposer "
            "and one solver group per task type in absolute_zero.types"
        )
    return groups


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
