"""`azr train` in adapter mode with a real vLLM server on the CPU: a short run that generates every GRPO batch through
the server, and a run SIGKILLed mid-GRPO whose server must not outlive it.

Each test starts one server (~40 s idle) beside the tiny model; the settings are the smallest that still hot-load
a new adapter version at every step. The random tiny model never passes a test, so a plugin reward (the share of
vowels) gives every group a spread and the adapter really changes at every step: a stale version on the server
would show in TRL's importance-sampling ratio."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from subprocess import PIPE

import pytest
import yaml
from conftest import VLLM_CPU_ARGS, VLLM_CPU_ENV, require_vllm_python
from recipes import tiny_recipe, write_recipe

from azr.serving import group_members

PLUGIN = """
def vowels(completions, **columns):
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [sum(ch in "aeiou" for ch in t) / max(1, len(t)) for t in texts]
"""


def recipe(path: Path, model_dir: Path, out: Path, python: str, max_steps: int, **sections) -> Path:
    (path.parent / "vowel_plugin.py").write_text(PLUGIN)
    own = dict(
        model={"adapter": {"r": 8, "alpha": 16, "dropout": 0.0}},
        data={"max_solution_tokens": 100, "eval": None},
        grpo={
            "num_generations": 4,
            "per_device_train_batch_size": 8,  # two prompts, four completions each
            "max_completion_length": 24,
            "temperature": 0.7,  # TRL's ratio compares the server's processed (temperature-scaled) logprobs
            "learning_rate": 2.0e-2,  # large: each step's adapter differs plainly from the last
            "max_steps": max_steps,
            "save_steps": 100,
        },
        rewards=[{"name": "vowel_plugin:vowels", "weight": 1.0}],
        sandbox={"workers": 1},
        vllm={
            "mode": "adapter",
            "python": python,
            "max_model_len": 1024,
            "extra_args": VLLM_CPU_ARGS,
            "env": VLLM_CPU_ENV,
            "startup_timeout_s": 540,
        },
    )
    return write_recipe(path, tiny_recipe(model_dir, out, **(own | sections)))


def train(recipe: Path, *flags: str, **popen) -> subprocess.Popen:
    """`azr-train --config recipe [flags]` in a session of its own, with the recipe's folder importable (the
    plugin)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(recipe.parent), os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, "-c", "from azr.cli import train_main; train_main()", "--config", str(recipe), *flags]
    return subprocess.Popen(argv, env=env, start_new_session=True, **popen)


def run_to_end(path: Path) -> None:
    """`azr train --config path` to its end; it must exit 0."""
    proc = train(path, stdout=PIPE, stderr=PIPE, text=True)
    _, stderr = proc.communicate(timeout=1500)
    assert proc.returncode == 0, stderr[-4000:]


# Two turns an episode, one failing public test shown in 80 characters: the feedback runs' recipe sections.
FEEDBACK_EPISODES = {"rollouts": {"env": "feedback"}, "feedback": {"max_turns": 2, "max_failures": 1, "max_chars": 80}}


def server_pid(out: Path) -> int | None:
    try:
        return json.loads((out / "vllm" / "server.json").read_text())["pid"]
    except (OSError, ValueError):
        return None  # not written yet (or being written)


def gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while group_members(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not group_members(pid)


def wait_until(trainer: subprocess.Popen, log: Path, ready, within_s: float) -> None:
    """Poll `ready()` until it holds while `trainer` runs; fail with the run's log if it ends or `within_s` pass."""
    deadline = time.monotonic() + within_s
    while not ready():
        assert trainer.poll() is None, f"the run ended (exit {trainer.returncode}):\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.2)


@pytest.fixture(scope="module")
def adapter_run(tiny_model_dir, tmp_path_factory):
    python = require_vllm_python()
    root = tmp_path_factory.mktemp("adapter-run")
    out = root / "run"
    proc = train(recipe(root / "r.yaml", tiny_model_dir, out, python, max_steps=3), stdout=PIPE, stderr=PIPE, text=True)
    stdout, stderr = proc.communicate(timeout=1500)
    return out, subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


@pytest.mark.slow(minutes=1.1)  # trains the tiny model with a vLLM server
def test_a_short_adapter_mode_run_exits_0_with_an_importance_ratio_near_1(adapter_run):
    out, done = adapter_run
    assert done.returncode == 0, done.stderr[-4000:]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    grpo = [r for r in records if r["phase"] == "grpo"]
    assert [r["step"] for r in grpo] == [1, 2, 3]
    for r in grpo:
        # pi_trainer / pi_vLLM over each completion: both float32, the same adapter version
        assert abs(r["sampling/importance_sampling_ratio/mean"] - 1) < 0.01, r
        assert r["sampling/sampling_logp_difference/max"] < 0.01, r
        assert r["completion_length"] > 0 and r["reward_std"] > 0  # a spread in every batch: the adapter learns
    log = (out / "vllm" / "server.log").read_text()
    assert log.count("Loaded new LoRA adapter") == 3  # one version per step: steps 0, 1 and 2's weights
    assert log.count("Removed LoRA adapter") == 2


@pytest.mark.slow  # trains the tiny model with a vLLM server
def test_old_adapter_versions_are_pruned_and_no_server_process_is_left(adapter_run):
    out, done = adapter_run
    assert done.returncode == 0, done.stderr[-4000:]
    assert [p.name for p in (out / "vllm" / "adapters").iterdir()] == ["step-2-v3"]
    pid = server_pid(out)
    assert pid and not group_members(pid)
    assert "vLLM server pid" in done.stderr and "stopped" in done.stderr


@pytest.mark.slow(minutes=0.9)  # trains the tiny model with a vLLM server
def test_a_sigkilled_trainer_leaves_no_server_behind(tiny_model_dir, tmp_path):
    """SIGKILL the trainer's whole process group mid-GRPO (its first adapter version served): the server, in a
    session of its own, gets SIGTERM from the kernel (parent-death signal) and takes its engine with it."""
    python = require_vllm_python()
    out = tmp_path / "run"
    path = recipe(tmp_path / "r.yaml", tiny_model_dir, out, python, max_steps=100)
    log = tmp_path / "train.log"
    with open(log, "w") as fh:
        trainer = train(path, stdout=fh, stderr=subprocess.STDOUT)
    pid = None
    try:
        adapters = out / "vllm" / "adapters"
        wait_until(trainer, log, lambda: adapters.is_dir() and any(adapters.iterdir()), within_s=900)
        pid = server_pid(out)
        assert pid and group_members(pid), "the server should be running mid-GRPO"
        assert len(group_members(pid)) >= 3  # API server, engine core, worker
        os.killpg(trainer.pid, signal.SIGKILL)
        trainer.wait()
        assert gone(pid, within_s=60), f"left behind: {group_members(pid)}"
    finally:
        if trainer.poll() is None:
            os.killpg(trainer.pid, signal.SIGKILL)
            trainer.wait()
        if pid is not None and group_members(pid):
            os.killpg(pid, signal.SIGKILL)  # leave nothing behind when the test fails


def grpo_records(out: Path) -> list[dict]:
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [r for r in records if r["phase"] == "grpo" and "loss" in r]


def generation_records(out: Path) -> list[dict]:
    files = sorted((out / "generations").glob("*.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


@pytest.mark.slow(minutes=3.1)  # trains the tiny model with a vLLM server, is killed, and resumes
def test_asynchronous_grpo_stays_within_its_bound_and_a_sigkilled_run_resumes_without_stale_samples(
    tiny_model_dir, tmp_path
):
    """sampling.max_staleness 1 in adapter mode: every GRPO record says how stale its samples were (never more
    than 1) and how TRL's correction weighed them; SIGKILLed after its first checkpoint, the run leaves no server
    behind, and resumed it trains only samples drawn after the checkpoint (what was in flight is gone)."""
    python = require_vllm_python()
    out = tmp_path / "run"
    sections = {"sampling": {"max_staleness": 1}}
    path = recipe(tmp_path / "r.yaml", tiny_model_dir, out, python, max_steps=6, **sections)
    body = yaml.safe_load(path.read_text())
    body["grpo"]["save_steps"] = 2
    path.write_text(yaml.safe_dump(body))
    log = tmp_path / "train.log"
    with open(log, "w") as fh:
        trainer = train(path, stdout=fh, stderr=subprocess.STDOUT)
    pid = None
    try:
        checkpoint = out / "checkpoints" / "checkpoint-2"
        wait_until(trainer, log, lambda: checkpoint.is_dir() and len(grpo_records(out)) >= 3, within_s=1200)
        pid = server_pid(out)
        os.killpg(trainer.pid, signal.SIGKILL)
        trainer.wait()
        assert pid and gone(pid, within_s=60), f"left behind: {group_members(pid)}"
    finally:
        if trainer.poll() is None:
            os.killpg(trainer.pid, signal.SIGKILL)
            trainer.wait()
    saved = max(int(p.name.split("-")[1]) for p in (out / "checkpoints").glob("checkpoint-*"))
    assert saved < 6, f"killed too late to test a resume: checkpoint-{saved}"
    resumed = train(path, "--resume-from", "latest", stdout=PIPE, stderr=PIPE, text=True)
    _, stderr = resumed.communicate(timeout=1500)
    assert resumed.returncode == 0, stderr[-4000:]
    records = {r["step"]: r for r in grpo_records(out)}  # pruned back to the checkpoint, then the resumed steps
    summary = {s: (r["async/staleness_mean"], r["sampling/importance_sampling_ratio/mean"]) for s, r in records.items()}
    assert sorted(records) == list(range(1, 7)), summary
    for r in records.values():
        assert r["async/staleness_0"] + r["async/staleness_1"] == pytest.approx(1.0), r
        assert r["async/dropped_samples"] == 0 and "async/importance_outside_band_share" in r
        # TRL's default correction masks (to 0) whole sequences whose ratio leaves the band
        assert 0 <= r["sampling/importance_sampling_ratio/min"] <= r["sampling/importance_sampling_ratio/max"]
    # The resumed run refills the pipeline from the checkpoint's weights: its first batch is fresh.
    assert records[saved + 1]["async/staleness_0"] == 1.0, summary
    assert any(r["async/staleness_1"] > 0 for r in records.values()), summary  # it sampled ahead
    generations = generation_records(out)
    assert all(0 <= g["step"] - 1 - g["policy_version"] <= 1 for g in generations)
    # Nothing drawn before the checkpoint's weights trains after it: what was in flight died with the run.
    assert all(g["policy_version"] >= saved for g in generations if g["step"] > saved)
    assert "policy-v" in (out / "vllm" / "server.log").read_text()  # one LoRA name per version
    assert not group_members(server_pid(out))


@pytest.mark.slow(minutes=3)  # trains the tiny model with a vLLM server, which is killed and started again
def test_a_server_sigkilled_mid_asynchronous_run_is_restarted_and_every_step_is_trained_once(tiny_model_dir, tmp_path):
    """SIGKILL the vLLM server (its whole group, as the OOM killer might take it) mid-run, asynchronous GRPO sampling
    ahead: the run restarts it with the versions it served, goes on, and ends with exit 0, every step logged once
    and every sample trained once; `server.json` names the new server, which is gone after the run too."""
    python = require_vllm_python()
    out = tmp_path / "run"
    path = recipe(tmp_path / "r.yaml", tiny_model_dir, out, python, max_steps=5, sampling={"max_staleness": 1})
    log = tmp_path / "train.log"
    with open(log, "w") as fh:
        trainer = train(path, stdout=fh, stderr=subprocess.STDOUT)
    first = None
    try:
        metrics = out / "metrics.jsonl"
        wait_until(trainer, log, lambda: metrics.is_file() and len(grpo_records(out)) >= 2, within_s=900)
        first = server_pid(out)
        os.killpg(first, signal.SIGKILL)
        assert trainer.wait(timeout=900) == 0, log.read_text()[-4000:]
    finally:
        if trainer.poll() is None:
            os.killpg(trainer.pid, signal.SIGKILL)
            trainer.wait()
    text = log.read_text()
    assert re.search(r"vLLM server \(pid \d+\) died during the run \(exit code -?9\); restarting it \(1 of 3\)", text)
    assert [r["step"] for r in grpo_records(out)] == [1, 2, 3, 4, 5]
    served = json.loads((out / "vllm" / "server.json").read_text())
    assert served["restarts"] == 1 and served["pid"] != first
    generations = generation_records(out)
    assert sorted(Counter(g["step"] for g in generations).values()) == [8] * 5  # one batch of 2 x 4 per step
    assert not group_members(first) and not group_members(served["pid"])


@pytest.mark.slow(minutes=1.5)  # trains the tiny model with a vLLM server
def test_asynchronous_grpo_with_dynamic_sampling_the_curriculum_self_play_and_heldout_evaluation(
    tiny_model_dir, tmp_path, monkeypatch
):
    """The combinations sampling.max_staleness allows, in one run: dynamic sampling draws each round's groups from
    the pipeline (sampled ahead, within the bound), the curriculum composes what is queued and counts what is
    graded, the self-play arena asks its opponent (a stub endpoint) for each trained batch's tasks, and the held-out
    evaluation samples the newest version through the same server."""
    from http_stub import StubServer

    python = require_vllm_python()
    out = tmp_path / "run"
    monkeypatch.setenv("AZR_FAKE_KEY", "sk-fake-opponent")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with StubServer() as opponent:
        sections = {
            "sampling": {"max_staleness": 1, "dynamic": True, "oversample": 1.5, "max_attempts": 2},
            "curriculum": {"enabled": True},
            "eval": {"every_steps": 2, "max_tasks": 2, "samples": 2},
            "self_play": {
                "enabled": True,
                "base_url": opponent.url,
                "model": "opponent",
                "api_key_env": "AZR_FAKE_KEY",
                "max_tokens": 16,
            },
            "rewards": [{"name": "vowel_plugin:vowels", "weight": 1.0}, {"name": "tests", "weight": 0.1}],
        }
        path = recipe(tmp_path / "r.yaml", tiny_model_dir, out, python, max_steps=4, **sections)
        body = yaml.safe_load(path.read_text())
        body["data"]["eval"], body["grpo"]["save_steps"] = "held-out", 4
        path.write_text(yaml.safe_dump(body))
        proc = train(path, stdout=PIPE, stderr=PIPE, text=True)
        _, stderr = proc.communicate(timeout=1500)
        asked = len(opponent.received)
    assert proc.returncode == 0, stderr[-4000:]
    records = grpo_records(out)
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    for r in records:
        assert r["async/staleness_0"] + r["async/staleness_1"] == pytest.approx(1.0), r
        assert r["async/dropped_samples"] == 0 and r["sampling/rounds"] >= 1, r
        assert r["sampling/zero_variance_share"] <= 0.5, r  # the vowel reward nearly always differs
    assert any(r["async/staleness_1"] > 0 for r in records)  # it sampled ahead
    generations = generation_records(out)
    assert all(0 <= g["step"] - 1 - g["policy_version"] <= 1 for g in generations)
    evals = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [e["step"] for e in evals if e.get("kind") == "eval"] == [0, 2, 4]  # a baseline, then every 2 steps
    assert asked > 0 and records[-1]["selfplay/requests"] > 0  # the opponent was asked for the trained tasks
    state = json.loads((out / "checkpoints" / "checkpoint-4" / "sampling_state.json").read_text())
    stats = state["groups"]["curriculum"]
    assert sum(s["attempts"] for s in stats.values()) > 0 and sum(s["groups"] for s in stats.values()) >= 8


@pytest.mark.slow(minutes=1.1)  # two training processes and a vLLM server on two cores
def test_asynchronous_grpo_on_two_processes_samples_on_the_main_one_for_both(tiny_model_dir, tmp_path):
    """torchrun with two ranks (gloo, CPU): the main process queues both ranks' rows, its producer samples them
    through the one server, and each rank trains its slice; every row of every step is logged once, within the
    bound, and the ranks' weights stay equal."""
    python = require_vllm_python()
    out = tmp_path / "run"
    path = recipe(tmp_path / "r.yaml", tiny_model_dir, out, python, max_steps=3, sampling={"max_staleness": 1})
    body = yaml.safe_load(path.read_text())
    body["grpo"] |= {"num_generations": 2, "per_device_train_batch_size": 4, "max_completion_length": 16}
    body["sandbox"]["workers"] = 2  # one per rank
    path.write_text(yaml.safe_dump(body))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    env |= {"NO_PROXY": "127.0.0.1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    argv += ["-m", "azr.cli", "train", "--config", str(path)]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1500, start_new_session=True)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    records = grpo_records(out)
    assert [r["step"] for r in records] == [1, 2, 3]
    for r in records:
        assert r["async/staleness_0"] + r["async/staleness_1"] == pytest.approx(1.0), r
        assert r["async/dropped_samples"] == 0, r
    # The first batch is fresh: on both ranks (TRL gathers the ratios) the trainer's log-probs of each completion
    # equal the server's, so each rank trained the completions drawn for its own rows. Later batches are a version
    # old, and at this recipe's learning rate their ratios move off 1.
    first = records[0]
    assert first["async/staleness_0"] == 1.0
    for key in ("min", "mean", "max"):
        assert first[f"sampling/importance_sampling_ratio/{key}"] == pytest.approx(1.0, abs=1e-3), first
    assert all(r["async/staleness_1"] == 1.0 for r in records[1:])
    generations = generation_records(out)
    assert sorted(Counter(g["step"] for g in generations).items()) == [(1, 8), (2, 8), (3, 8)]  # both ranks' rows
    assert all(0 <= g["step"] - 1 - g["policy_version"] <= 1 for g in generations)
    digests = json.loads((out / "state.json").read_text())["phases"]["grpo"]["weights_sha256"]
    assert len(digests) == 2 and digests[0] == digests[1]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ([f"vllm.python={sys.executable}"], r"vllm\.mode=adapter: no vLLM in .* \(vllm\.python\); install vLLM"),
        (["vllm.mode=server", "vllm.gpus=[1]"], r"vllm\.mode=server: TRL's vLLM modes need CUDA GPUs"),
        (["vllm.mode=colocate", "vllm.python=null"], r"vllm\.mode=colocate: TRL's vLLM modes need CUDA GPUs"),
    ],
)
def test_a_mode_this_machine_cannot_run_is_refused_before_anything_is_written(
    cli, tiny_model_dir, tmp_path, overrides, message
):
    import re

    out = tmp_path / "out"
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"model": {"name_or_path": str(tiny_model_dir)}, "vllm": {"mode": "adapter"}}))
    code, _, err = cli("train", "--config", path, "--output-dir", out, *[a for o in overrides for a in ("--set", o)])
    assert code == 1 and re.search(message, err) and err.count("\n") == 1, err
    assert not out.exists()


