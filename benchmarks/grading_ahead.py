"""Grading ahead: how much of the sandbox's time asynchronous GRPO hides behind training, side by side with the
synchronous run, in one run.

The tiny policy is warm-started as examples/tiny.yaml says (so it writes code the sandbox runs); its training tasks
get one more test that takes real time (`--test-ms`, a sleep: tests that wait on I/O or a slow library, as many real
suites do). Each arm is `azr train` in adapter mode on one vLLM CPU server: `sampling.max_staleness: 0` (each step
generates, then grades in its reward stage, then trains) and `1` (the producer plays the next batch and runs its
programs while the trainer trains; the step's reward call finds them graded). The arms alternate ABBA. Per arm,
medians over every run's steps but its first (which fills the pipeline): the step time, the trainer's reward stage
(`reward_time_s` in metrics.jsonl), and the grading the producer did ahead (`async/grade_seconds`). Hidden share:
1 - (reward stage, asynchronous) / (reward stage, synchronous).

Usage: python benchmarks/grading_ahead.py [--vllm-python PY] [--steps K] [--repeats R] [--test-ms MS] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tiny_policy import TINY_RECIPE, load_policy, training_tasks, warm_start
from vllm_cpu import vllm_python

ROOT = Path(__file__).resolve().parent.parent
ADAPTER_RECIPE = ROOT / "examples" / "tiny-vllm-adapter.yaml"


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def slow_tasks(tasks, milliseconds: int, path: Path) -> Path:
    """`tasks` written to `path` with one more test each that sleeps `milliseconds` (and passes)."""
    lines = []
    for task in tasks:
        row = task.to_json()
        row["tests"] = [*row["tests"], f"import time\ntime.sleep({milliseconds / 1000:g})"]
        lines.append(json.dumps(row))
    path.write_text("\n".join(lines) + "\n")
    return path


def run_arm(staleness: int, policy: str, data: Path, python: str, steps: int, folder: Path) -> dict:
    """One `azr train` run of the arm; its steps' figures from metrics.jsonl (the first step left out)."""
    command = [
        str(Path(sys.executable).parent / "azr"),
        "train",
        "--config",
        str(ADAPTER_RECIPE),
        "--set",
        f"output_dir={folder}",
        "--set",
        f"model.name_or_path={policy}",
        "--set",
        f"data.train={data}",
        "--set",
        "data.max_tasks=8",
        "--set",
        f"vllm.python={python}",
        "--set",
        f"sampling.max_staleness={staleness}",
        "--set",
        f"grpo.max_steps={steps}",
        "--set",
        "grpo.max_completion_length=128",
        "--set",
        "grpo.temperature=0.7",
        "--set",
        "grpo.save_steps=1000",
        "--set",
        "logging.console=plain",
    ]
    started = time.perf_counter()
    with (folder.parent / f"{folder.name}.log").open("w") as log:
        code = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    if code != 0:
        raise SystemExit(f"max_staleness {staleness}: azr train failed (exit {code}); log: {folder}.log")
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
    steps_logged = [r for r in records if r.get("phase") == "grpo" and r.get("loss") is not None][1:]
    return {
        "max_staleness": staleness,
        "wall_s": round(time.perf_counter() - started, 1),
        "step_s": [r["step_time_s"] for r in steps_logged],
        "reward_s": [r["reward_time_s"] for r in steps_logged],
        "grade_ahead_s": [r.get("async/grade_seconds", 0.0) for r in steps_logged],
        "wait_s": [r.get("async/wait_seconds", 0.0) for r in steps_logged],
        "tests_mean": [r.get("rewards/tests_reward/mean") for r in steps_logged],
    }


def arm(runs: list[dict]) -> dict:
    def median(key: str) -> float:
        return round(statistics.median(v for r in runs for v in r[key]), 3)

    return {
        "steps": sum(len(r["step_s"]) for r in runs),
        "step_s": median("step_s"),
        "reward_stage_s": median("reward_s"),
        "graded_ahead_s": median("grade_ahead_s"),
        "waited_s": median("wait_s"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm-python", help="interpreter of the vLLM venv [$AZR_VLLM_PYTHON, else the CPU venv]")
    parser.add_argument("--steps", type=int, default=6, help="GRPO steps per run (the first is not counted)")
    parser.add_argument("--repeats", type=int, default=1, help="runs per arm, ABBA")
    parser.add_argument("--test-ms", type=int, default=150, help="the slow test's sleep (ms)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    python = vllm_python(args.vllm_python)

    from azr.config import load_config
    from azr.rewards import pool_from_config, recipe_rubric

    cfg = load_config(TINY_RECIPE)
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="azr-grading-ahead-") as tmp_name:
        tmp = Path(tmp_name)
        pool = pool_from_config(cfg.sandbox)
        try:
            grader = recipe_rubric(cfg, cfg.sandbox, pool).grader
            policy, seconds, rows = warm_start(cfg, tmp, grader)
            _say(f"warm start: {rows} answers in {seconds:.0f} s")
            _, tokenizer = load_policy(cfg, policy)
            data = slow_tasks(training_tasks(cfg, tokenizer), args.test_ms, tmp / "slow.jsonl")
        finally:
            pool.close()
        order = []
        for r in range(args.repeats):
            order += [0, 1] if r % 2 == 0 else [1, 0]
        for i, staleness in enumerate(order):
            runs.append(run_arm(staleness, policy, data, python, args.steps, tmp / f"run-{i}"))
            last = arm([runs[-1]])
            _say(
                f"max_staleness {staleness}: {last['step_s']:.2f} s/step, reward stage {last['reward_stage_s']:.3f} s, "
                f"graded ahead {last['graded_ahead_s']:.3f} s"
            )
    sync, ahead = arm([r for r in runs if r["max_staleness"] == 0]), arm([r for r in runs if r["max_staleness"] == 1])
    figures = {
        "test_ms": args.test_ms,
        "machine": f"{os.cpu_count()} cores",
        "synchronous": sync,
        "asynchronous": ahead,
        "hidden_share": round(1 - ahead["reward_stage_s"] / max(sync["reward_stage_s"], 1e-9), 3),
        "step_time_ratio": round(ahead["step_s"] / max(sync["step_s"], 1e-9), 3),
        "runs": runs,
    }
    if args.json:
        print(json.dumps(figures))
        return
    print(f"slow test {args.test_ms} ms; medians over steps (each run's first left out), {args.repeats} run(s) an arm")
    print(f"{'arm':14} {'s/step':>8} {'reward stage':>13} {'graded ahead':>13} {'waited':>8}")
    for name, figure in (("max_staleness 0", sync), ("max_staleness 1", ahead)):
        print(
            f"{name:14} {figure['step_s']:>8.2f} {figure['reward_stage_s']:>13.3f} "
            f"{figure['graded_ahead_s']:>13.3f} {figure['waited_s']:>8.3f}"
        )
    print(f"sandbox time hidden: {figures['hidden_share']:.3f} of the synchronous reward stage")
    print(f"step time, asynchronous / synchronous: {figures['step_time_ratio']:.3f}")


if __name__ == "__main__":
    main()
