"""GRPO step overhead (goal: azr tokens/s >= 0.95x plain TRL, reward stage <= 10% of step time), side by side.

The same warm-started tiny policy, reloaded from disk for every run, trains K GRPO steps under the same GRPOConfig
and dataset with (a) azr's AZRGRPOTrainer and its code-execution rewards (tests + format, graded in the sandbox)
and (b) plain trl.GRPOTrainer with a trivial reward (completion length / 1000: constant cost, no sandbox). Runs go
in ABBA order (azr, plain, plain, azr, ...) so that drift in the machine's load falls on both arms alike.

Completion lengths part ways after the first update (different rewards train different policies), so the compared
figure is tokens/s (prompt + completion tokens, TRL's `num_input_tokens_seen`), not steps/s.

The policy has to write code for the sandbox to do any work, and a random-init model writes none: without --model
the script builds the tiny model in a temp dir and warm-starts it as the recipe says (SFT on reference answers,
with the recipe's near misses).

Usage: python benchmarks/train_overhead.py [--model DIR] [--steps K] [--repeats R] [--sft-epochs E] [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from step_clock import StepClock
from tiny_policy import TINY_RECIPE, load_policy, training_tasks, warm_start

from azr.config import AzrConfig, load_config


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _config(args: argparse.Namespace) -> AzrConfig:
    cfg = load_config(args.config, args.set)
    if cfg.model.adapter.enabled:
        sys.exit("train_overhead: model.adapter.kind must be none (the benchmark trains all weights, as tiny.yaml)")
    # The measured settings: no checkpoints, a log record every step, nothing reported anywhere.
    cfg.grpo.update(max_steps=args.steps, save_strategy="no", report_to="none", logging_steps=1)
    cfg.sft.args.update(save_strategy="no", report_to="none")
    if args.sft_epochs is not None:
        cfg.sft.args["num_train_epochs"] = args.sft_epochs
    return cfg


def _with_steps(cfg: AzrConfig, steps: int) -> AzrConfig:
    return dataclasses.replace(cfg, grpo={**cfg.grpo, "max_steps": steps})


def _grader(cfg: AzrConfig, pool):
    from azr.rewards import build_rubric

    return build_rubric(cfg.rewards, cfg.sandbox, pool=pool, answer_format=cfg.answer_format).grader


def _length_reward(completions, **columns) -> list[float]:
    """The plain arm's reward: constant cost, no code is run."""
    out = []
    for completion in completions:
        if isinstance(completion, list):  # conversational: the assistant message(s)
            completion = "".join(str(m.get("content") or "") for m in completion if isinstance(m, dict))
        out.append(len(str(completion)) / 1000)
    return out


def _azr_trainer_class():
    from azr.training import AZRGRPOTrainer

    class Measured(AZRGRPOTrainer):
        """Keeps its own reward-stage total (azr's MetricsCallback resets `reward_seconds` at every log) and the
        grader's verdict for each completion."""

        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self.bench_reward_seconds = 0.0
            self.bench_statuses: list[str] = []

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            before = self.reward_seconds
            rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            self.bench_reward_seconds += self.reward_seconds - before
            self.bench_statuses += [d.get("status", "?") for d in self.grader.last_details]
            return rewards

    return Measured


