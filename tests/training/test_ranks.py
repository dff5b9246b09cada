"""`azr train` on several processes: the rank helpers on their own, then real two-process runs on the CPU.

The runs are `torchrun --standalone --nproc_per_node 2` (gloo, `use_cpu`) of `python -m azr.cli train` on the tiny
model, the bwrap sandbox and, for self-play, the HTTP stub as opponent and teacher: what a multi-GPU box does, with
the CPU standing in for the GPUs. (`accelerate launch --cpu` starts one process, not two.) They check one set of
outputs (each step logged once, every rank's completions in the generation log), equal weights on both ranks
after training, no sandbox directory left, and a SIGKILL of the whole job followed by `--resume-from latest`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import http_stub
import pytest
from procs import kill_group_when
from recipes import tiny_recipe, write_recipe
from run_files import read_generations, read_jsonl

from azr.config import SandboxConfig
from azr.logs import read_jsonl_records
from azr.training.ranks import Ranks, rank_env, sandbox_share, weights_digest
from azr.training.state import checkpoints

KEY = "sk-fake-ranks-KEY-3c3c3c3c3c3c3c3c"
# A reward that varies between completions of the untrained tiny model (which passes no test): without it every
# advantage is zero, nothing is learned, and equal weights on the two ranks would prove nothing.
SPREAD_REWARD = """
import zlib


def spread_reward(completions, **columns):
    return [zlib.crc32(str(c).encode()) % 7 / 7 for c in completions]
