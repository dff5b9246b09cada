"""Tool-use throughput, measured side by side in one run.

1. python_run calls/s through the toolbox (a warm sandbox pool, `--workers` calls in flight, output capped and
   neutralised) against a plain `azr sandbox run` per call (a process that starts azr and a one-worker pool each
   time, as a harness shelling out per call would), on the same programs.
2. `azr gen` episodes/s on the tiny model (built here; the local policy, tools offered, each answer graded): the
   collection alone (model loaded, sandbox warm) and the whole command's wall time.

Usage: python benchmarks/tools.py [--calls N] [--cli-calls N] [--workers W] [--episodes N] [--max-new-tokens T]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROGRAM = "import math\nprint(sum(math.isqrt(i) for i in range({i})))\n"


def toolbox_rate(n: int, workers: int) -> tuple[float, int]:
    from azr.config import SandboxConfig, ToolsConfig
    from azr.sandbox import open_pool
    from azr.tools import Toolbox

    with open_pool("auto", workers=workers) as pool:
        toolbox = Toolbox(ToolsConfig(), SandboxConfig(), pool=pool)
        pool.map(["pass"] * pool.size)  # workers started outside the timed part
        start = time.perf_counter()
        with ThreadPoolExecutor(workers) as threads:
            results = list(
                threads.map(lambda i: toolbox.call("python_run", {"code": PROGRAM.format(i=i)})[0], range(n))
            )
        elapsed = time.perf_counter() - start
    return n / elapsed, sum(not r.ok for r in results)


def cli_rate(n: int, workers: int) -> tuple[float, int]:
    argv = [sys.executable, "-c", "from azr.cli import main; main()", "sandbox", "run", "--code", "-", "--json"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def one(i: int) -> bool:
        done = subprocess.run(argv, input=PROGRAM.format(i=i), capture_output=True, text=True, env=env)
        return done.returncode == 0 and json.loads(done.stdout)["status"] == "ok"

    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as threads:
        ok = list(threads.map(one, range(n)))
    return n / (time.perf_counter() - start), ok.count(False)


def gen_rate(episodes: int, max_new_tokens: int, workers: int) -> dict[str, float]:
    import logging

    import azr.envs.gen as gen
    from azr.config import load_config
    from azr.models import build_tiny_model

    logging.basicConfig(level="WARNING")
    with tempfile.TemporaryDirectory() as tmp:
        model = build_tiny_model(Path(tmp) / "tiny", seed=0)
        recipe = Path(tmp) / "gen.yaml"
        recipe.write_text(
            f"model: {{name_or_path: '{model}'}}\nsandbox: {{workers: {workers}}}\nlogging: {{console: plain}}\n"
            f"gen: {{max_tasks: {episodes}, max_turns: 2, max_new_tokens: {max_new_tokens}, concurrency: 4}}\n"
        )
        timed = {}
        real_play = gen._Collector._play

        async def counted(*args, **kwargs):  # when the first episode starts: the model is loaded by then
            timed.setdefault("first", time.perf_counter())
            return await real_play(*args, **kwargs)

        gen._Collector._play = counted
        start = time.perf_counter()
        code = gen.run_gen(load_config(recipe, []), Path(tmp) / "rollouts.jsonl")
        end = time.perf_counter()
        gen._Collector._play = real_play
        records = [json.loads(line) for line in (Path(tmp) / "rollouts.jsonl").read_text().splitlines()]
    tokens = sum(r["usage"]["completion_tokens"] for r in records)
    return {
        "exit": code,
        "episodes": len(records),
        "collect_rate": len(records) / (end - timed["first"]),
        "command_rate": len(records) / (end - start),
        "tokens_per_s": tokens / (end - timed["first"]),
        "turns": sum(r["usage"]["turns"] for r in records) / len(records),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--cli-calls", type=int, default=10)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    args = parser.parse_args()

    print(f"python_run, {args.workers} in flight")
    fast, failed_fast = toolbox_rate(args.calls, args.workers)
    slow, failed_slow = cli_rate(args.cli_calls, args.workers)
    print(f"  toolbox (warm pool)            {fast:8.1f} calls/s  ({args.calls} calls, {failed_fast} failed)")
    print(f"  `azr sandbox run` per call     {slow:8.2f} calls/s  ({args.cli_calls} calls, {failed_slow} failed)")
    print(f"  ratio                          {fast / slow:8.1f}x")
    f = gen_rate(args.episodes, args.max_new_tokens, args.workers)
    print(f"azr gen on the tiny model ({f['episodes']} episodes, {f['turns']:.2f} turns each, exit {f['exit']})")
    print(f"  collection (model loaded)      {f['collect_rate']:8.2f} episodes/s  ({f['tokens_per_s']:.0f} tokens/s)")
    print(f"  whole command                  {f['command_rate']:8.2f} episodes/s")


if __name__ == "__main__":
    main()
