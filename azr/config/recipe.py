"""A training recipe checked whole, before any slow work: the rules across sections, the folders and task files it
names (`check_recipe`), and the rules over the trainer's batch as TRL resolves it (`check_batch`). Imports no
TRL: `azr.training.preflight` builds TRL's classes and calls both. Each problem is one line naming the field; the
machine's own facts (GPUs, vLLM) are `azr.serving`'s, at launch.
"""

from __future__ import annotations

import errno
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from azr.config.environments import environment_of
from azr.config.sections import AzrConfig
from azr.data import Task, check_task_limits, load_tasks
from azr.errors import ConfigError, DataError, NotAvailableError

log = logging.getLogger(__name__)


class Batch(Protocol):
    """The batch fields of a `trl.GRPOConfig` the rules read (TRL resolves the ones a recipe leaves unset)."""

    per_device_train_batch_size: int
    steps_per_generation: int
    generation_batch_size: int
    num_generations: int
    num_iterations: int
    gradient_accumulation_steps: int


def check_recipe(cfg: AzrConfig) -> None:
    """Every rule of a training recipe that needs no trainer arguments: Absolute Zero's launch, asynchronous GRPO's
    engine, the output folder, and every task file the recipe names, read."""
    if cfg.mode == "absolute_zero":
        check_launch(cfg)  # before the trainer arguments: under a launcher, building them starts torch.distributed
    check_staleness(cfg)
    check_output_dir(Path(cfg.output_dir))
    check_task_files(cfg)


def check_batch(cfg: AzrConfig, grpo: Batch) -> None:
    """The rules between the recipe and the trainer's batch `grpo` (its trl.GRPOConfig)."""
    check_groups(cfg, grpo)
    check_generation_steps(cfg, grpo)
    if cfg.mode == "absolute_zero":
        prompt_groups(cfg, grpo)


def sequence_lengths(cfg: AzrConfig) -> dict[str, int]:
    """The completion budget includes the thinking budget when the policy thinks."""
    completion = int(cfg.grpo.get("max_completion_length", 256))
    if cfg.thinking.policy:
        completion += cfg.thinking.policy_budget_tokens
    return {"max_completion_length": completion, "max_seq_length": completion + 2048}


def check_groups(cfg: AzrConfig, grpo: Batch) -> None:
    """Hinted retries and frontier replay swap whole prompt groups of the generation batch (all processes' rows,
    composed by the group sampler on the main one: a group may straddle two processes); each share must come to at
    least one group, or the feature never acts. That the batch holds whole groups is TRL's own check. Dynamic
    sampling keeps or passes over the groups each process generated, so a process's batch must be whole groups."""
    local = grpo.per_device_train_batch_size * grpo.steps_per_generation
    if cfg.sampling.dynamic and local % grpo.num_generations:
        raise ConfigError(
            f"sampling.dynamic: keeps or passes over whole prompt groups on each process, but each process generates "
            f"{local} completions per batch, not a multiple of grpo.num_generations={grpo.num_generations}"
        )
    groups = grpo.generation_batch_size // grpo.num_generations
    shares = {
        "teacher_assist.hint_share": (cfg.teacher_assist.enabled, cfg.teacher_assist.hint_share),
        "curriculum.replay_rate": (cfg.curriculum.replay, cfg.curriculum.replay_rate),
    }
    for name, (on, share) in shares.items():
        if on and share > 0 and int(share * groups) == 0:
            raise ConfigError(
                f"{name}: {share:g} of the {groups} prompt group(s) in a generation batch rounds down to none, so "
                f"it would never act; raise it to at least {1 / groups:.3g} or generate more groups per batch"
            )


