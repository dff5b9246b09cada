"""Absolute Zero mode in `azr train`: the seeds, the warm start's rows, and the GRPO phase in which
the policy proposes and solves its own tasks.

`run_train` stays the one linear recipe. With `mode: absolute_zero`, the recipe check (`azr.config.recipe`)
refuses what the mode cannot do and checks its batch shape before anything is written; the SFT phase calls
`warm_start_dataset`, and `run_train` runs `absolute_zero_phase` instead of the GRPO phase. Outputs beside the usual
ones:
`absolute_zero/seeds.jsonl` (the validated seeds, computed once, so a resume seeds identically),
`absolute_zero/{type}.jsonl` (the buffers at the end) and, in each checkpoint, `absolute_zero/` (buffers and the
rollout's random state) from which a resume continues exactly.
"""

from __future__ import annotations

import logging
import random
import time
from pathlib import Path
from typing import Any

from azr.absolute_zero import (
    Buffers,
    Rollout,
    Validator,
    build_az_rubric,
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
from azr.config import AzrConfig, prompt_groups
from azr.data import Task
from azr.errors import ConfigError
from azr.inputs import load_json
from azr.logs import atomic_write_json
from azr.training.context import RunContext
from azr.training.grpo import finish_grpo

log = logging.getLogger(__name__)
FOLDER = "absolute_zero"


def seeds_once(cfg: AzrConfig, out: Path, tasks: list[Task], validator: Validator) -> list[Any]:
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
        self.rollout.load_state(load_json((source / "rollout.json").read_text()))


def absolute_zero_phase(ctx: RunContext):
    """GRPO on proposer and solver rows (the counterpart of `azr.training.grpo.grpo_phase`); returns the model."""
    from datasets import Dataset

    from azr.training.callbacks import SaveBesideCheckpoints
    from azr.training.trl.absolute_zero import AbsoluteZeroTrainer, TrainerGenerator, az_records

    cfg, out, az = ctx.cfg, ctx.out, ctx.cfg.absolute_zero
    started = time.monotonic()
    groups = prompt_groups(cfg, ctx.args.grpo)
    validator = build_validator(cfg.sandbox, az)
    buffers = Buffers(az.buffer_size, az.types)
    rollout = Rollout(az, buffers, validator, TrainerGenerator, cfg.seed)
    state = AbsoluteZeroState(buffers, rollout)
    checkpoint = ctx.checkpoint("grpo")
    if checkpoint:
        state.load(Path(checkpoint))
    else:
        fill_buffers(buffers, seeds_once(cfg, out, ctx.tasks, validator), random.Random(cfg.seed))
    log.info("absolute_zero: buffers %s", ", ".join(f"{k} {n}" for k, n in buffers.sizes().items()))
    judge = build_judge(cfg.sandbox, az, cfg.answer_format)
    funcs = list(build_az_rubric(judge, az).funcs)
    generations = ctx.generations
    observers = [lambda batch: generations.put(az_records(batch, funcs))] if generations is not None else []
    trainer = AbsoluteZeroTrainer(
        model=ctx.model,
        reward_funcs=funcs,
        args=ctx.args.grpo,  # its reward_weights are the rubric's (RunRewards.trained_weights)
        train_dataset=Dataset.from_list(slot_rows(az.types, groups)),
        processing_class=ctx.tokenizer,
        peft_config=ctx.grpo_peft_config(),
        callbacks=ctx.callbacks("grpo", SaveBesideCheckpoints(state)),
        grader=None,
        health=[validator, judge],
        observers=observers,
        rollout=rollout,
        baseline=az.baseline,
    )
    ctx.bind(trainer)
    if cfg.eval.stop_on_alarm:  # the alarms (a length collapse, completions at the cap) are raised by ctx.metrics
        from azr.training.alarms import stop_on_alarm

        stop_on_alarm(trainer, ctx.metrics, ctx.ranks.world)
    for n in range(0 if checkpoint else az.seed_rounds):  # a resumed run has its buffers
        valid = rollout.seed_round(TrainerGenerator(trainer), trainer.num_generations)
        log.info("absolute_zero: seeding round %d: valid proposals %s, buffers %s", n + 1, valid, buffers.sizes())
    trainer.train(resume_from_checkpoint=checkpoint)
    buffers.save(out / FOLDER)
    return finish_grpo(ctx, trainer, started)
