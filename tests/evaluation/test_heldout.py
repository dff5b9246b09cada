"""Held-out evaluation during GRPO (`eval:`): tasks split over ranks and gathered on the main one, steps skipped on
resume, what each record holds, the sampler over TRL's vLLM backend, and, on a real GRPO run of the tiny model, the
same completions and numbers as `azr eval` on the run's final adapter.

Real parts: the bwrap sandbox and the run's reward functions grade; the tiny model and TRL train in the slow tests.
The samplers in the fast tests are scripted (a reference answer or noise), the expensive edge.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from recipes import tiny_recipe, write_recipe
from scripted_draws import RecordingChat, RecordingTokens, ScriptedEndpoint, endpoint_draws

from azr.config import load_config
from azr.data import load_tasks
from azr.evaluation import build_heldout, logged_steps
from azr.evaluation.heldout import HeldOutEvaluator
from azr.evaluation.measure import Sampling
from azr.evaluation.samplers import Draws
from azr.logs import JsonlWriter
from azr.prompts import reference_answer
from azr.rewards import build_rubric
from azr.rollouts import BackendSampler, ChatTokens
from azr.training.trl.private import TrainerBatches

HELD_OUT = load_tasks("held-out")


class FakeRanks:
    """`rank` of `world` processes in one: `gather` keeps each rank's part in `parts` (shared by the ranks), so
    running the ranks from the last to the main one gives the main one every part, as a real gather would."""

    def __init__(self, rank: int, world: int, parts: dict[int, Any]):
        self.rank, self.world, self.parts = rank, world, parts

    @property
    def main(self) -> bool:
        return self.rank == 0

    def split(self, items: list) -> tuple[list, int]:
        from azr.training.ranks import Ranks

        return Ranks(self.rank, self.world).split(items)

    def gather(self, obj: Any) -> list:
        self.parts[self.rank] = obj
        return [self.parts[r] for r in range(self.world)] if self.main else [obj]

    def broadcast(self, obj: Any) -> Any:
        return obj


class Scripted(ScriptedEndpoint):
    """The reference answer for the first sample of every other problem, noise otherwise; records what it saw."""

    def answer(self, task, index, messages):
        return reference_answer(task.solution, task.entry_point) if _solved(task.id, index) else "no code here"


def scripted(evaluator: HeldOutEvaluator, kind: type[ScriptedEndpoint] = Scripted) -> Draws:
    """`evaluator`'s draws from a `kind` endpoint (`Scripted`'s answers by default), three items a call."""
    return endpoint_draws(kind(HELD_OUT, evaluator.sampling), evaluator.sampling, chunk=3)


def _solved(task_id: str, index: int) -> bool:
    return index == 0 and [t.id for t in HELD_OUT].index(task_id) % 2 == 0


@pytest.fixture(scope="module")
def cfg():
    return load_config(
        None, ["model.name_or_path=tiny", "eval.every_steps=2", "eval.max_tasks=5", "eval.samples=2", "eval.k=[1,2]"]
    )


@pytest.fixture(scope="module")
def rewards(cfg):
    return build_rubric(cfg.rewards, cfg.sandbox)


def _evaluator(cfg, rewards, ranks, metrics=None, folder=None) -> HeldOutEvaluator:
    sampling = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": None, "repetition_penalty": 1.0}
    evaluator = build_heldout(
        cfg, sampling=sampling, max_completion_length=64, ranks=ranks, metrics=metrics, rubric=rewards, folder=folder
    )
    assert evaluator is not None
    return evaluator


def test_off_by_default_and_the_sampling_is_grpos_unless_the_section_says(cfg, rewards):
    assert build_heldout(load_config(None, ["model.name_or_path=tiny"]), sampling={}, max_completion_length=8,
                         ranks=FakeRanks(0, 1, {}), metrics=None, rubric=rewards) is None  # fmt: skip
    evaluator = _evaluator(cfg, rewards, FakeRanks(0, 1, {}))
    assert evaluator.sampling.n == 2 and evaluator.sampling.temperature == 1.0
    assert evaluator.sampling.max_new_tokens == 64 and evaluator.sampling.seed == cfg.seed
    assert len(evaluator.problems) == 5 and evaluator.ks == [1, 2]
    chosen = load_config(
        None, ["model.name_or_path=tiny", "eval.every_steps=1", "eval.temperature=0", "eval.max_new_tokens=9"]
    )
    evaluator = _evaluator(chosen, rewards, FakeRanks(0, 1, {}))
    assert evaluator.sampling.temperature == 0 and evaluator.sampling.max_new_tokens == 9
    assert len(evaluator.problems) == 64  # of 93: a seeded draw, the same every time
    assert [p.id for p in evaluator.problems] == [
        p.id for p in _evaluator(chosen, rewards, FakeRanks(0, 1, {})).problems
    ]


def test_a_record_holds_pass_at_k_with_an_interval_reward_tags_counts_and_cost(cfg, rewards, tmp_path):
    with JsonlWriter(tmp_path / "metrics.jsonl") as metrics:
        evaluator = _evaluator(cfg, rewards, FakeRanks(0, 1, {}), metrics, tmp_path / "heldout")
        evaluator.begin()
        record = evaluator.evaluate(scripted(evaluator), step=4)
    assert record == json.loads((tmp_path / "metrics.jsonl").read_text())  # one line, this record
    assert record["phase"] == "grpo" and record["kind"] == "eval" and record["step"] == 4
    solved = sum(_solved(p.id, 0) for p in evaluator.problems)
    assert 0 < solved < 5
    one, two = record["pass_at_k"]["1"], record["pass_at_k"]["2"]
    assert one["value"] == pytest.approx(solved / 5 / 2) and two["value"] == pytest.approx(solved / 5)
    for entry in (one, two):
        assert 0 <= entry["low"] <= entry["value"] <= entry["high"] <= 1 and entry["problems"] == 5
    assert one["low"] < one["high"]  # problems differ: the interval has width
    # tests 1.0 + format 0.1 for each reference answer; the noise earns nothing
    assert record["mean_reward"] == pytest.approx(solved * 1.1 / 10, abs=1e-4)
    assert record["counts"]["samples"] == 10 and record["counts"]["passed"] == solved
    tags = {t for p in evaluator.problems for t in p.task.tags}
    assert set(record["by_tag"]) == tags and all(
        set(v) == {"problems", "pass@1", "pass@2"} for v in record["by_tag"].values()
    )
    assert (
        record["wall_s"] > 0
        and 0 < record["eval_share"] <= 1
        and record["eval_wall_s"] == pytest.approx(record["wall_s"], abs=1e-3)
    )
    samples = [json.loads(line) for line in (tmp_path / "heldout" / "step-4.jsonl").read_text().splitlines()]
    assert len(samples) == 10 and sum(s["passed"] for s in samples) == solved
    keys = evaluator.logger_keys(record)
    assert keys["eval/pass@1"] == one["value"] and keys["eval/pass@2_high"] == two["high"]
    assert "eval/mean_reward" in keys and "eval/share" in keys and all(k.startswith("eval/") for k in keys)


def test_a_record_says_which_policy_version_it_sampled(cfg, rewards):
    evaluator = _evaluator(cfg, rewards, FakeRanks(0, 1, {}))
    assert evaluator.evaluate(scripted(evaluator), step=2)["policy_version"] is None  # an endpoint does not say
    chat = RecordingChat()
    tagged = Draws(evaluator.sampling, RecordingTokens(chat, version=9, text="no code"), chat)
    assert evaluator.evaluate(tagged, step=4)["policy_version"] == 9  # the token sampler's tag


class Surrogates(ScriptedEndpoint):
    """Answers whose program raises ValueError(chr(0xD800)), with a lone surrogate in the text before the code."""

    def answer(self, task, index, messages):
        code = "def {name}(*args, **kwargs):\n    raise ValueError(chr(0xD800))\n"
        entry = task.entry_point
        return chr(0xDC00) + "\n" + reference_answer(code.format(name=entry), entry)


def test_an_evaluation_whose_answers_and_tags_hold_lone_surrogates_is_written(cfg, rewards, tmp_path):
    """The run must not die at a held-out evaluation: every record is written, as valid UTF-8, surrogates as U+FFFD."""
    with JsonlWriter(tmp_path / "metrics.jsonl") as metrics:
        evaluator = _evaluator(cfg, rewards, FakeRanks(0, 1, {}), metrics, tmp_path / "heldout")
        evaluator.problems[0].task.tags.append("tag" + chr(0xD800))
        evaluator.begin()
        record = evaluator.evaluate(scripted(evaluator, Surrogates), step=2)
    assert record["counts"]["samples"] == 10 and record["counts"]["passed"] == 0
    written = json.loads((tmp_path / "metrics.jsonl").read_bytes().decode("utf-8"))  # strict UTF-8
    assert "tag\ufffd" in written["by_tag"]
    samples = [json.loads(x) for x in (tmp_path / "heldout" / "step-2.jsonl").read_bytes().decode("utf-8").splitlines()]
    assert len(samples) == 10 and all(s["completion"].startswith("\ufffd\n") for s in samples)
    assert any("ValueError: \ufffd" in json.dumps(s, ensure_ascii=False) for s in samples)


@pytest.mark.parametrize("world", [2, 3])
def test_tasks_split_over_ranks_gather_to_the_one_record_a_single_process_writes(cfg, rewards, world):
    single = _evaluator(cfg, rewards, FakeRanks(0, 1, {}))
    alone = single.evaluate(scripted(single), step=2)
    parts: dict[int, Any] = {}
    evaluators = [_evaluator(cfg, rewards, FakeRanks(rank, world, parts)) for rank in range(world)]
    draws = [scripted(e) for e in evaluators]
    samplers = [d.text for d in draws]
    results = {}
    for rank in reversed(range(world)):  # the main process gathers last
        results[rank] = evaluators[rank].evaluate(draws[rank], step=2)
    assert all(results[r] is None for r in range(1, world))  # only the main process writes
    together = results[0]
    for key in ("pass_at_k", "mean_reward", "by_tag", "counts"):
        assert together[key] == alone[key], key
    # each rank sampled its own share (padded to an equal count), and no task twice among the real parts
    assert len({len(s.seen) for s in samplers}) == 1
    seen = [task for s in samplers for task, _ in s.seen]
    assert set(seen) == {p.id for p in _evaluator(cfg, rewards, FakeRanks(0, 1, {})).problems}


def test_steps_already_logged_are_not_evaluated_again(cfg, rewards, tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(
        "".join(json.dumps(r) + "\n" for r in [
            {"phase": "grpo", "step": 2, "loss": 0.1},
            {"phase": "grpo", "kind": "eval", "step": 0},
            {"phase": "grpo", "kind": "eval", "step": 2},
        ])
    )  # fmt: skip
    assert logged_steps(path) == {0, 2} and logged_steps(tmp_path / "none.jsonl") == set()
    with JsonlWriter(path) as metrics:
        evaluator = _evaluator(cfg, rewards, FakeRanks(0, 1, {}), metrics)
        evaluator.begin()
        assert [s for s in range(0, 8) if evaluator.due(s, max_steps=7)] == [4, 6, 7]  # first, every 2nd, last
        evaluator.evaluate(scripted(evaluator), step=4)
        assert not evaluator.due(4, max_steps=7)
    assert logged_steps(path) == {0, 2, 4}


class FakeLoraSync:
    """Adapter mode's backend contract (`azr.serving.LoraSync`): request fields in `sampling`, prompts n times."""

    def __init__(self):
        self.sampling = {"temperature": 0.7, "max_tokens": 128, "top_p": 1.0}
        self.syncs, self.calls = 0, []

    def sync_weights(self):
        self.syncs += 1

    def generate(self, prompts, images, num_generations, profiler=None):
        self.calls.append((prompts, num_generations, dict(self.sampling)))
        return prompts, [[65 + i % 26] for i in range(len(prompts))], None, None


