"""Size and build time of `azr report` on a synthetic run folder of N GRPO steps shaped like a real one.

    python benchmarks/report_size.py                  # 1,000 steps, 16 completions a step, into a temp folder
    python benchmarks/report_size.py --steps 200 --keep runs/synthetic

The folder holds what `azr train` writes: config.yaml, state.json, metrics.jsonl (every key GRPO logs each step,
held-out evaluations every 50 steps, one alarm), generations/ (every completion, ~1 kB of text each, rotated at
16 MB), scoreboard.json and frontier.json. Prints the report's size (MB) and the seconds `run_report` took.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from azr.logs import GenerationLog, JsonlWriter  # noqa: E402

STATUSES = ["passed", "failed", "failed", "no_code", "timeout", "crashed"]
PROGRAM = (
    "def solve(xs):\n    total = 0\n    for x in xs:\n        if x % 2 == 0:\n            total += x * x\n"
    "    return total\n"
)


def write_synthetic_run(folder: Path, steps: int, per_step: int = 16, seed: int = 0, finished: bool = True) -> Path:
    """A run folder of `steps` GRPO steps with `per_step` logged completions each; returns it."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(
        "output_dir: synthetic\nseed: 0\nmodel:\n  name_or_path: Qwen/Qwen2.5-Coder-1.5B-Instruct\n  adapter:\n"
        f"    kind: lora\ngrpo:\n  max_steps: {steps}\n  max_completion_length: 512\nrewards:\n"
        "  - {name: tests, weight: 1.0}\n  - {name: format, weight: 0.1}\neval:\n  every_steps: 50\n"
    )
    start = 1_790_000_000.0
    with JsonlWriter(folder / "metrics.jsonl") as metrics:
        metrics.write({"phase": "eval_before", "step": 0, "time": start, "pass_rate": 0.31, "reward": 0.4})
        for step in range(1, steps + 1):
            x = step / steps
            tests = 0.3 + 0.35 * x + rng.gauss(0, 0.04)
            fmt = min(1.0, 0.7 + 0.3 * x + rng.gauss(0, 0.02))
            timeout = max(0.0, 0.03 + rng.gauss(0, 0.01))
            metrics.write(
                {
                    "phase": "grpo",
                    "step": step,
                    "time": start + 20 * step,
                    "loss": rng.gauss(0, 0.01),
                    "reward": tests + 0.1 * fmt,
                    "reward_std": 0.3,
                    "frac_reward_zero_std": max(0.0, 0.4 - 0.2 * x + rng.gauss(0, 0.05)),
                    "pass_rate": tests * 0.8,
                    "completion_length": 220 - 60 * x + rng.gauss(0, 10),
                    "rewards/tests_reward/mean": tests,
                    "rewards/format_reward/mean": fmt,
                    "tokens_per_s": 1800 + rng.gauss(0, 50),
                    "step_time_s": 20 + rng.gauss(0, 1),
                    "reward_time_s": 4 + rng.gauss(0, 0.3),
                    "reward_share": 0.2,
                    "grad_norm": abs(rng.gauss(0.3, 0.1)),
                    "learning_rate": 5e-6 * (1 - x),
                    "kl": 0.002 * x + abs(rng.gauss(0, 0.0005)),
                    "entropy": 0.6 - 0.2 * x,
                    "completions/mean_length": 220 - 60 * x,
                    "completions/max_length": 512.0,
                    "completions/min_length": 40.0,
                    "completions/clipped_ratio": max(0.0, 0.05 + rng.gauss(0, 0.02)),
                    "sandbox/passed": tests * 0.8,
                    "sandbox/timeout": timeout,
                    "sandbox/crashed": 0.02,
                    "sandbox/memory": 0.0,
                    "sandbox/error": 0.0,
                    "sandbox/no_code": 0.05,
                    "num_tokens": 1800.0 * 20 * step,
                    "epoch": x,
                }
            )
            if step == 1 or step % 50 == 0:
                value = 0.2 + 0.15 * math.sin(3 * x)
                metrics.write(
                    {
                        "phase": "grpo",
                        "kind": "eval",
                        "step": step,
                        "time": start + 20 * step,
                        "tasks": 64,
                        "samples": 4,
                        "pass_at_k": {
                            "1": {"value": value, "low": value - 0.05, "high": value + 0.05, "problems": 64},
                            "4": {"value": value + 0.1, "low": value + 0.04, "high": value + 0.16, "problems": 64},
                        },
                        "mean_reward": value,
                        "by_tag": {t: {"problems": 16, "pass@1": value, "pass@4": value + 0.1} for t in "abcd"},
                        "wall_s": 30.0,
                        "eval_wall_s": 30.0 * (1 + step // 50),  # every evaluation of the phase so far
                        "eval_share": 0.25,
                    }
                )
    log = GenerationLog(folder / "generations", 16 * 2**20)
    for step in range(1, steps + 1):
        batch = []
        for i in range(per_step):
            status = rng.choice(STATUSES)
            per_test = [status == "passed" or rng.random() < 0.5 for _ in range(3)]
            batch.append(
                {
                    "step": step,
                    "task_id": f"task-{(step * 7 + i // 8) % 300}",
                    "prompt": "Write a function `solve(xs)` that returns the sum of the squares of the even numbers "
                    "in xs.\n\n" + "Examples: solve([1, 2, 3, 4]) == 20\n" * 3,
                    "completion": f"<think>step {step} sample {i}: iterate and keep the even ones</think>\n"
                    f"```python\n{PROGRAM * 4}```",
                    "source": "data",
                    "hinted": False,
                    "opponent_passed": None,
                    "rewards": {"tests_reward": sum(per_test) / 3, "format_reward": 1.0},
                    "status": status,
                    "tests_passed": sum(per_test),
                    "tests_total": 3,
                    "per_test": per_test,
                    "duration_s": rng.uniform(0.01, 0.2),
                    "reason": None,
                }
            )
        log.put(batch)
    log.close()
    if finished:
        (folder / "state.json").write_text(json.dumps({"phases": {"grpo": {"steps": steps}}}))
        (folder / "summary.json").write_text(json.dumps({"seconds": 20.0 * steps}))
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--per-step", type=int, default=16)
    parser.add_argument("--keep", type=Path, help="write the run here (kept) instead of a temp folder")
    args = parser.parse_args()
    from azr.report import run_report

    with tempfile.TemporaryDirectory() as tmp:
        folder = write_synthetic_run(args.keep or Path(tmp) / "run", args.steps, args.per_step)
        logs = sum(f.stat().st_size for f in (folder / "generations").iterdir()) / 2**20
        started = time.perf_counter()
        page = run_report([folder])
        seconds = time.perf_counter() - started
        print(
            f"{args.steps} steps, {args.per_step} completions a step ({logs:.1f} MB of generation logs): "
            f"report {page.stat().st_size / 2**20:.2f} MB in {seconds:.2f} s -> {page}"
        )


if __name__ == "__main__":
    main()
