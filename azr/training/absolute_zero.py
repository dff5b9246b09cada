"""Absolute Zero mode in `azr train`: the recipe checks, the seeds, the warm start's rows, and the GRPO phase in which
the policy proposes and solves its own tasks.

`run_train` stays the one linear recipe. With `mode: absolute_zero`, the recipe check (`azr.training.preflight`)
calls `check_launch` and `prompt_groups` before anything is written; `run_train` calls `warm_start_dataset` in its
SFT phase and `absolute_zero_phase` instead of its GRPO phase. Outputs beside the usual ones:
`absolute_zero/seeds.jsonl` (the validated seeds, computed once, so a resume seeds identically),
`absolute_zero/{type}.jsonl` (the buffers at the end) and, in each checkpoint, `absolute_zero/` (buffers and the
rollout's random state) from which a resume continues exactly.
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from pathlib import Path
from typing import Any

from azr.absolute_zero import (
    Buffers,
    Rollout,
    build_az_rewards,
    build_judge,
    build_validator,
    fill_buffers,
    read_triplets,
    rules_text,
    slot_rows,
    valid_seeds,
    warm_start_pairs,
    write_triplets,
)
from azr.config import AzrConfig
from azr.data import Task
from azr.errors import ConfigError, NotAvailableError
from azr.logs import atomic_write_json

log = logging.getLogger(__name__)
FOLDER = "absolute_zero"


def check_launch(cfg: AzrConfig) -> None:
    """Refuse what this mode cannot do, before the trainer arguments are built (under a launcher, building them
    starts the distributed set-up) and before anything is written."""
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
    for path in cfg.absolute_zero.seed_files:
        read_triplets(Path(path))  # a malformed seed file stops the run here (file:line), before anything is written


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


def seeds_once(cfg: AzrConfig, out: Path, tasks: list[Task], validator: Any) -> list[Any]:
    """The valid seed triplets, validated on the first call and read from `absolute_zero/seeds.jsonl` after."""
    path = out / FOLDER / "seeds.jsonl"
    if path.exists():
        return read_triplets(path)
    az = cfg.absolute_zero
    seeds = valid_seeds(az.seed, tasks, az.induction_inputs, validator)
    singles = sum(not t.many for t in seeds)
    log.info("absolute_zero: %d seed triplets and %d induction sets pass validation", singles, len(seeds) - singles)
    if not singles and {"deduction", "abduction"} & set(az.types):
        raise ConfigError(f"absolute_zero.seed: no valid seed triplet from {az.seed!r} (data.train: {cfg.data.train})")
    if singles == len(seeds) and "induction" in az.types:
        raise ConfigError(
            f"absolute_zero.seed: no task gives {az.induction_inputs} valid inputs for an induction seed; lower "
            "absolute_zero.induction_inputs or leave induction out of absolute_zero.types"
        )
    write_triplets(path, seeds)
    return seeds


def warm_start_dataset(cfg: AzrConfig, out: Path, tasks: list[Task], tokenizer, template_kwargs: dict[str, Any]):
    """SFT rows on the seeds: each type's solver prompt with its answer and a proposer prompt answered by a seed,
    rendered through the chat template exactly as GRPO renders them."""
    from datasets import Dataset

    az = cfg.absolute_zero
    seeds = seeds_once(cfg, out, tasks, build_validator(cfg.sandbox, az))
    singles, sets = [t for t in seeds if not t.many], [t for t in seeds if t.many]
    rules = rules_text(az.allowed_imports, az.max_output_chars)
    rng = random.Random(cfg.seed)
    pairs = warm_start_pairs(
        az.types, singles, sets, az.references, az.induction_inputs, az.induction_shown, rules, rng
    )
    rows = [
        {
            "prompt": tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True, **template_kwargs
            ),
            "completion": answer + tokenizer.eos_token,
        }
        for messages, answer in pairs
    ]
    return Dataset.from_list(rows)


class AbsoluteZeroState:
    """What a checkpoint needs beyond the HF Trainer's own: the buffers and the rollout's random state."""

    def __init__(self, buffers: Buffers, rollout: Rollout):
        self.buffers, self.rollout = buffers, rollout

    def save(self, folder: Path) -> None:
        target = Path(folder) / FOLDER
        self.buffers.save(target)
        atomic_write_json(target / "rollout.json", self.rollout.state())

    def load(self, folder: Path) -> None:
        source = Path(folder) / FOLDER
        if not (source / "rollout.json").exists():
            raise ConfigError(f"--resume-from {folder}: no {FOLDER}/rollout.json; not an absolute_zero checkpoint")
        self.buffers.load(source)
        self.rollout.load_state(json.loads((source / "rollout.json").read_text()))


def absolute_zero_phase(run: Any, model, tokenizer, tasks: list[Task], policy_dir: str):
    """GRPO on proposer and solver rows (the counterpart of run_train's GRPO phase); returns the trained model."""
    from datasets import Dataset
    from transformers import PrinterCallback

    from azr.models import build_peft_config
    from azr.training.absolute_zero_trainer import AbsoluteZeroTrainer, CheckSandboxHealth, TrainerGenerator, az_records
    from azr.training.callbacks import MetricsCallback, SaveBesideCheckpoints
    from azr.training.run import finish_grpo

    cfg, out, az = run.cfg, run.out, run.cfg.absolute_zero
    started = time.monotonic()
    groups = prompt_groups(cfg, run.args.grpo)
    validator = build_validator(cfg.sandbox, az)
    buffers = Buffers(az.buffer_size, az.types)
    rollout = Rollout(az, buffers, validator, TrainerGenerator, cfg.seed)
    state = AbsoluteZeroState(buffers, rollout)
    checkpoint = run.resume.checkpoint if run.resume.phase == "grpo" else None
    if checkpoint:
        state.load(Path(checkpoint))
    else:
        fill_buffers(buffers, seeds_once(cfg, out, tasks, validator), random.Random(cfg.seed))
    log.info("absolute_zero: buffers %s", ", ".join(f"{k} {n}" for k, n in buffers.sizes().items()))
    judge = build_judge(cfg.sandbox, az, cfg.answer_format)
    funcs = build_az_rewards(judge, az)
    record = MetricsCallback(run.metrics, "grpo")
    observers = [lambda batch: run.generations.put(az_records(batch, funcs))] if run.generations is not None else []
    trainer = AbsoluteZeroTrainer(
        model=model,
        reward_funcs=funcs,
        args=run.args.grpo,  # reward_weights 1 for each of funcs (azr.training.args.reward_weights)
        train_dataset=Dataset.from_list(slot_rows(az.types, groups)),
        processing_class=tokenizer,
        peft_config=None if cfg.sft.enabled else build_peft_config(cfg.model.adapter, model),
        callbacks=[
            record,
            run.console.callback("grpo"),
            SaveBesideCheckpoints(state),
            CheckSandboxHealth(validator, judge),
        ],
        grader=None,
        observers=observers,
        rollout=rollout,
        baseline=az.baseline,
    )
    trainer.remove_callback(PrinterCallback)
    record.trainer = trainer
    for n in range(0 if checkpoint else az.seed_rounds):  # a resumed run has its buffers
        valid = rollout.seed_round(TrainerGenerator(trainer), trainer.num_generations)
        log.info("absolute_zero: seeding round %d: valid proposals %s, buffers %s", n + 1, valid, buffers.sizes())
    trainer.train(resume_from_checkpoint=checkpoint)
    buffers.save(out / FOLDER)
    return finish_grpo(run, trainer, tokenizer, policy_dir, started)