class FakeTokenizer:
    pad_token_id = 0
    eos_token_id = None

    def apply_chat_template(self, messages, tokenize, add_generation_prompt, **kwargs):
        return f"<{messages[-1]['content']}>"

    def __call__(self, text, add_special_tokens):
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids, skip_special_tokens):
        return "".join(chr(i) for i in ids)


class FakeTrainer:
    def __init__(self, backend):
        self.vllm_generation, self.use_vllm, self.processing_class = backend, True, FakeTokenizer()
        self._last_loaded_step = -1
        self.state = type("State", (), {"global_step": 3})()
        self.model, self.accelerator = None, type("Accelerator", (), {"unwrap_model": staticmethod(lambda m: m)})()


def test_the_vllm_backend_samples_n_per_task_with_the_evaluations_settings_then_restores_grpos():
    backend = FakeLoraSync()
    trainer = FakeTrainer(backend)
    sampling = Sampling(n=2, max_new_tokens=16, temperature=0.2)
    items = [(p, i) for p in [HELD_OUT[0], HELD_OUT[1]] for i in range(2)]
    from azr.data import Problem

    items = [(Problem(t), i) for t, i in items]
    chat = ChatTokens(trainer.processing_class)
    out = Draws(sampling, BackendSampler(TrainerBatches(trainer)), chat, served=True).sample(items)
    assert [g.text for g in out] == ["A", "B", "C", "D"] and {g.version for g in out} == {3}
    ((prompts, n, used),) = backend.calls
    assert n == 2 and prompts[0] == prompts[1] != prompts[2] == prompts[3]  # each task twice in a row, as TRL sends
    assert used["temperature"] == 0.2 and used["max_tokens"] == 16
    assert backend.sampling == {"temperature": 0.7, "max_tokens": 128, "top_p": 1.0}  # GRPO's own again
    assert backend.syncs == 1 and trainer._last_loaded_step == 3  # the current weights, synced once per step
    Draws(sampling, BackendSampler(TrainerBatches(trainer)), chat, served=True).sample(items)
    assert backend.syncs == 1