@pytest.mark.slow(minutes=1.5)  # trains the tiny model with a vLLM server, two turns an episode
def test_feedback_episodes_in_adapter_mode_keep_the_servers_logprobs_for_the_policys_tokens(tiny_model_dir, tmp_path):
    """`rollouts.env: feedback` with every turn sampled by the vLLM server: each episode's second turn continues from
    the first turn's ids and the feedback's, and TRL's importance ratio (over the policy's tokens only; the feedback's
    are masked) stays at 1, so the server's log-probabilities of both turns reached TRL where they belong."""
    python = require_vllm_python()
    out = tmp_path / "run"
    path = recipe(
        tmp_path / "r.yaml",
        tiny_model_dir,
        out,
        python,
        max_steps=2,
        **FEEDBACK_EPISODES,
    )
    run_to_end(path)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    grpo = [r for r in records if r["phase"] == "grpo" and "loss" in r]
    assert [r["step"] for r in grpo] == [1, 2]
    for r in grpo:
        assert r["feedback/turns"] == 2.0 and r["feedback/feedback_tokens"] > 0  # a random policy fails its test
        assert abs(r["sampling/importance_sampling_ratio/mean"] - 1) < 0.01, r
        assert r["sampling/sampling_logp_difference/max"] < 0.01, r


