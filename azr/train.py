"""`azr train`: the linear recipe that assembles config, data and model for a GRPO run.

This version stops after the assembly (config saved, tasks loaded, rewards built and the sandbox checked on a few
reference solutions, model and tokenizer loaded): the GRPO loop, logs and resume arrive with the training issue
and extend this function rather than sit beside it.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from azr.config import AzrConfig, ConfigError, save_config
from azr.data import Task, load_tasks, select_tasks
from azr.grading import validate_references
from azr.rewards import CodeGrader, build_rewards
from azr.sandbox import SandboxUnhealthy

log = logging.getLogger(__name__)


def run_train(cfg: AzrConfig, resume_from: str | None = None) -> int:
    """Assemble a run from `cfg`; returns the process exit code."""
    if resume_from is not None:
        raise ConfigError("--resume-from: this version does not train yet, so there is nothing to resume")
    started = time.monotonic()
    out = Path(cfg.output_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"output_dir: cannot create {out}: {exc.strerror}") from None
    save_config(cfg, out / "config.yaml")

    tasks = select_tasks(
        load_tasks(cfg.data.train, cfg.data.column_map),
        shuffle=cfg.data.shuffle,
        seed=cfg.seed,
        max_tasks=cfg.data.max_tasks,
    )
    eval_tasks = load_tasks(cfg.data.eval, cfg.data.eval_column_map) if cfg.data.eval else []
    log.info(
        "data: %d training tasks from %s, %d evaluation tasks from %s",
        len(tasks),
        cfg.data.train,
        len(eval_tasks),
        cfg.data.eval,
    )

    funcs, weights, grader = build_rewards(cfg.rewards, cfg.sandbox, answer_format=cfg.answer_format)
    _check_sandbox(tasks, grader)
    log.info("rewards: %s", ", ".join(f"{w:g} x {f.__name__}" for f, w in zip(funcs, weights, strict=True)))

    from azr.modeling import build_model_and_tokenizer, count_parameters

    model, tokenizer = build_model_and_tokenizer(cfg.model)
    log.info(
        "model: %s (%s, %.2f M parameters, dtype %s), vocabulary %d",
        cfg.model.name_or_path,
        type(model).__name__,
        count_parameters(model) / 1e6,
        model.dtype,
        len(tokenizer),
    )
    log.warning(
        "GRPO training is not in this version yet: stopped after loading config, data, rewards and model "
        "(%.1f s); resolved config saved to %s",
        time.monotonic() - started,
        out / "config.yaml",
    )
    return 0


def _check_sandbox(tasks: list[Task], grader: CodeGrader, sample: int = 8) -> None:
    """Fail before the model loads if the sandbox cannot grade known-good reference solutions."""
    checked = [(t, g) for t, g in validate_references(tasks[:sample], grader.pool, grader.limits) if g is not None]
    errors = [g.failures[-1] for _, g in checked if g.status == "error"]
    if errors:
        raise SandboxUnhealthy(f"the sandbox failed on {len(errors)} of {len(checked)} reference runs: {errors[0]}")
    passed = sum(g.passed for _, g in checked)
    log.info(
        "sandbox: %s backend, %d workers; %d/%d reference solutions pass",
        grader.pool.backend.name,
        grader.pool.size,
        passed,
        len(checked),
    )
