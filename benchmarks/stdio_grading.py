"""Grading stdin/stdout tasks: `azr data validate` and `azr eval --samples` on one file, this tree against another
checkout (`--baseline DIR`, e.g. a `git worktree` of an earlier commit), measured side by side in one run.

The file: 18 competitive-programming-style tasks with 647 cases in all (each reads stdin, prints an answer), their
reference solutions, and a samples file of the same solutions (`{"task_id", "solution"}`). Each command runs in a
fresh interpreter in its tree (`PYTHONPATH` and cwd set to it; the `azr.__file__` it imported is checked), the
arms alternating A B A B for `--rounds` rounds so that a busy machine slows both alike; the figures are each arm's
median wall time and median CPU time of the azr process itself (imports, loading, planning and reading verdicts:
the sandbox's workers are not its waited-for children, so their time is not in it) and their ratios. A run whose
command fails (a reference refused, a sample not passing) stops it. A first round warms each tree and is not
counted; Python's bytecode cache is on in the commands (as in a user's install) unless `--no-bytecode-cache`, so a
tree's start-up is not all its modules compiled again on every run.

Usage: python benchmarks/stdio_grading.py [--baseline DIR] [--this DIR] [--rounds R] [--workers W] [--profile]
                                         [--no-bytecode-cache] [--cases N] [--grading N]
(`--profile` prints cProfile's top functions of this tree's grading, in process, instead; `--cases N` times the
sandbox side of N stdin/stdout cases of each tree's harness, alternating in one process: the per-case cost alone;
`--grading N` times grading alone, N passes on a warm pool per run, each tree's runs alternating.)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# (solution, input maker): each task's reference and how its cases' inputs are drawn
PROGRAMS: list[tuple[str, str]] = [
    ("print(sum(map(int, input().split())))", "ints"),
    ("n = int(input())\nprint(n * (n + 1) // 2)", "one"),
    ("print(' '.join(sorted(input().split(), key=int)))", "ints"),
    ("print(max(map(int, input().split())))", "ints"),
    ("print(min(map(int, input().split())))", "ints"),
    ("xs = list(map(int, input().split()))\nprint(len(set(xs)))", "ints"),
    ("print(input()[::-1])", "word"),
    ("s = input()\nprint('YES' if s == s[::-1] else 'NO')", "word"),
    ("n = int(input())\nprint(bin(n).count('1'))", "one"),
    ("import sys\nxs = sys.stdin.read().split()\nprint(len(xs))", "ints"),
    ("xs = list(map(int, input().split()))\nprint(sum(x for x in xs if x % 2 == 0))", "ints"),
    ("n = int(input())\nfor i in range(1, 4):\n    print(n * i)", "one"),
    ("s = input()\nprint(sum(c in 'aeiou' for c in s))", "word"),
    ("xs = list(map(int, input().split()))\nprint(*reversed(xs))", "ints"),
    ("import math\nn = int(input())\nprint(math.isqrt(abs(n)))", "one"),
    ("from collections import Counter\nprint(Counter(input()).most_common(1)[0][1])", "word"),
    ("xs = list(map(int, input().split()))\nprint(max(xs) - min(xs))", "ints"),
    ("n = int(input())\nprint(n % 7, n // 7)", "one"),
]
TOTAL_CASES = 647


def _run(source: str, data: str) -> str:
    """What the reference prints on `data` (computed here, in this process, to write the expected outputs)."""
    import contextlib
    import io

    out = io.StringIO()
    stdin, sys.stdin = sys.stdin, io.StringIO(data)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(source, "<reference>", "exec"), {"__name__": "__main__"})
    finally:
        sys.stdin = stdin
    return out.getvalue()


def _input(kind: str, rng: random.Random) -> str:
    if kind == "ints":
        return " ".join(str(rng.randint(-1000, 1000)) for _ in range(rng.randint(1, 30))) + "\n"
    if kind == "one":
        return f"{rng.randint(0, 10**6)}\n"
    return "".join(rng.choice("abcdeiou") for _ in range(rng.randint(1, 40))) + "\n"


def write_files(folder: Path) -> tuple[Path, Path]:
    """(tasks.jsonl, samples.jsonl) in `folder`: the tasks with their references, and the references as samples."""
    rng = random.Random(0)
    per_task = [TOTAL_CASES // len(PROGRAMS) + (i < TOTAL_CASES % len(PROGRAMS)) for i in range(len(PROGRAMS))]
    tasks, samples = [], []
    for i, ((source, kind), n) in enumerate(zip(PROGRAMS, per_task, strict=True)):
        inputs = [_input(kind, rng) for _ in range(n)]
        tests = [{"input": x, "output": _run(source, x)} for x in inputs]
        tasks.append({"id": f"stdio/{i}", "prompt": f"Task {i}: read stdin, print the answer.", "solution": source})
        tasks[-1]["tests"] = tests
        samples.append({"task_id": f"stdio/{i}", "solution": source})
    path, samples_path = folder / "tasks.jsonl", folder / "samples.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    samples_path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    return path, samples_path


def commands(tasks: Path, samples: Path, out: Path, workers: int) -> dict[str, list[str]]:
    flags = ["--workers", str(workers)]
    return {
        "validate": ["data", "validate", str(tasks), *flags],
        "eval": ["eval", "--dataset", str(tasks), "--samples", str(samples), "--output-dir", str(out)],
    }


def tree_env(tree: Path, bytecode: bool) -> dict[str, str]:
    """The environment of a command run in `tree`: its azr first on the path; with `bytecode`, Python's bytecode
    cache on (as a user's install has it) even where PYTHONDONTWRITEBYTECODE turns it off, so that a tree's
    start-up is not its modules compiled afresh on every run."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:  # no cache read or written: an empty cache folder of its own, never filled
        env |= {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": tempfile.mkdtemp(prefix="azr-no-pycache-")}
    return env


def timed(tree: Path, argv: list[str], bytecode: bool = True) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the azr process) of `python -m azr.cli ARGV` in a fresh interpreter importing
    `tree`'s azr; it must exit 0."""
    env = tree_env(tree, bytecode)
    check = subprocess.run(
        [sys.executable, "-c", "import azr; print(azr.__file__)"], env=env, cwd=tree, capture_output=True, text=True
    )
    if Path(check.stdout.strip()).resolve() != (tree / "azr" / "__init__.py").resolve():
        sys.exit(f"{tree}: imported {check.stdout.strip()}, not its own azr")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "azr.cli", *argv], env=env, cwd=tree, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{tree}: azr {' '.join(argv)} exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return elapsed, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def profile(tasks: Path, workers: int) -> None:
    """cProfile of this tree's load and grading (in process, pool warm), top 25 by cumulative time."""
    import cProfile
    import pstats

    from azr.config import SandboxConfig
    from azr.data import load_tasks
    from azr.rewards import limits_from_config, pool_from_config, validate_references

    cfg = SandboxConfig(workers=workers)
    pool, limits = pool_from_config(cfg), limits_from_config(cfg)
    pool.map(["pass"] * pool.size)
    profiler = cProfile.Profile()
    profiler.enable()
    loaded = load_tasks(tasks)
    results = validate_references(loaded, pool, limits)
    profiler.disable()
    assert all(g is not None and g.passed for _, g in results)
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