def run_tool_calls(model_dir: Path, tmp_path: Path, out: Path, max_steps: int, **sections) -> None:
    """Train `max_steps` GRPO steps with `tools.enabled` (python_run), the vLLM server made to write one call a turn
    (a structured-outputs regex: `print(6 * 7)`), at most one call an episode; the run must exit 0."""
    python = require_vllm_python()
    call = '<tool_call>\n{"name": "python_run", "arguments": {"code": "print(6 * 7)"}}\n</tool_call>'
    tools = {"enabled": True, "names": ["python_run"]}
    path = recipe(tmp_path / "r.yaml", model_dir, out, python, max_steps=max_steps, tools=tools, **sections)
    recipe_data = yaml.safe_load(path.read_text())
    recipe_data["grpo"] |= {
        "max_completion_length": 200,  # the regex lets the server spell a call in ~60 short tokens
        "max_tool_calling_iterations": 1,
        "vllm_structured_outputs_regex": re.escape(call),
    }
    path.write_text(yaml.safe_dump(recipe_data))
    run_to_end(path)


def assert_call_then_result(generations: list[dict]) -> None:
    """Each episode's turns: a python_run call, its result (42) shown, and the last allowed turn's call not run."""
    for record in generations:
        shown = record["messages"]
        assert [m["role"] for m in shown] == ["assistant", "tool", "assistant"] and shown[1]["content"] == "42"
        assert all(m["tool_calls"][0]["function"]["name"] == "python_run" for m in shown[::2])