def _run(arm: str, cfg: AzrConfig, policy: str, pool, trainer_only: bool, out: Path) -> dict[str, Any]:
    """K GRPO steps of one arm from the policy on disk; its wall time, tokens and (azr) reward-stage figures."""
    from contextlib import ExitStack

    from transformers import PrinterCallback, set_seed
    from trl import GRPOTrainer

    from azr.rewards import build_rubric
    from azr.training import grpo_args, grpo_dataset, on_gpu

    set_seed(cfg.seed)
    model, tokenizer = load_policy(cfg, policy)
    dataset = grpo_dataset(training_tasks(cfg, tokenizer))
    with ExitStack() as stack:
        if arm == "azr":
            # A fresh grader per run: its cache must not carry the previous run's (identical, seeded) completions.
            rubric = build_rubric(cfg.rewards, cfg.sandbox, pool=pool, answer_format=cfg.answer_format)
            funcs, weights, grader = list(rubric.funcs), list(rubric.weights), rubric.grader
            callbacks, observers = [], []
            if not trainer_only:  # what `azr train` writes beside the trainer: metrics.jsonl and the generation log
                from azr.logs import GenerationLog, JsonlWriter
                from azr.training import MetricsCallback

                record = MetricsCallback(stack.enter_context(JsonlWriter(out / "metrics.jsonl")), "grpo")
                generations = GenerationLog(out / "generations", int(cfg.logging.generations_max_mb * 2**20))
                stack.callback(generations.close)
                callbacks, observers = [record], [lambda batch: generations.put(batch.records())]
            trainer = _azr_trainer_class()(
                model=model,
                reward_funcs=funcs,
                args=grpo_args(dataclasses.replace(cfg, output_dir=str(out)), weights, cpu=not on_gpu()),
                train_dataset=dataset,
                processing_class=tokenizer,
                callbacks=callbacks,
                grader=grader,
                observers=observers,
            )
            if not trainer_only:
                record.trainer = trainer
        else:
            trainer = GRPOTrainer(
                model=model,
                reward_funcs=[_length_reward],
                args=grpo_args(dataclasses.replace(cfg, output_dir=str(out)), [1.0], cpu=not on_gpu()),
                train_dataset=dataset,
                processing_class=tokenizer,
            )
        trainer.remove_callback(PrinterCallback)  # printing each step's logs is no part of the step
        clock = StepClock()
        trainer.add_callback(clock)
        started, cpu = time.perf_counter(), os.times()
        trainer.train()
        seconds = time.perf_counter() - started
        cpu_seconds = sum(os.times()[:2]) - sum(cpu[:2])  # this process, every thread (not the sandbox's workers)
    lengths = [r["completions/mean_length"] for r in trainer.state.log_history if "completions/mean_length" in r]
    steps = trainer.state.global_step
    tokens = int(trainer.state.num_input_tokens_seen)
    result: dict[str, Any] = {"arm": arm, **_rates(steps, seconds, tokens, lengths), "cpu_seconds": cpu_seconds}
    result["step_seconds"] = clock.seconds
    if arm == "azr":
        statuses = trainer.bench_statuses
        result.update(
            reward_seconds=trainer.bench_reward_seconds,
            reward_share=trainer.bench_reward_seconds / seconds,
            completions=len(statuses),
            with_code=sum(s != "no_code" for s in statuses),
            passed=sum(s == "passed" for s in statuses),
        )
    return result


def _fastest_steps(runs: list[dict[str, Any]]) -> float:
    """The sum over step k of the fastest run's step k: a burst of other jobs' load slows one run's step, seldom
    every run's."""
    return sum(min(column) for column in zip(*(r["step_seconds"] for r in runs), strict=False))


def _rates(steps: int, seconds: float, tokens: int, lengths: list[float]) -> dict[str, Any]:
    return {
        "steps": steps,
        "seconds": seconds,
        "tokens": tokens,
        "tokens_per_s": tokens / seconds,
        "steps_per_s": steps / seconds,
        "mean_completion_length": sum(lengths) / len(lengths) if lengths else None,
    }


def _totals(runs: list[dict[str, Any]]) -> dict[str, Any]:
    seconds, tokens, steps = (sum(r[k] for r in runs) for k in ("seconds", "tokens", "steps"))
    lengths = [r["mean_completion_length"] for r in runs if r["mean_completion_length"] is not None]
    total: dict[str, Any] = {"runs": len(runs), **_rates(steps, seconds, tokens, lengths)}
    total["cpu_seconds"] = sum(r["cpu_seconds"] for r in runs)
    total["tokens_per_cpu_s"] = tokens / total["cpu_seconds"]
    if "reward_seconds" in runs[0]:
        reward = sum(r["reward_seconds"] for r in runs)
        completions = sum(r["completions"] for r in runs)
        total.update(
            reward_seconds=reward,
            reward_share=reward / seconds,
            completions=completions,
            code_fraction=sum(r["with_code"] for r in runs) / max(completions, 1),
            pass_fraction=sum(r["passed"] for r in runs) / max(completions, 1),
        )
    return total