def check_task_files(cfg: AzrConfig) -> None:
    """Every task file the recipe names reads as tasks (column maps and formats applied; its first bad row named
    `file:line`), and no task asks for limits over the sandbox's ceilings."""
    data, sandbox = cfg.data, cfg.sandbox
    if data.min_kill_rate is not None and data.audit is None:
        raise ConfigError("data.min_kill_rate: needs data.audit (an audit.jsonl from `azr data audit TRAIN --out DIR`)")
    if data.audit is not None and not Path(data.audit).is_file():
        raise ConfigError(f"data.audit: {data.audit}: file not found (`azr data audit TRAIN --out DIR` writes one)")
    split = {"public_tests": data.public_tests}
    train = load_tasks(data.train, data.column_map, data.format, data.compare, data.float_tol, **split)
    check_task_limits(train, sandbox.max_task_timeout_s, sandbox.max_task_memory_mb, str(data.train))
    if environment_of(cfg).hidden_tests:
        check_hidden_tests(train, "rollouts.env", str(data.train), data.public_tests)
    if data.hardened is not None:
        check_hardened(cfg, train)
    for held_out in {data.eval, cfg.eval.tasks} - {None}:  # eval.tasks: the held-out evaluation during GRPO
        tasks = load_tasks(held_out, data.eval_column_map, data.eval_format, data.compare, data.float_tol, **split)
        check_task_limits(tasks, sandbox.max_task_timeout_s, sandbox.max_task_memory_mb, str(held_out))
        if cfg.eval.turns > 1 and cfg.eval.every_steps and held_out == (cfg.eval.tasks or data.eval):
            check_hidden_tests(tasks, "eval.turns", str(held_out), data.public_tests)


def check_hidden_tests(tasks: Sequence[Task], name: str, label: str, public: int | None) -> None:
    """Execution feedback scores on hidden tests: a task file where no task has one left over after its public
    tests cannot train or evaluate with feedback (tasks without any are skipped and counted where they run)."""
    if any(task.split_tests()[1] for task in tasks):
        return
    how = f"data.public_tests={public}" if public is not None else "its format's split (data.public_tests sets one)"
    raise ConfigError(
        f"{name}: no task of {label} has a hidden test left after its public ones ({how}); feedback needs hidden "
        "tests to score"
    )


def check_hardened(cfg: AzrConfig, train: Sequence[Task]) -> None:
    """data.hardened: a task file of the training tasks (ids among data.train's), with the audit that says which are
    weak, in a mode that trains on them and with a threshold that leaves some weak task in training."""
    data, name = cfg.data, "data.hardened"
    if cfg.mode == "absolute_zero":
        raise ConfigError(
            f"{name}: GRPO mode only (Absolute Zero trains on tasks it proposes, which have no hardened cases)"
        )
    if data.audit is None:
        raise ConfigError(f"{name}: needs data.audit (the audit.jsonl whose kill rates say which tasks are weak)")
    if data.min_kill_rate is not None and data.hardened_kill_rate <= data.min_kill_rate:
        raise ConfigError(
            f"data.hardened_kill_rate: {data.hardened_kill_rate} is not above data.min_kill_rate "
            f"{data.min_kill_rate}: every task it counts weak is dropped from training, so none would be checked"
        )
    if not Path(data.hardened).is_file():
        raise ConfigError(f"{name}: {data.hardened}: file not found (`azr data audit TRAIN --harden FILE` writes one)")
    try:
        hardened = load_tasks(data.hardened, compare=data.compare, float_tol=data.float_tol)
    except DataError as exc:
        raise ConfigError(f"{name}: {exc}") from None
    ids = {t.id for t in train}
    unknown = [t.id for t in hardened if t.id not in ids]
    if unknown:
        more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
        raise ConfigError(
            f"{name}: task {unknown[0]!r}{more} is not a task of data.train; the file must be `--harden`'s output "
            "for the training file"
        )
    check_task_limits(hardened, cfg.sandbox.max_task_timeout_s, cfg.sandbox.max_task_memory_mb, name)


def check_staleness(cfg: AzrConfig) -> None:
    """Asynchronous GRPO (`sampling.max_staleness` >= 1) needs a generation engine apart from the trainer that serves
    several policy versions at once; each combination that cannot give one is refused with the reason."""
    if cfg.sampling.max_staleness < 1:
        return
    name = "sampling.max_staleness"
    refusals = {
        "off": "needs vllm.mode: adapter; HF generate runs in the trainer, so generation could not overlap training",
        "colocate": "needs vllm.mode: adapter; colocate mode generates inside the trainer's process, between steps",
        "server": "needs vllm.mode: adapter; server mode's NCCL sync replaces the served weights in place, so a "
        "sample could not be tagged with (or generated by) the version it claims",
    }
    if cfg.vllm.mode in refusals:
        raise ConfigError(f"{name}: {refusals[cfg.vllm.mode]}")
    others = {
        "mode": (
            cfg.mode == "absolute_zero",
            "Absolute Zero generates through its own rollout function, proposals then solutions from buffers it "
            "fills as it trains, so there is no batch to sample ahead",
        ),
        "grpo.vllm_importance_sampling_correction": (
            cfg.grpo.get("vllm_importance_sampling_correction") is False,
            "stale samples would be trained without the off-policy correction",
        ),
    }
    for field_name, (on, reason) in others.items():
        if on:
            raise ConfigError(f"{name}: not with {field_name} in this version ({reason})")
    # Several training processes work: the main one queues every process's rows and hands each its slice.