# ------------------------------------------------------------------------------------ a real GRPO run, slow
SPREAD_REWARD = """
import zlib


def spread_reward(completions, **columns):
    return [zlib.crc32(str(c).encode()) % 7 / 7 for c in completions]
"""


def _recipe(root: Path, model_dir: Path, tasks: Path) -> Path:
    recipe = tiny_recipe(
        model_dir,
        root / "run",
        model={"gradient_checkpointing": False},
        grpo={"learning_rate": 1e-2},
        # rewards that differ between completions of the untrained model (it passes no test): the adapter learns
        rewards=[{"name": "tests", "weight": 1.0}, {"name": "spread_rewards:spread_reward", "weight": 1.0}],
        eval={"every_steps": 1, "tasks": str(tasks), "samples": 2, "k": [1, 2], "temperature": 0.8},
    )
    return write_recipe(root / "recipe.yaml", recipe)


@pytest.fixture(scope="module")
def heldout_run(tiny_model_dir, tmp_path_factory) -> tuple[Path, Path, Path]:
    """Two GRPO steps of a LoRA on the tiny model, evaluated on three held-out tasks at steps 0, 1 and 2."""
    from azr.training.run import run_train

    root = tmp_path_factory.mktemp("heldout")
    tasks = root / "three.jsonl"
    tasks.write_text("".join(json.dumps(t.to_json()) + "\n" for t in HELD_OUT[:3]))
    recipe = _recipe(root, tiny_model_dir, tasks)
    (root / "spread_rewards.py").write_text(SPREAD_REWARD)
    with pytest.MonkeyPatch.context() as env:
        env.syspath_prepend(str(root))
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
            env.setenv(name, "1")
        assert run_train(load_config(recipe)) == 0
    return root / "run", recipe, tasks