def case_costs(trees: dict[str, Path], n: int) -> None:
    """Each tree's sandbox side of a stdin/stdout case (`azr/rewards/runner.py`'s `_case`: the child, its files,
    the wait, the sweep), loaded from the tree and called in turn in this one process, A B A B, `n` times each, in a
    folder on tmpfs as the sandbox's /tmp is; prints the quartiles of each one's wall time per case. Outside any
    sandbox and without the pool, so only the per-case work of the two harnesses differs."""
    import importlib.util
    import inspect

    null = os.open(os.devnull, os.O_WRONLY)
    if null != 3:
        os.dup2(null, 3)  # the report channel a case's child closes (before any case file takes descriptor 3)
    code = compile("print(sum(map(int, input().split())))", "<solution>", "exec")
    walls: dict[str, list[float]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as folder:
        os.chdir(folder)  # first: a harness makes its case files in its working folder
        runners = {}
        for name, tree in trees.items():
            spec = importlib.util.spec_from_file_location(f"runner_{name}", tree / "azr" / "rewards" / "runner.py")
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            guarded = getattr(module, "_guard_harness", lambda: False)()  # as the tree's own harness starts cases
            takes_files = "files" in inspect.signature(module._case).parameters and guarded is not False
            runners[name] = (
                module,
                ((module._tmpfile(), module._tmpfile(), module._tmpfile()),) if takes_files else (),
            )
        for i in range(n):
            for name, (module, extra) in runners.items():
                start = time.perf_counter()
                report = module._case(code, None, "1 2 3\n", 1 << 20, 5.0, f"case-{name}-{i}", *extra)
                walls[name].append(time.perf_counter() - start)
                if report.get("out") != "6\n":
                    sys.exit(f"{trees[name]}: a case printed {report!r}")
        os.chdir(REPO)
    print(f"one stdin/stdout case, sandbox side, {n} each, A B A B in one process (ms per case)")
    for name, values in walls.items():
        q = statistics.quantiles(values, n=4)
        print(f"{name}: p25 {q[0] * 1e3:.3f}, median {q[1] * 1e3:.3f}, p75 {q[2] * 1e3:.3f}")


def grading_times(tasks: Path, workers: int, repeat: int) -> list[float]:
    """In this process (its azr): the tasks loaded, a warm pool, then `validate_references` timed `repeat` times."""
    from azr.config import SandboxConfig
    from azr.data import load_tasks
    from azr.rewards import limits_from_config, pool_from_config, validate_references

    cfg = SandboxConfig(workers=workers)
    pool, limits = pool_from_config(cfg), limits_from_config(cfg)
    pool.map(["pass"] * pool.size)
    loaded = load_tasks(tasks)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        results = validate_references(loaded, pool, limits)
        times.append(time.perf_counter() - start)
        if not all(g is not None and g.passed for _, g in results):
            sys.exit("a reference failed its tests")
    return times


def grading_side_by_side(trees: dict[str, Path], tasks: Path, workers: int, rounds: int, repeat: int) -> None:
    """Grading alone (no start-up): each tree in a fresh interpreter of its own, A B A B, `repeat` timed passes
    each; the minimum is the figure least swayed by other load, the median beside it."""
    found: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(rounds):
        for name, tree in trees.items():
            argv = [sys.executable, __file__, "--grading-in-process", str(tasks), "--workers", str(workers)]
            done = subprocess.run(
                [*argv, "--repeat", str(repeat)], env=tree_env(tree, True), cwd=tree, capture_output=True, text=True
            )
            if done.returncode != 0:
                sys.exit(f"{tree}: {done.stderr[-2000:]}")
            found[name] += json.loads(done.stdout.splitlines()[-1])
    print(f"grading alone (validate_references, pool warm): {rounds} rounds x {repeat} passes per tree, A B A B")
    for name, values in found.items():
        print(f"{name}: min {min(values):.3f} s, median {statistics.median(values):.3f} s")
    if "baseline" in found:
        medians = statistics.median(found["this"]) / statistics.median(found["baseline"])
        print(f"this/baseline: min {min(found['this']) / min(found['baseline']):.2f}, median {medians:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="another checkout's root, measured beside this tree")
    parser.add_argument("--this", type=Path, default=REPO, help="the tree measured as this one [this checkout]")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--cases", type=int, default=0, help="instead: N stdin/stdout cases of each tree's harness")
    parser.add_argument("--grading", type=int, default=0, help="instead: grading alone, N timed passes per run")
    parser.add_argument("--grading-in-process", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--repeat", type=int, default=3, help=argparse.SUPPRESS)
    parser.add_argument(
        "--no-bytecode-cache", action="store_true", help="compile every module on every run (PYTHONDONTWRITEBYTECODE)"
    )
    args = parser.parse_args()
    if args.grading_in_process:
        print(json.dumps(grading_times(args.grading_in_process, args.workers, args.repeat)))
        return
    if args.cases:
        trees = {"this": args.this.resolve(), **({"baseline": args.baseline.resolve()} if args.baseline else {})}
        case_costs(trees, args.cases)
        return
    with tempfile.TemporaryDirectory() as folder:
        tasks, samples = write_files(Path(folder))
        if args.profile:
            profile(tasks, args.workers)
            return
        if args.grading:
            trees = {"this": args.this.resolve(), **({"baseline": args.baseline.resolve()} if args.baseline else {})}
            grading_side_by_side(trees, tasks, args.workers, args.rounds, args.grading)
            return
        trees = {"this": args.this.resolve(), **({"baseline": args.baseline.resolve()} if args.baseline else {})}
        bytecode = not args.no_bytecode_cache
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for r in range(-1, args.rounds):  # round -1 warms each tree (its bytecode cache, the page cache): not counted
            for name, tree in trees.items():
                for what, argv in commands(tasks, samples, Path(folder) / f"eval-{name}-{r}", args.workers).items():
                    got = timed(tree, argv, bytecode)
                    if r >= 0:
                        times.setdefault((name, what), []).append(got)
        cache = "on" if bytecode else "off (every module compiled on every run)"
        print(
            f"{len(PROGRAMS)} tasks, {TOTAL_CASES} cases, {args.workers} workers, {args.rounds} rounds (ABAB), "
            f"bytecode cache {cache}"
        )
        for what in ("validate", "eval"):
            for i, kind in enumerate(("wall", "CPU")):
                medians = {name: statistics.median(t[i] for t in times[(name, what)]) for name in trees}
                line = ", ".join(f"{name} {m:.2f} s" for name, m in medians.items())
                ratio = f"; this/baseline {medians['this'] / medians['baseline']:.2f}" if "baseline" in medians else ""
                print(f"{what}: median {kind} time {line}{ratio}")


if __name__ == "__main__":
    main()
