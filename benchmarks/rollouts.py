"""Every rollout counts (goals: with dynamic sampling <= 5% of trained groups without a difference, and wall time per
trained group with a difference <= 0.8x TRL's plain sampling), side by side on the tiny demo.

The policy is the tiny demo's once training is under way: examples/tiny.yaml's warm start (built here unless --model
is given), then the recipe's own GRPO run with plain sampling (`--burn-in-steps`, by default the recipe's max_steps:
what `make demo` trains). From that policy, GRPO goes on for the same wall time in three arms: TRL's plain sampling
(every generated group is trained), dynamic sampling (`sampling.dynamic`), and dynamic sampling with the curriculum
(`curriculum.enabled`). All run azr's trainer with the recipe's rewards graded in the sandbox; the plain arm only
counts. A group "without a difference" is one whose graded completions all scored the same: zero advantage, no
gradient. Each arm stops at the first generation-batch boundary past its time budget (the recipe's max_steps does
not apply to the arms), then samples the train tasks at GRPO's own temperature to give the train pass rate at the
end. `--burn-in-steps 0` measures from the warm start instead, where the policy still fails much of the time.

Figures per arm: steps, groups generated and trained, the share of trained groups without a difference, wall time
per trained group with one, and the sampled train pass rate. Dynamic sampling trains what plain sampling trains and
also generates and grades the groups it passes over, so its wall per useful group is at least plain's useful share
times plain's: the 0.8 goal needs plain sampling to waste more than a fifth of its groups. The table prints that
floor. The last line is
`rollouts: zero-variance share plain P, dynamic D; wall per useful group dynamic/plain R`.

Usage: python benchmarks/rollouts.py [--model DIR] [--burn-in-steps N] [--seconds S] [--samples N] [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tiny_policy import TINY_RECIPE, load_policy, training_tasks, warm_start

from azr.config import AzrConfig, load_config

ARMS = {
    "plain": {},
    "dynamic": {"sampling": {"dynamic": True}},
    "curriculum": {"sampling": {"dynamic": True}, "curriculum": {"enabled": True}},
}


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _arm_config(cfg: AzrConfig, arm: str) -> AzrConfig:
    changes = ARMS[arm]
    return dataclasses.replace(
        cfg,
        sampling=dataclasses.replace(cfg.sampling, **changes.get("sampling", {})),
        curriculum=dataclasses.replace(cfg.curriculum, **changes.get("curriculum", {})),
    )


def _budget(seconds: float):
    """A callback that stops training at the first step past `seconds` that ends a generation batch's use (so each
    arm trains whole batches)."""
    from transformers import TrainerCallback

    class Budget(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            self.started = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            every = args.steps_per_generation * args.num_iterations
            if state.global_step % every == 0 and time.perf_counter() - self.started >= seconds:
                control.should_training_stop = True

    return Budget()


def _trainer(arm: str, cfg: AzrConfig, policy: str, pool, max_steps: int, callbacks: list, out: Path):
    """azr's GRPO trainer for one arm, from the policy on disk: (trainer, sampling, rewards, tasks, tokenizer)."""
    from transformers import PrinterCallback, set_seed

    from azr.rewards import build_rubric
    from azr.rollouts import build_sampling
    from azr.training import AZRGRPOTrainer, grpo_args, grpo_dataset, grpo_rows, on_gpu

    cfg = dataclasses.replace(_arm_config(cfg, arm), grpo={**cfg.grpo, "max_steps": max_steps})
    set_seed(cfg.seed)
    model, tokenizer = load_policy(cfg, policy)
    tasks = training_tasks(cfg, tokenizer)
    # A fresh grader per run: its cache must not carry the previous run's completions.
    rubric = build_rubric(cfg.rewards, cfg.sandbox, pool=pool, answer_format=cfg.answer_format)
    funcs, weights, grader = list(rubric.funcs), list(rubric.weights), rubric.grader
    sampling = build_sampling(cfg, grpo_rows(tasks))
    trainer = AZRGRPOTrainer(
        model=model,
        reward_funcs=funcs,
        args=grpo_args(dataclasses.replace(cfg, output_dir=str(out)), weights, cpu=not on_gpu()),
        train_dataset=grpo_dataset(tasks),
        processing_class=tokenizer,
        callbacks=callbacks,
        grader=grader,
        observers=[sampling.observe],
        sampling=sampling,
    )
    trainer.remove_callback(PrinterCallback)
    return trainer, sampling, rubric, tasks, tokenizer