@pytest.mark.slow(minutes=2.5)  # trains the tiny model with a vLLM server, two turns an episode
@pytest.mark.timeout(900)  # 229 s in a clean-clone CI run: twice that stays inside the limit
def test_tool_episodes_in_adapter_mode_run_each_call_the_server_writes(tiny_model_dir, tmp_path):
    """`tools.enabled` with every turn sampled by the vLLM server: the server is made to write one python_run call a
    turn (a structured-outputs regex), the tool environment runs it and shows the result, and the episode's second
    turn continues from there; the generation log shows call and result. (The regex masks the server's
    distribution, so its log-probabilities are not the policy's here and TRL's importance ratio says nothing: the
    feedback test above checks where a multi-turn episode's log-probabilities land.)"""
    out = tmp_path / "run"
    run_tool_calls(tiny_model_dir, tmp_path, out, max_steps=2)
    grpo = grpo_records(out)
    assert [r["step"] for r in grpo] == [1, 2]
    for r in grpo:
        assert r["tools/call_frequency"] == 2.0 and r["tools/failure_frequency"] == 0.0, r  # a call each turn
    generations = generation_records(out)
    assert len(generations) == 16
    assert_call_then_result(generations)


@pytest.mark.slow(minutes=3)  # three GRPO steps with a vLLM server, two turns an episode, played ahead
def test_asynchronous_grpo_plays_feedback_episodes_ahead_within_the_bound(tiny_model_dir, tmp_path):
    """`rollouts.env: feedback` with `sampling.max_staleness: 1`: the pipeline plays each batch's episodes ahead
    (both turns from the server, the public tests in the sandbox between them) while the trainer trains. Every
    record keeps the bound and writes the feedback metrics; the first batch (fresh) has TRL's importance ratio at 1
    over the policy's tokens, which holds only if the feedback's tokens are masked out (the sampler gives them no
    log-probability) and both turns' server log-probabilities sit where their tokens are."""
    python = require_vllm_python()
    out = tmp_path / "run"
    path = recipe(
        tmp_path / "r.yaml",
        tiny_model_dir,
        out,
        python,
        max_steps=3,
        **FEEDBACK_EPISODES,
        sampling={"max_staleness": 1},
        # the hidden tests' verdicts (the `tests` reward's) give the pass rate by turn; the vowels give a spread
        rewards=[{"name": "vowel_plugin:vowels", "weight": 1.0}, {"name": "tests", "weight": 0.1}],
    )
    run_to_end(path)
    records = grpo_records(out)
    assert [r["step"] for r in records] == [1, 2, 3]
    for r in records:
        assert r["async/staleness_0"] + r["async/staleness_1"] == pytest.approx(1.0), r
        assert r["async/dropped_samples"] == 0, r
        assert r["feedback/turns"] == 2.0 and r["feedback/feedback_tokens"] > 0, r  # a random policy fails its test
        assert {"feedback/pass_turn1", "feedback/pass_turn2", "alarms/public_overfit"} <= r.keys(), r
    assert any(r["async/staleness_1"] > 0 for r in records)  # it played ahead
    first = records[0]
    assert first["async/staleness_0"] == 1.0
    assert abs(first["sampling/importance_sampling_ratio/mean"] - 1) < 0.01, first
    assert first["sampling/sampling_logp_difference/max"] < 0.01, first
    generations = generation_records(out)
    assert sorted(Counter(g["step"] for g in generations).items()) == [(1, 8), (2, 8), (3, 8)]
    assert all(0 <= g["step"] - 1 - g["policy_version"] <= 1 for g in generations)
    assert all(len(g["turns"]) == 2 and g["turns"][0]["feedback"] for g in generations)  # shown, then answered