"""


# ------------------------------------------------------------------------------------------- the rank helpers
@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("n", [0, 1, 5, 8])
def test_each_rank_gets_an_equal_share_and_the_real_parts_give_back_the_list(world, n):
    items = list(range(n))
    shares = [Ranks(rank, world).split(items) for rank in range(world)]
    assert len({len(share) for share, _ in shares}) == 1  # every rank runs as many forward passes
    assert [x for share, real in shares for x in share[:real]] == items


def test_the_ranks_come_from_the_launchers_environment(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert rank_env() == Ranks()
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert rank_env() == Ranks(5, 8, 1, 4) and not rank_env().main


def test_the_machines_sandbox_workers_are_shared_by_its_ranks(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert sandbox_share(SandboxConfig(workers=None), Ranks(0, 8, 0, 4)).workers == 4  # 16 cores, 4 ranks here
    assert sandbox_share(SandboxConfig(workers=6), Ranks(1, 2, 1, 2)).workers == 3
    assert sandbox_share(SandboxConfig(workers=2), Ranks(3, 8, 3, 8)).workers == 1  # never none
    alone = SandboxConfig(workers=None)
    assert sandbox_share(alone, Ranks()) is alone  # one process: the setting as it is


def test_the_weights_digest_covers_trainable_weights_only(tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    first = weights_digest(model)
    assert weights_digest(AutoModelForCausalLM.from_pretrained(tiny_model_dir)) == first
    frozen, trained = list(model.parameters())[:2]
    frozen.requires_grad_(False)
    changed = weights_digest(model)
    with torch.no_grad():
        frozen.add_(1.0)
    assert weights_digest(model) == changed
    with torch.no_grad():
        trained.view(-1)[0] += 1e-3
    assert weights_digest(model) != changed


def test_python_dash_m_azr_cli_is_the_azr_command():
    """What `accelerate launch -m azr.cli train ...` and `torchrun -m azr.cli train ...` run."""
    done = subprocess.run([sys.executable, "-m", "azr.cli", "train", "--help"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "--resume-from" in done.stdout


# ----------------------------------------------------------------------------------- two processes, for real
def _recipe(tmp_path: Path, model_dir: Path, out: Path, **sections) -> Path:
    """The tiny recipe on two ranks (per rank: two prompts of two completions; eight rows a step), `sections` merged
    over it (one level deep)."""
    base = {
        "model": {"gradient_checkpointing": False},
        "grpo": {"learning_rate": 1e-2},
        "rewards": [{"name": "tests", "weight": 1.0}, {"name": "spread_rewards:spread_reward", "weight": 1.0}],
        "logging": {"pass_rate_tasks": 3, "pass_rate_samples": 2},
    }
    for name, values in sections.items():
        base[name] = {**base.get(name, {}), **values}
    (tmp_path / "spread_rewards.py").write_text(SPREAD_REWARD)
    return write_recipe(tmp_path / f"{out.name}.yaml", tiny_recipe(model_dir, out, **base))


def _launch(recipe: Path, log: Path, *args: str, launcher: tuple[str, ...] = ()) -> subprocess.Popen:
    """`torchrun --standalone --nproc_per_node 2 -m azr.cli train` in a session of its own, its temp files (the
    sandbox pools' directories among them) in a folder of the test's."""
    tmp = recipe.parent / "tmp"
    tmp.mkdir(exist_ok=True)
    path = os.pathsep.join(p for p in (str(recipe.parent), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": path, "NO_PROXY": "127.0.0.1", "AZR_FAKE_KEY": KEY}
    env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", *launcher]
    argv += ["-m", "azr.cli", "train", "--config", str(recipe), *args]
    with open(log, "w") as fh:
        return subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _finish(proc: subprocess.Popen, timeout_s: float = 300) -> int:
    """Wait for the job; past `timeout_s` (a hang), kill its process group. Returns its exit code."""
    try:
        proc.wait(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode


def _run(recipe: Path, log: Path, *args: str) -> str:
    code = _finish(_launch(recipe, log, *args))
    text = log.read_text()
    assert code == 0, text[-4000:]
    assert not list((recipe.parent / "tmp").glob("azr-sandbox-*")), "a sandbox directory was left behind"
    return text


def _check_one_set_of_outputs(out: Path, steps: int, rows: int) -> list[dict]:
    """Each phase and step once in metrics.jsonl, every rank's rows of every step in the generation log, and
    both ranks' trainable weights equal after training (and changed by it)."""
    records = read_jsonl(out / "metrics.jsonl")
    assert [r["phase"] for r in records] == ["eval_before"] + ["grpo"] * steps + ["eval_after"]
    assert [r["step"] for r in records if r["phase"] == "grpo"] == list(range(1, steps + 1))
    assert records[0]["completions"] == 3 * 2  # three tasks, split over the ranks, graded together
    generations = read_generations(out)
    assert Counter(r["step"] for r in generations) == {s: rows for s in range(1, steps + 1)}
    state = json.loads((out / "state.json").read_text())["phases"]
    assert list(state) == ["eval_before", "grpo", "eval_after"]
    digests = state["grpo"]["weights_sha256"]
    assert len(digests) == 2 and digests[0] == digests[1]
    assert all(r["grad_norm"] > 0 for r in records if r["phase"] == "grpo")
    return generations


@pytest.mark.slow(minutes=0.5)
def test_two_processes_write_one_set_of_outputs_and_keep_equal_weights(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    started = time.monotonic()
    log = _run(_recipe(tmp_path, tiny_model_dir, out), tmp_path / "run.log")
    seconds = time.monotonic() - started
    generations = _check_one_set_of_outputs(out, steps=2, rows=8)
    # Four prompts a step, two on each rank: all four tasks are in the log at each step (one epoch a step).
    for step in (1, 2):
        assert Counter(r["task_id"] for r in generations if r["step"] == step) == {t: 2 for t in _task_ids(out)}
    assert "ranks: 2 processes, 2 on this machine" in log
    assert log.count("sandbox: bwrap, 1 workers") == 1  # each rank's share; the other rank logs warnings only
    assert (out / "final" / "adapter_model.safetensors").is_file()
    assert (out / "checkpoints" / "checkpoint-2" / "rng_state_1.pth").is_file()  # each rank's RNG, for a resume
    print(f"two-process run: {seconds:.1f} s")


# Fault injection on rank 1 only: each batch it grades counts every completion as an infrastructure failure, as
# if its sandbox workers kept dying. (The untrained tiny model writes no code, so its sandbox never runs at all.)
BREAK_RANK_1 = """
import os

if os.environ.get("RANK") == "1":
    from azr.rewards import functions
    from azr.rewards.grading import Grade

    graded = functions.CodeGrader.outcomes

    def outcomes(self, completions, columns):
        found = graded(self, completions, columns)
        self._account([Grade("error", 0, 1, ["injected: worker lost"])] * len(completions))
        return found

    functions.CodeGrader.outcomes = outcomes
"""


@pytest.mark.slow(minutes=0.5)
def test_a_sandbox_failing_on_one_rank_stops_every_rank_at_the_same_step(tiny_model_dir, tmp_path):
    """Rank 1's batches fail past sandbox.max_infra_failure_rate, rank 0's are healthy: both decide on the summed
    counts and stop at the end of step 1 with the same error, rather than rank 0 waiting for rank 1 in the next
    collective. (torchrun would also kill a rank left waiting: the slow monitor interval leaves each rank the time
    to say why it stopped, which is what is checked.)"""
    out = tmp_path / "run"
    recipe = _recipe(tmp_path, tiny_model_dir, out, grpo={"max_steps": 4}, logging={"pass_rate_tasks": 0})
    (tmp_path / "sitecustomize.py").write_text(BREAK_RANK_1)
    code = _finish(_launch(recipe, tmp_path / "run.log", launcher=("--monitor-interval", "5")))
    log = (tmp_path / "run.log").read_text()
    assert code != 0
    stopped = [line for line in log.splitlines() if line.startswith("azr: error: ")]
    assert len(stopped) == 2 and stopped[0] == stopped[1], log[-4000:]
    assert "4 of 4 sandbox runs in one batch failed for infrastructure reasons" in stopped[0]
    # Stopped at the end of step 1, before it was logged: its batch is in the generation log, no step 2 anywhere.
    assert not [r for r in read_jsonl(out / "metrics.jsonl") if r["phase"] == "grpo"]
    assert Counter(r["step"] for r in read_generations(out)) == {1: 8}
    assert not list((tmp_path / "tmp").glob("azr-sandbox-*"))


def _task_ids(out: Path) -> set[str]:
    return {r["task_id"] for r in read_generations(out)}


@pytest.mark.slow(minutes=1)
def test_two_process_selfplay_killed_then_resumed_plays_each_round_once(tiny_model_dir, tmp_path, monkeypatch):
    """Self-play against the stub (opponent and teacher), with groups that straddle the two ranks (three prompt
    groups of two a step, three rows per rank): SIGKILL to the torchrun job after checkpoint-2, nothing of it left
    running, then `--resume-from latest`: each step, batch and self-play round once, one opponent request per task."""
    out, steps = tmp_path / "arena", 8
    endpoint = {"enabled": True, "api_key_env": "AZR_FAKE_KEY", "timeout_s": 30, "max_retries": 1}
    with http_stub.StubServer(delay_s=0.3) as stub:  # a slow opponent: each step takes long enough to be killed in
        recipe = _recipe(
            tmp_path,
            tiny_model_dir,
            out,
            grpo={"per_device_train_batch_size": 3, "max_steps": steps, "save_steps": 2},
            self_play={**endpoint, "base_url": stub.url, "model": "rival", "max_tokens": 16, "scoreboard_every": 1},
            teacher={**endpoint, "base_url": stub.url, "model": "teach", "max_tokens": 32},
            teacher_assist={"enabled": True, "hint_share": 0.34, "hint_prob_neither": 1.0},
            curriculum={"replay": True, "replay_rate": 0.34},
        )

        def checkpoint_2_and_step_3() -> bool:
            logged = read_jsonl_records(out / "metrics.jsonl") if (out / "metrics.jsonl").exists() else []
            return any(r.get("step", 0) >= 3 for r in logged) and bool(checkpoints(out, "grpo"))

        # torchrun starts each rank in a session of its own: they and their sandbox workers must die all the same.
        first = tmp_path / "first.log"
        started = kill_group_when(_launch(recipe, first), checkpoint_2_and_step_3, first)
        assert len(started) >= 4, "torchrun should have started two ranks and their sandbox workers"
        from_step = checkpoints(out, "grpo")[-1][0]
        before = len([r for r in stub.received if r.body.get("model") == "rival"])
        log = _run(recipe, tmp_path / "resumed.log", "--resume-from", "latest")
        asked = len([r for r in stub.received if r.body.get("model") == "rival"]) - before
    assert f"resume: grpo from step {from_step}" in log

    generations = _check_one_set_of_outputs(out, steps=steps, rows=6)
    # Groups whole in the log (rows in rank order), the middle one straddling the ranks, replaced whole or not at all.
    for i in range(0, len(generations), 2):
        a, b = generations[i], generations[i + 1]
        assert (a["step"], a["task_id"], a["source"], a["prompt"]) == (
            b["step"],
            b["task_id"],
            b["source"],
            b["prompt"],
        )
    sources = Counter(r["source"] for r in generations)
    assert sources["hint"] and sources["replay"], sources
    # One round per step: one opponent record, asking each task of the batch (hinted retries aside) once.
    opponent = read_jsonl(out / "selfplay.jsonl")
    assert [r["step"] for r in opponent] == list(range(1, steps + 1))
    for record in opponent:
        asked_tasks = {r["task_id"] for r in generations if r["step"] == record["step"] and not r["hinted"]}
        assert record["tasks"] == len(asked_tasks)
    assert asked == sum(r["tasks"] for r in opponent if r["step"] > from_step)  # no rank asked twice
    board = json.loads((out / "scoreboard.json").read_text())
    assert [h["step"] for h in board["history"]] == list(range(1, steps + 1))
    assert sum(board["problems"].values()) == len({(r["step"], r["task_id"]) for r in generations if not r["hinted"]})
    grpo = [r for r in read_jsonl(out / "metrics.jsonl") if r["phase"] == "grpo"]
    assert all(r["selfplay/requests"] > 0 and "selfplay/frontier_tasks" in r for r in grpo)
    for path in out.rglob("*"):
        assert not path.is_file() or KEY.encode() not in path.read_bytes(), path


@pytest.mark.slow(minutes=1)
def test_two_process_dynamic_sampling_and_curriculum_compose_on_the_main_process_and_resume_exactly(
    tiny_model_dir, tmp_path
):
    """Dynamic sampling with the curriculum on two ranks: one group sampler on the main process composes each round
    over both ranks' rows (the first round's six groups, three per rank, are six different tasks), the counts in
    sampling_state.json are both ranks' (two groups a rank a step trained), the curriculum counts every graded
    completion of every rank and round, each rank saves its own waiting groups, and a run resumed from checkpoint-1
    ends at checkpoint-2 with the state of the run that was not interrupted."""
    import shutil

    import torch

    sections = {
        "data": {"max_tasks": 8},
        "grpo": {"max_steps": 2, "save_steps": 1},  # per rank: two groups of two a step
        "logging": {"pass_rate_tasks": 0},
        "sampling": {"dynamic": True, "oversample": 1.5, "max_attempts": 2, "carry_over": 1},
        "curriculum": {"enabled": True},
    }
    out = tmp_path / "run"
    _run(_recipe(tmp_path, tiny_model_dir, out, **sections), tmp_path / "run.log")
    records = read_jsonl(out / "metrics.jsonl")
    grpo = [r for r in records if r["phase"] == "grpo"]
    assert [r["step"] for r in grpo] == [1, 2]
    assert all("sampling/kept_share" in r and "sampling/carried_over" in r for r in grpo)
    digests = json.loads((out / "state.json").read_text())["phases"]["grpo"]["weights_sha256"]
    assert len(digests) == 2 and digests[0] == digests[1]

    generations = read_generations(out)
    first_round = [r["task_id"] for r in generations if r["step"] == 1][: 2 * 3 * 2]  # 2 ranks x 3 groups x 2
    assert len(set(first_round[::2])) == 6, first_round  # one draw over both ranks: no task twice
    checkpoint = {s: out / "checkpoints" / f"checkpoint-{s}" for s in (1, 2)}
    saved = {s: json.loads((folder / "sampling_state.json").read_text()) for s, folder in checkpoint.items()}
    assert saved[1]["totals"]["trained"] == 4 and saved[2]["totals"]["trained"] == 8  # both ranks' groups
    graded = sum(r["status"] != "error" for r in generations if r["step"] == 1)
    assert sum(t["attempts"] for t in saved[1]["groups"]["curriculum"].values()) == graded
    for s, folder in checkpoint.items():
        assert not (folder / "sampling_carry.pt").exists()  # one file per rank
        waiting = [torch.load(p, weights_only=True) for p in sorted(folder.glob("sampling_carry_*.pt"))]
        assert sum(map(len, waiting)) == saved[s]["waiting"] > 0

    again = tmp_path / "again"
    shutil.copytree(out, again)
    recipe = _recipe(tmp_path, tiny_model_dir, again, **sections)
    log = _run(recipe, tmp_path / "resumed.log", "--resume-from", str(again / "checkpoints" / "checkpoint-1"))
    assert "resume: grpo from step 1" in log
    resumed = again / "checkpoints" / "checkpoint-2"
    assert json.loads((resumed / "sampling_state.json").read_text()) == saved[2]
    names = sorted(p.name for p in checkpoint[2].glob("sampling_carry_*.pt"))  # a rank with none waiting has none
    assert sorted(p.name for p in resumed.glob("sampling_carry_*.pt")) == names
    for name in names:
        before = torch.load(checkpoint[2] / name, weights_only=True)
        after = torch.load(resumed / name, weights_only=True)
        assert [g["task_id"] for g in after] == [g["task_id"] for g in before]
        for b, a in zip(before, after, strict=True):
            assert all(torch.equal(b["tensors"][k], a["tensors"][k]) for k in b["tensors"])
