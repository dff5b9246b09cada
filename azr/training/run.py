"""`azr train`: the linear recipe. The recipe checked whole; the run context built (`azr.training.context`); then
the phases in order, each from its own module: an optional SFT warm start (`sft`), the train pass rate sampled
before GRPO (`passrate`), GRPO (`grpo`) or Absolute Zero's GRPO (`absolute_zero`), and the same measurement after.

Each finished phase is recorded in `output_dir/state.json`, so `--resume-from` skips it; a phase cut short resumes
from its latest checkpoint (step, optimizer, scheduler and RNG state restored by the HF Trainer) after the logs
are pruned back to that checkpoint. A generation log that failed (`azr.logs.GenerationLog`) marks summary.json
(`status: failed`, `generation_log.error`) and makes the run exit 1 with one error line, its final model saved.
Outputs: config.yaml, metrics.jsonl, generations/, checkpoints/, sft/, final/
(adapter or model, tokenizer, model card) and summary.json.

Under a launcher (torchrun, `accelerate launch`), every rank runs this recipe and only the main one writes those
files (`azr.training.ranks`); ranks wait for each other where one reads what the main process wrote.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from contextlib import ExitStack
from pathlib import Path

from azr.config import AzrConfig
from azr.models import local_source
from azr.training.absolute_zero import absolute_zero_phase
from azr.training.context import open_run
from azr.training.grpo import grpo_phase
from azr.training.passrate import pass_rate_measurer
from azr.training.preflight import preflight
from azr.training.sft import sft_phase
from azr.training.state import write_summary

log = logging.getLogger(__name__)


def run_train(cfg: AzrConfig, resume_from: str | None = None) -> int:
    """Train as `cfg` says; returns the process exit code."""
    preflight(cfg)  # every user error, before anything is written or loaded
    cfg = dataclasses.replace(cfg, model=local_source(cfg.model))  # a .gguf file: its folder, imported once
    started = time.monotonic()
    with ExitStack() as stack:
        ctx = open_run(cfg, resume_from, stack)
        state, ranks, out = ctx.state, ctx.ranks, ctx.out
        if cfg.sft.enabled:
            if not state.done("sft"):
                sft_phase(ctx)
                ranks.wait()  # the main process saved sft/final, which every rank loads next
            warm = out / "sft" / "final"
            if cfg.sft.full_weights:
                ctx.rebase(warm)  # the warm-started weights are GRPO's base; adapter mode's server starts on them
                cfg = ctx.cfg
            ctx.model, ctx.tokenizer = load_saved_policy(cfg, warm, adapter=not cfg.sft.full_weights)
            ctx.policy_dir = str(warm)
        sampled = ctx.tasks[: cfg.logging.pass_rate_tasks]
        rewards = ctx.rewards
        measure = pass_rate_measurer(cfg, ctx.args, rewards.rubric, ctx.tokenizer, sampled, ranks)
        if not state.done("eval_before") and sampled:
            state.finish("eval_before", measure(ctx.model, "eval_before", ctx.metrics))
        if not state.done("grpo"):
            phase = absolute_zero_phase if cfg.mode == "absolute_zero" else grpo_phase
            ctx.model = phase(ctx)
        else:
            ctx.model, ctx.tokenizer = load_saved_policy(cfg, out / "final")
        if not state.done("eval_after") and sampled:
            state.finish("eval_after", measure(ctx.model, "eval_after", ctx.metrics))
        generations = ctx.generations
        if generations is not None:
            generations.close()  # drained before the summary counts what it wrote and lost
        if ranks.main:
            logs = {"generation_log": generations.summary()} if generations is not None else {}
            ctx.console.show_summary(write_summary(out, state, time.monotonic() - started, logs))
    log.info("done: final %s in %s", "adapter" if cfg.model.adapter.enabled else "model", out / "final")
    if generations is not None and generations.failed:  # the model is saved, but its generation log is not whole
        lost = generations.dropped
        log.error("generation log failed: %d records lost (%s); see summary.json", lost, generations.error)
        return 1
    return 0


def load_saved_policy(cfg: AzrConfig, folder: Path, adapter: bool = True):
    """The policy saved by a finished phase: the base model with its trainable adapter, or the full model (also
    what a warm start of all weights saved, `adapter=False`)."""
    from azr.models import build_model_and_tokenizer, load_policy

    if not (adapter and cfg.model.adapter.enabled):
        return build_model_and_tokenizer(dataclasses.replace(cfg.model, name_or_path=str(folder)))
    return load_policy(cfg.model, folder, trainable=True, flag="the phase's adapter")