def _burn_in(cfg: AzrConfig, policy: str, pool, steps: int, out: Path) -> tuple[str, float]:
    """The recipe's GRPO run with plain sampling for `steps` steps (what `make demo` trains after its warm start),
    saved as the arms' policy: (policy dir, seconds)."""
    started = time.perf_counter()
    trainer, *_, tokenizer = _trainer("plain", cfg, policy, pool, steps, [], out)
    trainer.train()
    trainer.save_model(str(out / "final"))
    tokenizer.save_pretrained(str(out / "final"))
    return str(out / "final"), time.perf_counter() - started


def _run(arm: str, cfg: AzrConfig, policy: str, pool, seconds: float, samples: int, out: Path) -> dict[str, Any]:
    """One arm from the policy on disk: its wall time, its sampler's counts, and the train pass rate at the end."""
    from azr.config import sequence_lengths
    from azr.evaluation import Sampling, generate_completions, score_completions

    # The time budget ends every arm, never the recipe's step count.
    trainer, sampling, rubric, tasks, tokenizer = _trainer(arm, cfg, policy, pool, 1_000_000, [_budget(seconds)], out)
    started = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - started
    totals = sampling.totals
    measure = Sampling(
        n=samples,
        max_new_tokens=sequence_lengths(cfg)["max_completion_length"],
        temperature=float(cfg.grpo.get("temperature", 1.0)),
        seed=cfg.seed,
    )
    started = time.perf_counter()
    completions = generate_completions(trainer.model, tokenizer, tasks, measure, cfg.template_kwargs())
    scored = score_completions(rubric, tasks, completions)
    return {
        "arm": arm,
        "steps": trainer.state.global_step,
        "seconds": wall,
        "generated_groups": totals["generated"],
        "trained_groups": totals["trained"],
        "useful_groups": totals["useful"],
        "carried_in": totals["carried_in"],
        "short_groups": totals["short"],
        "zero_variance_share": 1 - totals["useful"] / max(totals["trained"], 1),
        "kept_share": totals["kept"] / max(totals["generated"], 1),
        "wall_per_useful_group": wall / max(totals["useful"], 1),
        "pass_rate": scored["pass_rate"],
        "pass_rate_samples": scored["graded"],
        "measure_seconds": time.perf_counter() - started,
    }


