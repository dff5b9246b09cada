"""The benchmarks print only what they measured: a baseline arm runs the baseline checkout's own azr (wherever the
script is started from), a rate counts only successful runs, and a measurement with failed runs never meets its
goal. Fake checkouts stand in for a baseline: what they print proves which tree ran."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

FAKE_CLI = "import sys\n\ndef main():\n    print('fake azr', sys.argv[1:])\n"
FAKE_SANDBOX = """
class Result:
    def __init__(self, ok):
        self.status, self.exit_code = ("ok", 0) if ok else ("crashed", None)


class Pool:
    size = 1

    class backend:
        name = "fake"

    def map(self, programs):
        return [Result(i % 3 != 2) for i, _ in enumerate(programs)]  # every third run fails

    def close(self):
        pass


def open_pool(backend, workers=None):
    return Pool()
"""


def script(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fake_tree(tmp_path) -> Path:
    tree = tmp_path / "baseline"
    for path, text in {
        "azr/__init__.py": "",
        "azr/cli/__init__.py": FAKE_CLI,
        "azr/sandbox/__init__.py": FAKE_SANDBOX,
    }.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(text)
    return tree


def test_the_eval_baseline_arm_runs_the_baselines_azr_even_from_this_checkout(fake_tree, tmp_path, monkeypatch):
    bench = script("eval_vs_humaneval")
    monkeypatch.chdir(REPO)  # where a user runs it: this tree's azr/ in the current directory must not win
    _, done = bench.azr_eval(tmp_path / "samples.jsonl", tmp_path / "out", fake_tree)
    assert bench.azr_ran_from(done) == fake_tree.resolve(), done.stderr
    assert done.stdout.startswith("fake azr ['eval', '--samples'")
    _, done = bench.azr_eval(tmp_path / "samples.jsonl", tmp_path / "out", REPO)  # and this tree's arm, this tree
    assert bench.azr_ran_from(done) == REPO, done.stderr


def test_the_throughput_baseline_arm_runs_the_baselines_azr_and_failed_runs_stop_it(fake_tree, monkeypatch):
    bench = script("sandbox_throughput")
    monkeypatch.chdir(REPO)
    args = argparse.Namespace(n=6, workers=1, backend="auto")
    with pytest.raises(SystemExit, match=rf"2 of 6 sandboxed runs of {fake_tree}'s azr failed"):
        bench.pool_rate_of(fake_tree, args)  # the fake's failures, so the fake ran


def test_the_throughput_arms_go_first_in_turn(fake_tree, monkeypatch, capsys):
    bench = script("sandbox_throughput")
    order = []
    monkeypatch.setattr(bench, "pool_rate_of", lambda tree, args: order.append(tree) or {"rate": 1.0})
    bench._against_baseline(argparse.Namespace(baseline=str(fake_tree), rounds=4))
    here, there = REPO, fake_tree.resolve()
    assert order == [here, there, there, here, here, there, there, here]
    assert "ratio of medians this / baseline: 1.000" in capsys.readouterr().out


def test_a_throughput_rate_counts_only_successful_runs_and_failures_never_meet_the_goal(fake_tree):
    argv = [sys.executable, str(REPO / "benchmarks" / "sandbox_throughput.py"), "--n", "3000", "--subprocess-n", "2"]
    env = {**os.environ, "PYTHONPATH": str(fake_tree)}
    done = subprocess.run([*argv, "--workers", "1"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "backend fake" in done.stdout
    assert "NOT MET: runs failed ((b) 1000 of 3000); the rates count only the successful ones" in done.stdout
    assert "met" not in done.stdout.replace("NOT MET", "")


def test_the_stdio_grading_arms_run_their_own_trees_azr_and_a_failed_command_stops_it(fake_tree, tmp_path):
    bench = script("stdio_grading")
    tasks, samples = bench.write_files(tmp_path)
    rows = [json.loads(line) for line in tasks.read_text().splitlines()]
    assert len(rows) == 18 and sum(len(r["tests"]) for r in rows) == bench.TOTAL_CASES
    argv = bench.commands(tasks, samples, tmp_path / "out", 1)["validate"]
    with pytest.raises(SystemExit, match=rf"^{fake_tree.resolve()}: azr data validate .* exited 1"):
        bench.timed(fake_tree.resolve(), argv)  # the fake cli prints and returns nothing: main() is no entry point


def test_feedback_costs_arms_interleave_abba_and_each_arms_figure_is_its_median(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    bench = script("feedback_cost")
    order = [arm for repeat in range(4) for arm in bench.arm_order(repeat)]
    assert order[:8] == [*bench.ARMS, *reversed(bench.ARMS)] and order[8:] == order[:8]
    for arm in bench.ARMS:  # over two repeats every arm's mean place in the run is the same: linear drift cancels
        assert sum(i for i, a in enumerate(order[:8]) if a == arm) == 7
    step = {"single": [1.0, 9.0, 2.0], "turns=1": [2.0, 2.5, 30.0], "turns=2": [3.0, 3.0, 3.0], "turns=3": [4, 5, 6]}
    runs = [
        {"arm": arm, "repeat": r, **{k: step[arm][r] for k in bench.FIGURES}}
        for r in range(3)
        for arm in bench.arm_order(r)
    ]
    arms = bench._by_arm(runs)
    assert [arms[a]["step_seconds"] for a in bench.ARMS] == [2.0, 2.5, 3.0, 5]  # a burst in one repeat moves none
    bench._print({"steps": 1, "repeats": 3, "runs": runs, "arms": arms})
    out = capsys.readouterr().out
    assert "single 1.00, turns=1 2.00, turns=2 3.00, turns=3 4.00, turns=3 5.00, turns=2 3.00" in out
    assert "median per arm" in out and out.splitlines()[-1].split()[-1] == "2.50"  # x single of turns=3


def test_the_real_model_benchmark_counts_transitions_and_pairs_tasks(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))  # its sibling vllm_cpu.py, as when run as a script
    bench = script("real_model")

    def record(task, index, status, passed, tests):
        return {"task_id": task, "index": index, "status": status, "passed": passed, "tests_passed": tests,
                "tests_total": 4}  # fmt: skip

    before = {("a", 0): record("a", 0, "no_code", False, 0), ("b", 0): record("b", 0, "failed", False, 2),
              ("c", 0): record("c", 0, "passed", True, 4)}  # fmt: skip
    after = {("a", 0): record("a", 0, "failed", False, 1), ("b", 0): record("b", 0, "passed", True, 4),
             ("c", 0): record("c", 0, "no_code", False, 0)}  # fmt: skip
    assert bench.transitions(before, after) == {
        "no code -> code": 1, "code -> no code": 1, "fails -> passes": 1, "passes -> fails": 1,
    }  # fmt: skip
    tasks_before, tasks_after = bench.per_task(before), bench.per_task(after)
    assert tasks_before["b"] == (0.0, 0.5) and tasks_after["b"] == (1.0, 1.0)
    figures = bench.compare(tasks_before, tasks_after)
    assert figures["pass@1"]["delta"] == 0.0 and figures["pass@1"]["tasks"] == 3
    assert abs(figures["tests passed"]["delta"] - (1.25 - 1.5) / 3) < 1e-9
    # the train curve: every GRPO step's pass rate and reward, and the first and last quarter's means
    lines = [{"phase": "sft", "step": 1, "loss": 1.0}] + [
        {"phase": "grpo", "step": k, "sandbox/passed": k / 8, "reward": k / 4} for k in range(1, 9)
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    train = bench.train_figures(tmp_path)
    assert train["steps_logged"] == 8 and [p["step"] for p in train["curve"]] == list(range(1, 9))
    assert train["pass_rate_first_quarter"] == 0.1875 and train["pass_rate_last_quarter"] == 0.9375


def test_the_async_soak_runs_its_asynchronous_runs_after_a_synchronous_one_and_between_every_four(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    bench = script("async_soak")
    assert bench.sequence(10) == [0, 2, 4, 2, 4, 0, 2, 4, 2, 4, 0, 2, 4]
    assert [s for s in bench.sequence(10) if s] == [2, 4] * 5
    died = "INFO non-default args: {}\nERROR RuntimeError: CPU Generator does not use offset\nERROR EngineDeadError\n"
    stopped = "INFO non-default args: {}\nINFO [shutdown] API server: shutdown triggered\nERROR EngineDeadError\n"
    assert bench.engine_errors(died + stopped) == 1 and bench.engine_errors(stopped + stopped) == 0
