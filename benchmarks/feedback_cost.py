"""What execution feedback costs per GRPO step, side by side in one run: the single-turn round (TRL's own) and
feedback episodes with `max_turns` 1, 2 and 3, each split into generation (TRL's `_generate_single_turn`, every
turn), sandbox (the public tests between turns and the reward stage) and training (the rest of the step: log-probs,
loss, optimizer).

The same warm-started tiny policy, reloaded from disk for every run, trains K steps under the same GRPOConfig per
arm. The arms interleave, each repeat in the reverse order of the one before (single, 1, 2, 3, then 3, 2, 1,
single: ABBA), so a drift in the machine's load falls on every arm alike; each arm's figure is the median over its
repeats. Without --model the script builds the tiny model and warm-starts it as examples/tiny-feedback.yaml says
(SFT on reference answers and near misses), so the policy writes code for the sandbox to run.

Usage: python benchmarks/feedback_cost.py [--model DIR] [--steps K] [--repeats R] [--sft-epochs E] [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from step_clock import StepClock
from tiny_policy import load_policy, training_tasks, warm_start

from azr.config import AzrConfig, FeedbackConfig, load_config

RECIPE = Path(__file__).resolve().parent.parent / "examples" / "tiny-feedback.yaml"
ARMS = ("single", "turns=1", "turns=2", "turns=3")
FIGURES = ("step_seconds", "generation_per_step", "sandbox_per_step", "training_per_step", "turns_last_round")


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _trainer_class():
    from azr.training import AZRGRPOTrainer

    class Measured(AZRGRPOTrainer):
        """Sums the wall time of every generation call (each turn of each episode goes through it)."""

        bench_generation = 0.0

        def _generate_single_turn(self, *args: Any, **kwargs: Any):
            started = time.perf_counter()
            try:
                return super()._generate_single_turn(*args, **kwargs)
            finally:
                self.bench_generation += time.perf_counter() - started

    return Measured


def _run(arm: str, cfg: AzrConfig, policy: str, pool, out: Path) -> dict[str, Any]:
    from transformers import PrinterCallback, set_seed

    from azr.rewards import recipe_rubric
    from azr.training import grpo_args, grpo_dataset, on_gpu
    from azr.training.episodes.feedback import FeedbackRollout

    set_seed(cfg.seed)
    model, tokenizer = load_policy(cfg, policy)
    tasks = training_tasks(cfg, tokenizer)
    rubric = recipe_rubric(cfg, cfg.sandbox, pool)
    rollout = None
    if arm != "single":
        feedback = dataclasses.replace(cfg.feedback, max_turns=int(arm.split("=")[1]))
        rollout = FeedbackRollout(rubric.grader, feedback, {t.id: t for t in tasks})
    trainer = _trainer_class()(
        model=model,
        reward_funcs=list(rubric.funcs),
        args=grpo_args(dataclasses.replace(cfg, output_dir=str(out)), list(rubric.weights), cpu=not on_gpu()),
        train_dataset=grpo_dataset(tasks, hidden_only=rollout is not None),
        processing_class=tokenizer,
        grader=rubric.grader,
        rollout_func=rollout,
    )
    trainer.remove_callback(PrinterCallback)
    clock = StepClock()
    trainer.add_callback(clock)
    started = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - started
    steps = trainer.state.global_step
    generation = trainer.bench_generation
    sandbox = trainer.reward_seconds + (rollout.seconds.get("sandbox", 0.0) if rollout is not None else 0.0)
    turns = [len(e.policy_turns) for e in rollout.last] if rollout is not None else [1]
    return {
        "arm": arm,
        "steps": steps,
        "seconds": seconds,
        "step_seconds": sum(clock.seconds) / max(len(clock.seconds), 1),
        "generation_per_step": generation / max(steps, 1),
        "sandbox_per_step": sandbox / max(steps, 1),
        "training_per_step": max(0.0, sum(clock.seconds) - generation - sandbox) / max(steps, 1),
        "turns_last_round": sum(turns) / len(turns),
        "tokens": int(trainer.state.num_input_tokens_seen),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(RECIPE))
    parser.add_argument("--model", help="a warm-started policy folder (default: build and warm-start the tiny one)")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--sft-epochs", type=float, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    from azr.models import quiet_third_party
    from azr.rewards import pool_from_config, recipe_rubric

    quiet_third_party()
    cfg = load_config(args.config)
    cfg.grpo.update(max_steps=args.steps, save_strategy="no", report_to="none", logging_steps=1)
    cfg.sft.args.update(save_strategy="no", report_to="none")
    if args.sft_epochs is not None:
        cfg.sft.args["num_train_epochs"] = args.sft_epochs
    if not isinstance(cfg.feedback, FeedbackConfig):
        raise SystemExit("feedback_cost: the recipe has no feedback section")
    pool = pool_from_config(cfg.sandbox)
    runs: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            policy = args.model
            if policy is None:
                grader = recipe_rubric(cfg, cfg.sandbox, pool).grader
                policy, seconds, rows = warm_start(cfg, Path(tmp), grader)
                _say(f"warm start: {rows} answers, {seconds:.0f} s")
            for repeat in range(args.repeats):
                for arm in arm_order(repeat):
                    _say(f"{arm} (repeat {repeat + 1})")
                    runs.append(_run(arm, cfg, policy, pool, Path(tmp) / f"{arm}-{repeat}") | {"repeat": repeat})
    finally:
        pool.close()
    report = {"steps": args.steps, "repeats": args.repeats, "runs": runs, "arms": _by_arm(runs)}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print(report)
    return 0


def arm_order(repeat: int) -> tuple[str, ...]:
    """The arms of one repeat: ARMS, reversed on every other repeat (ABBA), so a load that drifts over the run
    weighs on each arm as much."""
    return ARMS if repeat % 2 == 0 else ARMS[::-1]


def _by_arm(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Each arm's median over its repeats of every figure (a repeat slowed by a burst of load does not move it)."""
    out = {}
    for arm in ARMS:
        mine = [r for r in runs if r["arm"] == arm]
        out[arm] = {k: statistics.median(r[k] for r in mine) for k in FIGURES}
    return out


def _print(report: dict[str, Any]) -> None:
    print(f"{report['steps']} GRPO steps per run, {report['repeats']} run(s) per arm, in this order (s/step):")
    print("  " + ", ".join(f"{r['arm']} {r['step_seconds']:.2f}" for r in report["runs"]))
    print("seconds per step, median per arm over its runs")
    print(f"{'arm':<9} {'step':>7} {'generation':>11} {'sandbox':>8} {'training':>9} {'turns':>6} {'x single':>9}")
    base = report["arms"]["single"]["step_seconds"]
    for arm, r in report["arms"].items():
        print(
            f"{arm:<9} {r['step_seconds']:7.2f} {r['generation_per_step']:11.2f} {r['sandbox_per_step']:8.3f} "
            f"{r['training_per_step']:9.2f} {r['turns_last_round']:6.2f} {r['step_seconds'] / base:9.2f}"
        )


if __name__ == "__main__":
    sys.exit(main())