def _print_table(report: dict[str, Any]) -> None:
    warm = report["warm_start"]
    if warm["seconds"] is None:
        print(f"policy: {warm['policy']} (given)")
    else:
        print(f"policy: tiny model + SFT warm start ({warm['examples']} answers): {warm['seconds']:.1f} s")
    burn_in = report["burn_in"]
    if burn_in["steps"]:
        print(f"then plain GRPO, the recipe's run: {burn_in['steps']} steps, {burn_in['seconds']:.1f} s")
    s = report["settings"]
    print(
        f"{s['seconds']:g} s of GRPO per arm; {s['groups_per_batch']} groups of {s['num_generations']} per generation "
        f"batch; dynamic: oversample {s['oversample']:g}, max_attempts {s['max_attempts']}, carry_over "
        f"{s['carry_over']}; load average at start {s['load_start']}, at end {s['load_end']}"
    )
    head = f"{'arm':<11}{'steps':>6}{'wall s':>8}{'gen':>6}{'trained':>8}{'useful':>7}{'zero-var':>9}"
    print(head + f"{'kept':>7}{'s/useful':>9}{'pass rate':>11}")
    for r in report["runs"]:
        print(
            f"{r['arm']:<11}{r['steps']:>6}{r['seconds']:>8.1f}{r['generated_groups']:>6}{r['trained_groups']:>8}"
            f"{r['useful_groups']:>7}{r['zero_variance_share']:>9.3f}{r['kept_share']:>7.2f}"
            f"{r['wall_per_useful_group']:>9.2f}{r['pass_rate']:>11.3f}"
        )
    runs = {r["arm"]: r for r in report["runs"]}
    ratio = report["wall_per_useful_ratio"]
    dynamic = runs["dynamic"]["zero_variance_share"]
    print(f"pass rate: the train tasks sampled {runs['plain']['pass_rate_samples']} times per arm, at the end")
    verdict = "met" if dynamic <= 0.05 else "MISSED"
    print(f"zero-variance share with dynamic sampling: {dynamic:.3f} (goal <= 0.05: {verdict})")
    print(f"wall per useful group dynamic/plain: {ratio:.2f} (goal <= 0.80: {'met' if ratio <= 0.80 else 'MISSED'})")
    # Dynamic sampling trains every group plain sampling would, and also generates and grades those it passes over:
    # its wall per trained group is at least plain's, so the ratio is at least plain's useful share.
    useful = 1 - runs["plain"]["zero_variance_share"]
    print(f"  its floor, were the groups passed over free: plain's useful share {useful:.2f}")
    if "curriculum" in runs:
        print(f"wall per useful group curriculum/plain: {report['curriculum_ratio']:.2f}")


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="an already warm-started full model (e.g. runs/tiny/sft/final); skips SFT")
    parser.add_argument(
        "--burn-in-steps",
        type=int,
        help="plain GRPO steps before the arms (default: the recipe's max_steps, as `make demo`; 0: none)",
    )
    parser.add_argument("--seconds", type=float, default=90.0, help="GRPO wall time per arm")
    parser.add_argument("--samples", type=int, default=16, help="completions per task for the pass rate at the end")
    parser.add_argument("--arms", default="plain,dynamic,curriculum", help="comma-separated, from " + ",".join(ARMS))
    parser.add_argument("--config", default=str(TINY_RECIPE), help="recipe for model, data, grpo and sft settings")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--verbose", action="store_true", help="azr's and the libraries' info logs")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(name)s: %(message)s")
    arms = [a for a in args.arms.split(",") if a]
    if not {"plain", "dynamic"} <= set(arms) or set(arms) - set(ARMS):
        sys.exit(f"rollouts: --arms must name plain and dynamic, from {', '.join(ARMS)}")

    from azr.models import quiet_third_party
    from azr.rewards import build_rubric, pool_from_config
    from azr.training import check_sandbox

    quiet_third_party()
    cfg = load_config(args.config, args.set)
    cfg.grpo.update(save_strategy="no", report_to="none", logging_steps=1)
    cfg.sft.args.update(save_strategy="no", report_to="none")
    tmp = Path(tempfile.mkdtemp(prefix="azr-rollouts-"))
    pool, load_start = None, _load()
    try:
        warm: dict[str, Any] = {"policy": args.model, "seconds": None, "examples": None}
        pool = pool_from_config(cfg.sandbox)
        grader = build_rubric(cfg.rewards, cfg.sandbox, pool=pool, answer_format=cfg.answer_format).grader
        if args.model:
            policy = str(Path(args.model).resolve())
        else:
            _say("warm start: tiny model + SFT ...")
            policy, seconds, examples = warm_start(cfg, tmp, grader)
            warm.update(policy="tiny model + SFT", seconds=seconds, examples=examples)
            _say(f"warm start: {seconds:.1f} s")
        _, tokenizer = load_policy(cfg, policy)
        check_sandbox(training_tasks(cfg, tokenizer), grader)  # starts every worker, untimed
        burn_in = {"steps": int(cfg.grpo.get("max_steps", 0)) if args.burn_in_steps is None else args.burn_in_steps}
        if burn_in["steps"] > 0:
            _say(f"burn-in: plain GRPO, {burn_in['steps']} steps ...")
            policy, burn_in["seconds"] = _burn_in(cfg, policy, pool, burn_in["steps"], tmp / "burn-in")
            _say(f"burn-in: {burn_in['seconds']:.1f} s")
        runs = []
        for i, arm in enumerate(arms):
            _say(f"arm {i + 1}/{len(arms)}: {arm}, {args.seconds:g} s ...")
            runs.append(_run(arm, cfg, policy, pool, args.seconds, args.samples, tmp / arm))
            r = runs[-1]
            _say(f"arm {arm}: {r['steps']} steps, zero-variance share {r['zero_variance_share']:.3f}")
    finally:
        if pool is not None:
            pool.close()
        shutil.rmtree(tmp, ignore_errors=True)
    by_arm = {r["arm"]: r for r in runs}
    per_group = int(cfg.grpo.get("per_device_train_batch_size", 8)) // int(cfg.grpo.get("num_generations", 8))
    report = {
        "settings": {
            "seconds": args.seconds,
            "num_generations": int(cfg.grpo.get("num_generations", 8)),
            "groups_per_batch": per_group * int(cfg.grpo.get("steps_per_generation") or 1),
            "oversample": cfg.sampling.oversample,
            "max_attempts": cfg.sampling.max_attempts,
            "carry_over": cfg.sampling.carry_over,
            "seed": cfg.seed,
            "load_start": load_start,
            "load_end": _load(),
        },
        "warm_start": warm,
        "burn_in": burn_in,
        "runs": runs,
        "wall_per_useful_ratio": by_arm["dynamic"]["wall_per_useful_group"] / by_arm["plain"]["wall_per_useful_group"],
    }
    if "curriculum" in by_arm:
        report["curriculum_ratio"] = (
            by_arm["curriculum"]["wall_per_useful_group"] / by_arm["plain"]["wall_per_useful_group"]
        )
    if args.json:
        print(json.dumps(report))
    else:
        _print_table(report)
    print(
        f"rollouts: zero-variance share plain {by_arm['plain']['zero_variance_share']:.3f}, dynamic "
        f"{by_arm['dynamic']['zero_variance_share']:.3f}; wall per useful group dynamic/plain "
        f"{report['wall_per_useful_ratio']:.2f}"
    )


if __name__ == "__main__":
    main()