def check_generation_steps(cfg: AzrConfig, grpo: Batch) -> None:
    """A batch sampled one generation ahead is as many policy versions old when it trains as there are optimizer
    steps between two generations: a smaller `sampling.max_staleness` could never be met."""
    every = steps_per_generation(grpo)
    if 0 < cfg.sampling.max_staleness < every:
        raise ConfigError(
            f"sampling.max_staleness: {cfg.sampling.max_staleness} is less than the {every} optimizer steps between "
            f"two generations (grpo.steps_per_generation x grpo.num_iterations / gradient_accumulation_steps), so no "
            f"batch sampled ahead could train; set it to {every} (one generation ahead) or a multiple"
        )


def steps_per_generation(grpo: Batch) -> int:
    """Optimizer steps between two of TRL's generations (its `steps_per_generation` counts micro-batches)."""
    return -(-grpo.steps_per_generation * grpo.num_iterations // grpo.gradient_accumulation_steps)


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


def prompt_groups(cfg: AzrConfig, args: Batch) -> int:
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


RUN_MARKER = ".azr-run"  # the first file a run writes into output_dir: the folder belongs to an azr run
_NOT_FOR_RUNS = ("/proc", "/sys")  # the kernel's own trees, whatever is mounted in them
# File systems that hold the kernel's objects, not files (/dev's devtmpfs, /dev/pts...): /dev/shm (a tmpfs) is fine.
_KERNEL_FILESYSTEMS = {"proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs"}
_KERNEL_FILESYSTEMS |= {"securityfs", "bpf", "configfs", "pstore", "mqueue", "fusectl", "efivarfs", "binfmt_misc"}


def filesystem_type(path: Path) -> str | None:
    """The type of the file system `path` (an absolute, resolved path) is on, from /proc/self/mountinfo: its
    longest mount point that holds the path. None where that cannot be read."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    best, found = -1, None
    for line in lines:
        fields, _, tail = line.partition(" - ")
        parts = fields.split()
        if len(parts) < 5 or not tail:
            continue
        point = Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), parts[4]))  # \040 is a space
        if (point == path or point in path.parents) and len(point.parts) > best:
            best, found = len(point.parts), tail.split()[0]
    return found


def check_output_dir(out: Path) -> None:
    """`out` is a folder a run may write into: new (its nearest existing ancestor a writable folder), empty, or an azr
    run (it holds `RUN_MARKER`). The file system's root, a kernel file system and a folder that holds other files
    (a project's own, or `.`) are refused: a run would overwrite what is there."""
    resolved = Path(os.path.realpath(out))
    if resolved == Path(resolved.anchor):
        raise ConfigError(f"output_dir: {out} is the file system's root; choose a new folder for the run")
    existing = resolved
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    kernel = any(resolved == Path(top) or Path(top) in resolved.parents for top in _NOT_FOR_RUNS)
    if kernel or filesystem_type(existing) in _KERNEL_FILESYSTEMS:
        raise ConfigError(f"output_dir: {out} is on a kernel file system ({resolved}); choose a new folder for the run")
    if resolved.is_dir():
        try:
            names = os.listdir(resolved)
        except OSError as exc:
            raise ConfigError(f"output_dir: cannot read {out}: {exc.strerror}") from None
        if names and RUN_MARKER not in names:
            raise ConfigError(
                f"output_dir: {out} holds files and is not an azr run (no {RUN_MARKER}); choose a new or empty folder"
            )
    if not existing.is_dir():
        reason = os.strerror(errno.ENOTDIR)
    elif not os.access(existing, os.W_OK | os.X_OK):
        reason = os.strerror(errno.EACCES)
    else:
        return
    raise ConfigError(f"output_dir: cannot create {out}: {reason}")