@pytest.mark.slow(minutes=3)  # three GRPO steps with a vLLM server, two turns an episode with a tool call, ahead
def test_asynchronous_grpo_plays_tool_episodes_ahead_within_the_bound(tiny_model_dir, tmp_path):
    """`tools.enabled` with `sampling.max_staleness: 1`: the pipeline's producer plays each batch's tool episodes
    ahead (the server writes one python_run call a turn, the sandbox runs it in the producer, the second turn
    continues from its result) while the trainer trains. Every record keeps the bound and counts a call each turn;
    the generation log shows each call and the first one's result."""
    out = tmp_path / "run"
    run_tool_calls(tiny_model_dir, tmp_path, out, max_steps=3, sampling={"max_staleness": 1})
    records = grpo_records(out)
    assert [r["step"] for r in records] == [1, 2, 3]
    for r in records:
        assert r["async/staleness_0"] + r["async/staleness_1"] == pytest.approx(1.0), r
        assert r["async/dropped_samples"] == 0, r
        assert r["tools/call_frequency"] == 2.0 and r["tools/failure_frequency"] == 0.0, r  # a call each turn
    assert any(r["async/staleness_1"] > 0 for r in records)  # it played ahead
    generations = generation_records(out)
    assert sorted(Counter(g["step"] for g in generations).items()) == [(1, 8), (2, 8), (3, 8)]
    assert all(0 <= g["step"] - 1 - g["policy_version"] <= 1 for g in generations)
    assert_call_then_result(generations)