def _print_table(report: dict[str, Any]) -> None:
    def cell(value: Any, spec: str) -> str:
        return format("-", ">" + spec.split(".")[0]) if value is None else format(value, spec)

    warm = report["warm_start"]
    if warm["seconds"] is None:
        print(f"policy: {warm['policy']} (given)")
    else:
        print(
            f"policy: tiny model + SFT warm start, {warm['epochs']:g} epochs on {warm['examples']} answers: "
            f"{warm['seconds']:.1f} s"
        )
    s = report["settings"]
    logs = "trainer only" if s["trainer_only"] else "with azr's metrics and generation logs"
    print(
        f"{s['steps']} GRPO steps x {s['repeats']} repeats per arm (ABBA order); {s['completions_per_step']} "
        f"completions per step, {s['num_generations']} per prompt, max_completion_length {s['max_completion_length']}; "
        f"sandbox {s['sandbox_backend']} x {s['sandbox_workers']}; azr arm {logs}"
    )
    columns = [("run", "<9"), ("wall s", ">8"), ("steps/s", ">8"), ("tokens", ">8"), ("tokens/s", ">9")]
    columns += [("compl len", ">9"), ("reward s", ">9"), ("share", ">7"), ("cpu s", ">8")]
    print(" ".join(format(name, spec) for name, spec in columns))
    rows = [(f"{r['arm']} {r['repeat']}", r) for r in report["runs"]]
    rows += [(f"{arm} all", report["totals"][arm]) for arm in ("azr", "plain")]
    for name, r in rows:
        share = r.get("reward_share")
        print(
            f"{name:<9} {r['seconds']:8.1f} {r['steps_per_s']:8.3f} {r['tokens']:8d} {r['tokens_per_s']:9.1f} "
            f"{cell(r['mean_completion_length'], '9.1f')} {cell(r.get('reward_seconds'), '9.2f')} "
            f"{'-' if share is None else format(share * 100, '6.1f') + '%':>7} {r['cpu_seconds']:8.1f}"
        )
    azr = report["totals"]["azr"]
    print(
        f"azr completions with runnable code: {azr['code_fraction']:.1%} of {azr['completions']} "
        f"(passed all tests: {azr['pass_fraction']:.1%})"
    )
    if azr["code_fraction"] < 0.5:
        print("  (few completions had code, so the sandbox did little work: raise --sft-epochs or pass --model)")
    print("completion lengths differ between arms after the first update, so tokens/s, not steps/s, is compared")
    ratio, share = report["tokens_per_s_ratio"], azr["reward_share"]
    if len(report["tokens_per_s_ratio_per_repeat"]) > 1:
        print("tokens/s ratio per repeat: " + ", ".join(f"{r:.2f}" for r in report["tokens_per_s_ratio_per_repeat"]))
    print(f"tokens/s ratio azr/plain: {ratio:.2f} (goal >= 0.95: {'met' if ratio >= 0.95 else 'MISSED'})")
    print(
        f"tokens per CPU second of the trainer's process, azr/plain: {report['tokens_per_cpu_s_ratio']:.2f} "
        "(less sensitive to other jobs' load than wall time; the sandbox's own processes are not counted)"
    )
    print(
        f"tokens/s over each step's fastest run, azr/plain: {report['fastest_steps_ratio']:.2f} (a load burst slows "
        "one run's step, seldom every run's)"
    )
    print(f"reward stage share of step time: {share:.1%} (goal <= 10%: {'met' if share <= 0.10 else 'MISSED'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="an already warm-started full model (e.g. runs/tiny/sft/final); skips SFT")
    parser.add_argument("--steps", type=int, default=20, help="GRPO steps per run")
    parser.add_argument("--repeats", type=int, default=2, help="runs per arm")
    parser.add_argument(
        "--sft-epochs", type=float, help="SFT warm start epochs without --model (default: the recipe's)"
    )
    parser.add_argument("--warmup-steps", type=int, default=1, help="untimed GRPO steps of each arm before the runs")
    parser.add_argument("--config", default=str(TINY_RECIPE), help="recipe for model, data, grpo and sft settings")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    parser.add_argument("--trainer-only", action="store_true", help="azr arm without metrics.jsonl / generations")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--verbose", action="store_true", help="azr's and the libraries' info logs")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(name)s: %(message)s")

    from azr.config import sequence_lengths
    from azr.models import quiet_third_party
    from azr.rewards import pool_from_config
    from azr.training import check_sandbox

    quiet_third_party()
    cfg = _config(args)
    tmp = Path(tempfile.mkdtemp(prefix="azr-train-overhead-"))
    pool = None
    try:
        warm: dict[str, Any] = {"policy": args.model, "seconds": None, "epochs": None, "examples": None}
        pool = pool_from_config(cfg.sandbox)
        if args.model:
            policy = str(Path(args.model).resolve())
        else:
            epochs = cfg.sft.args.get("num_train_epochs", 3)
            _say(f"warm start: tiny model + {epochs:g} SFT epochs ...")
            policy, seconds, examples = warm_start(cfg, tmp, _grader(cfg, pool))
            warm.update(policy="tiny model + SFT", seconds=seconds, epochs=epochs, examples=examples)
            _say(f"warm start: {seconds:.1f} s")
        _, tokenizer = load_policy(cfg, policy)
        check_sandbox(training_tasks(cfg, tokenizer), _grader(cfg, pool))  # starts every worker, untimed
        if args.warmup_steps:  # first-run costs (allocator, thread pools, lazy imports) fall on neither arm
            _say(f"warm-up: {args.warmup_steps} GRPO step(s) of each arm, not measured ...")
            for arm in ("plain", "azr"):  # azr's own first uses too: its modules' imports, the graders' first batch
                _run(arm, _with_steps(cfg, args.warmup_steps), policy, pool, args.trainer_only, tmp / f"warm-up-{arm}")
        order = [arm for r in range(args.repeats) for arm in (("azr", "plain") if r % 2 == 0 else ("plain", "azr"))]
        runs, seen = [], {"azr": 0, "plain": 0}
        for i, arm in enumerate(order):
            seen[arm] += 1
            _say(f"run {i + 1}/{len(order)}: {arm}, {args.steps} steps ...")
            result = _run(arm, cfg, policy, pool, args.trainer_only, tmp / f"run-{i}-{arm}")
            result["repeat"] = seen[arm]
            runs.append(result)
            _say(f"run {i + 1}/{len(order)}: {result['seconds']:.1f} s, {result['tokens_per_s']:.1f} tokens/s")
        totals = {arm: _totals([r for r in runs if r["arm"] == arm]) for arm in ("azr", "plain")}
        report = {
            "settings": {
                "steps": args.steps,
                "repeats": args.repeats,
                "trainer_only": args.trainer_only,
                "num_generations": int(cfg.grpo.get("num_generations", 8)),
                "completions_per_step": int(cfg.grpo.get("per_device_train_batch_size", 8)),
                "max_completion_length": sequence_lengths(cfg)["max_completion_length"],
                "seed": cfg.seed,
                "sandbox_backend": pool.backend.name,
                "sandbox_workers": pool.size,
            },
            "warm_start": warm,
            "runs": runs,
            "totals": totals,
            "tokens_per_s_ratio": totals["azr"]["tokens_per_s"] / totals["plain"]["tokens_per_s"],
            "tokens_per_s_ratio_per_repeat": [
                a["tokens_per_s"] / p["tokens_per_s"]
                for a, p in zip(
                    [r for r in runs if r["arm"] == "azr"], [r for r in runs if r["arm"] == "plain"], strict=True
                )
            ],
            "reward_share": totals["azr"]["reward_share"],
            "tokens_per_cpu_s_ratio": totals["azr"]["tokens_per_cpu_s"] / totals["plain"]["tokens_per_cpu_s"],
        }
        by_arm = {arm: [r for r in runs if r["arm"] == arm] for arm in ("azr", "plain")}
        rates = {arm: totals[arm]["tokens"] / len(rs) / _fastest_steps(rs) for arm, rs in by_arm.items()}
        report["fastest_steps_ratio"] = rates["azr"] / rates["plain"]
    finally:
        if pool is not None:
            pool.close()
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(report))
    else:
        _print_table(report)


if __name__ == "__main__":
    main()
