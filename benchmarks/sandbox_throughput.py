"""Sandbox throughput (goal: >= 400 runs/s and >= 10x one plain `python` subprocess per program, on 2 cores).

The same N trivial programs through (a) one plain `python -c` subprocess each (the interpreter azr runs under, with
its site-packages, as a naive harness would), (a') the fastest possible subprocess (`python -I -S -c`, the bare base
interpreter), and (b) the azr pool on a warm backend. Both subprocess rows are printed so the ratio is honest.
Every rate counts only the runs that succeeded (exit 0; in the pool, status ok), and a measurement in which any run
failed never meets the goal: the failures are printed instead.

With `--baseline DIR` (another checkout of azr, e.g. a `git worktree` of the last release) it then measures (b) for
this tree and for DIR in turn (each first in alternate rounds), each in a fresh interpreter, `--rounds` times, and
prints the ratio of the medians: is this change slower than that one, on this machine, now. Each of those
interpreters imports the azr of its tree (`PYTHONPATH`, run in that tree) and reports `azr.__file__`, which is
checked; a round with failed runs stops it.

Usage: python benchmarks/sandbox_throughput.py [--n N] [--subprocess-n N] [--workers W] [--backend auto]
                                               [--baseline DIR [--rounds R]]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from azr.sandbox import open_pool

PROGRAM = "def f(x):\n    return x + 1\n\nassert f({i}) == {j}\n"


def _programs(n: int) -> list[str]:
    return [PROGRAM.format(i=i, j=i + 1) for i in range(n)]


def _subprocess_rate(programs: list[str], workers: int, bare: bool) -> tuple[float, int]:
    """(successful runs per second, failed runs)."""
    python = (getattr(sys, "_base_executable", None) or sys.executable) if bare else sys.executable
    flags = ["-I", "-S"] if bare else []

    def one(code: str) -> int:
        return subprocess.run([python, *flags, "-c", code], stdin=subprocess.DEVNULL).returncode

    with ThreadPoolExecutor(workers) as pool:
        start = time.perf_counter()
        codes = list(pool.map(one, programs))
        elapsed = time.perf_counter() - start
    failed = sum(code != 0 for code in codes)
    return (len(programs) - failed) / elapsed, failed


def _pool_rate(programs: list[str], workers: int, backend: str) -> tuple[float, float, str, int]:
    """(successful runs/s, pool start seconds, backend name, failed runs): started and warmed up (one run per worker)
    before timing."""
    start = time.perf_counter()
    pool = open_pool(backend, workers=workers)
    try:
        pool.map(["pass"] * pool.size)  # every worker started once, outside the timed part
        started = time.perf_counter() - start
        start = time.perf_counter()
        results = pool.map(programs)
        elapsed = time.perf_counter() - start
    finally:
        pool.close()
    failed = sum(r.status != "ok" or r.exit_code != 0 for r in results)
    return (len(programs) - failed) / elapsed, started, pool.backend.name, failed


def pool_rate_of(tree: Path, args: argparse.Namespace) -> dict:
    """(b) for the azr of `tree` (a checkout's root), in a fresh interpreter run in that tree that imports it first:
    {"rate", "started_s", "backend", "failed", "azr"} (`azr`: the azr/__init__.py it imported)."""
    argv = [sys.executable, __file__, "--pool-only", "--n", str(args.n), "--workers", str(args.workers)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [*argv, "--backend", args.backend], capture_output=True, text=True, env=env, cwd=tree, check=True
    )
    got = json.loads(done.stdout.splitlines()[-1])
    ran = Path(got["azr"]).resolve().parent.parent
    if ran != tree.resolve():
        raise SystemExit(f"the arm for {tree} ran the azr of {ran}: no figure printed")
    if got["failed"]:
        raise SystemExit(f"{got['failed']} of {args.n} sandboxed runs of {tree}'s azr failed: no figure printed")
    return got


def _against_baseline(args: argparse.Namespace) -> None:
    here, there = Path(__file__).resolve().parents[1], Path(args.baseline).resolve()
    if not (there / "azr" / "sandbox").is_dir():
        raise SystemExit(f"--baseline {args.baseline}: not a checkout of azr (no azr/sandbox/ in it)")
    ours, theirs = [], []
    for round_ in range(args.rounds):  # in turn, so that a change in the machine's load hits both alike, and
        # first in alternate rounds: on a loaded machine the arm run first was the slower one, whichever tree it was
        first, second = (ours, theirs) if round_ % 2 == 0 else (theirs, ours)
        first.append(pool_rate_of(here if first is ours else there, args)["rate"])
        second.append(pool_rate_of(here if second is ours else there, args)["rate"])
    print(f"(b) this tree, {args.rounds} rounds : " + ", ".join(f"{r:.1f}" for r in ours) + " runs/s")
    print(f"(b) {there.name}, {args.rounds} rounds : " + ", ".join(f"{r:.1f}" for r in theirs) + " runs/s")
    ratio = statistics.median(ours) / statistics.median(theirs)
    print(f"ratio of medians this / baseline: {ratio:.3f} ({'no slower' if ratio >= 0.95 else 'SLOWER'} within 5%)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="programs through the sandbox pool")
    parser.add_argument("--subprocess-n", type=int, default=None, help="programs as plain subprocesses (default: --n)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--baseline", default=None, help="another azr checkout to compare the pool's rate with")
    parser.add_argument("--rounds", type=int, default=5, help="with --baseline: measurements of each, in turn")
    parser.add_argument("--pool-only", action="store_true", help=argparse.SUPPRESS)  # one (b), as JSON
    args = parser.parse_args()
    if args.pool_only:
        import azr

        rate, started, backend, failed = _pool_rate(_programs(args.n), args.workers, args.backend)
        print(
            json.dumps({"rate": rate, "started_s": started, "backend": backend, "failed": failed, "azr": azr.__file__})
        )
        return
    plain_n = args.subprocess_n or args.n
    plain, plain_failed = _subprocess_rate(_programs(plain_n), args.workers, bare=False)
    bare, bare_failed = _subprocess_rate(_programs(plain_n), args.workers, bare=True)
    sandboxed, started, backend, failed = _pool_rate(_programs(args.n), args.workers, args.backend)
    ratio = sandboxed / plain if plain else float("inf")
    goal = "met" if sandboxed >= 400 and ratio >= 10 else "MISSED"
    failures = {"(a)": (plain_failed, plain_n), "(a2)": (bare_failed, plain_n), "(b)": (failed, args.n)}
    if any(count for count, _ in failures.values()):
        said = ", ".join(f"{row} {count} of {n}" for row, (count, n) in failures.items() if count)
        goal = f"NOT MET: runs failed ({said}); the rates count only the successful ones"
    print(f"cores {os.cpu_count()}, workers {args.workers}, backend {backend}")
    print(f"{'(a)  python -c':<24}: {plain:8.1f} successful runs/s ({plain_n} programs)")
    print(f"{'(a2) python -I -S -c':<24}: {bare:8.1f} successful runs/s ({plain_n} programs)")
    pool_line = f"{sandboxed:8.1f} successful runs/s ({args.n} programs; pool start {started * 1000:.0f} ms, not timed)"
    print(f"{'(b)  azr pool, ' + backend:<24}: {pool_line}")
    print(f"{'ratio (b) / (a)':<24}: {ratio:8.1f}x   (b) / (a2): {sandboxed / bare if bare else float('inf'):.1f}x")
    print(f"goal >= 400 runs/s and >= 10x (a): {goal}")
    if args.baseline:
        _against_baseline(args)


if __name__ == "__main__":
    main()