@pytest.mark.slow
def test_a_run_logs_one_evaluation_per_step_to_metrics_loggers_and_summary(heldout_run):
    out, _, _ = heldout_run
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in records if r.get("kind") == "eval"]
    assert [r["step"] for r in evals] == [0, 1, 2]
    assert [r["step"] for r in records if r["phase"] == "grpo" and "kind" not in r] == [1, 2]  # GRPO's own, as before
    for r in evals:
        assert r["tasks"] == 3 and r["counts"]["samples"] == 6 and set(r["pass_at_k"]) == {"1", "2"}
        assert r["eval_share"] > 0 and r["wall_s"] > 0
    assert sorted(p.name for p in (out / "heldout").iterdir()) == ["step-0.jsonl", "step-1.jsonl", "step-2.jsonl"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["heldout"]["evaluations"] == 3 and 0 < summary["heldout"]["share"] < 1
    assert summary["phases"]["grpo"]["steps"] == 2
    history = json.loads((out / "checkpoints" / "checkpoint-2" / "trainer_state.json").read_text())["log_history"]
    assert [h["step"] for h in history if "eval/pass@1" in h] == [0, 1, 2]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing.*:FutureWarning")  # peft's save_pretrained
def test_azr_eval_of_the_final_adapter_gives_the_runs_last_evaluation_sample_for_sample(cli, heldout_run, tmp_path):
    out, recipe, tasks = heldout_run
    code, _, err = cli(
        "eval", "--config", recipe, "--adapter", out / "final", "--dataset", tasks, "-n", "2", "-k", "1,2",
        "--temperature", "0.8", "--max-new-tokens", "16", "--output-dir", tmp_path / "eval",
    )  # fmt: skip
    assert code == 0, err
    report = json.loads((tmp_path / "eval" / "report.json").read_text())
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    last = [r for r in records if r.get("kind") == "eval"][-1]
    assert last["step"] == 2
    assert {f"pass@{k}": v["value"] for k, v in last["pass_at_k"].items()} == report["pass_at_k"]
    assert last["by_tag"] == report["by_tag"]
    ours = [json.loads(line) for line in (out / "heldout" / "step-2.jsonl").read_text().splitlines()]
    theirs = [json.loads(line) for line in (tmp_path / "eval" / "samples.jsonl").read_text().splitlines()]
    key = lambda r: (r["task_id"], r["index"])  # noqa: E731
    fields = ("task_id", "index", "completion", "passed", "status", "tests_passed")
    assert [tuple(r[f] for f in fields) for r in sorted(ours, key=key)] == [
        tuple(r[f] for f in fields) for r in sorted(theirs, key=key)
    ]
    # the adapter trained: the policy at step 0 wrote other completions
    first = [json.loads(line) for line in (out / "heldout" / "step-0.jsonl").read_text().splitlines()]
    assert [r["completion"] for r in sorted(first, key=key)] != [r["completion"] for r in sorted(ours, key=key)]


@pytest.mark.slow(minutes=0.5)
def test_two_ranks_split_the_tasks_and_the_main_one_writes_each_evaluation_once(tiny_model_dir, tmp_path):
    """`torchrun --standalone --nproc_per_node 2` (gloo on the CPU), as tests/training/test_ranks.py runs it."""
    import os
    import signal
    import subprocess
    import sys

    tasks = tmp_path / "three.jsonl"  # three tasks on two ranks: the second rank's share is padded
    tasks.write_text("".join(json.dumps(t.to_json()) + "\n" for t in HELD_OUT[:3]))
    (tmp_path / "spread_rewards.py").write_text(SPREAD_REWARD)
    recipe = _recipe(tmp_path, tiny_model_dir, tasks)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TMPDIR": str(tmp_path)}
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    argv += ["-m", "azr.cli", "train", "--config", str(recipe)]
    with open(tmp_path / "run.log", "w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        proc.wait(timeout=400)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = (tmp_path / "run.log").read_text()
    assert proc.returncode == 0, text[-4000:]
    out = tmp_path / "run"
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in records if r.get("kind") == "eval"]
    assert [r["step"] for r in evals] == [0, 1, 2]  # once each, by the main process
    for r in evals:
        assert r["tasks"] == 3 and r["counts"]["samples"] == 6 and r["pass_at_k"]["1"]["problems"] == 3
        samples = [json.loads(line) for line in (out / "heldout" / f"step-{r['step']}.jsonl").read_text().splitlines()]
        assert sorted((s["task_id"], s["index"]) for s in samples) == sorted(
            (t.id, i) for t in HELD_OUT[:3] for i in range(2)
        )  # every task of both ranks, none twice, no padding
    assert text.count("held-out eval at step 2") == 1


@pytest.mark.slow(minutes=1.2)
def test_in_adapter_mode_the_evaluation_samples_from_the_vllm_server_with_the_current_adapter(tiny_model_dir, tmp_path):
    """A real vLLM server on the CPU (`make vllm-env`): GRPO and the evaluations both sample from it, the
    evaluations at their own token budget."""
    import os
    import subprocess
    import sys

    from conftest import VLLM_CPU_ARGS, VLLM_CPU_ENV, require_vllm_python

    python = require_vllm_python()
    tasks = tmp_path / "three.jsonl"
    tasks.write_text("".join(json.dumps(t.to_json()) + "\n" for t in HELD_OUT[:3]))
    (tmp_path / "spread_rewards.py").write_text(SPREAD_REWARD)
    path = _recipe(tmp_path, tiny_model_dir, tasks)
    recipe = yaml.safe_load(path.read_text())
    recipe["model"]["adapter"] = {"r": 8, "alpha": 16, "dropout": 0.0}
    recipe["grpo"] |= {"temperature": 0.7, "max_completion_length": 24}
    recipe["eval"] |= {"max_new_tokens": 6}
    recipe["vllm"] = {
        "mode": "adapter",
        "python": python,
        "max_model_len": 1024,
        "extra_args": VLLM_CPU_ARGS,
        "env": VLLM_CPU_ENV,
        "startup_timeout_s": 540,
    }
    path.write_text(yaml.safe_dump(recipe))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, "-m", "azr.cli", "train", "--config", str(path)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-4000:]
    out = tmp_path / "run"
    evals = [r for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if r.get("kind") == "eval"]
    assert [r["step"] for r in evals] == [0, 1, 2] and all(r["counts"]["samples"] == 6 for r in evals)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    for r in evals:
        samples = [json.loads(line) for line in (out / "heldout" / f"step-{r['step']}.jsonl").read_text().splitlines()]
        lengths = [len(tokenizer(s["completion"], add_special_tokens=False)["input_ids"]) for s in samples]
        assert max(lengths) <= 12  # eval.max_new_tokens=6 (decoded noise re-tokenizes a little longer), not GRPO's 24
    # one completions request per GRPO step and per evaluation, all to the server
    server_log = (out / "vllm" / "server.log").read_text(errors="replace")
    assert server_log.count("POST /v1/completions") == 2 + 3, server_log[-3000:]
