"""Absolute Zero mode in `azr train`: the tiny example recipe end to end (warm start on seed triplets, a seeding round,
GRPO steps) with the mode's logs and outputs, and a resume from a checkpoint that redoes a step exactly.

Real parts throughout: the tiny model, TRL's trainers, the bwrap sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from azr.absolute_zero import REASONS, TASK_TYPES, read_triplets

RECIPE = Path(__file__).resolve().parents[2] / "examples" / "absolute-zero-tiny.yaml"
SHORT = [  # the example recipe cut to what exercises every part in about a minute on two cores
    "data.max_tasks=2",
    "sft.args.num_train_epochs=2",
    "grpo.num_generations=2",
    "grpo.per_device_train_batch_size=12",
    "grpo.max_completion_length=48",
    "grpo.max_steps=2",
    "grpo.save_steps=1",
    "absolute_zero.learnability_samples=2",
    "absolute_zero.seed_rounds=1",
    "logging.console=plain",
]


@pytest.fixture(scope="module")
def tiny_run(tiny_model_dir, tmp_path_factory) -> Path:
    """The example recipe, shortened, run to the end: warm start on seed triplets, then two GRPO steps."""
    from azr.config import load_config
    from azr.training.run import run_train

    out = tmp_path_factory.mktemp("az") / "run"
    cfg = load_config(RECIPE, [f"model.name_or_path={tiny_model_dir}", f"output_dir={out}", *SHORT])
    with pytest.MonkeyPatch.context() as env:
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
            env.setenv(name, "1")
        assert run_train(cfg) == 0
    return out


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow(minutes=0.7)  # trains the tiny model
def test_the_tiny_recipe_runs_end_to_end_with_the_modes_logs(tiny_run):
    out = tiny_run
    assert json.loads((out / "state.json").read_text())["phases"].keys() == {"sft", "grpo"}
    seeds = read_triplets(out / "absolute_zero" / "seeds.jsonl")
    assert seeds and any(t.many for t in seeds)
    grpo = [r for r in records(out / "metrics.jsonl") if r["phase"] == "grpo"]
    assert [r["step"] for r in grpo] == [1, 2]
    for kind in ("deduction", "abduction", "induction"):
        for key in ("propose/reward", "solve/reward", "proposals/valid", "buffer", "solve/from_buffer"):
            assert all(f"absolute_zero/{kind}/{key}" in r for r in grpo), (kind, key)
    assert all("rewards/absolute_zero_propose_reward/mean" in r for r in grpo)
    rows = [r for path in sorted((out / "generations").glob("*.jsonl")) for r in records(path)]
    assert len(rows) == 2 * 12
    assert {(r["role"], r["type"]) for r in rows} == {
        (role, kind) for role in ("propose", "solve") for kind in TASK_TYPES
    }
    assert all(r["reason"] in (*REASONS, "") for r in rows if r["role"] == "propose")
    assert all(r["verdict"] in ("correct", "wrong", "format") for r in rows if r["role"] == "solve")
    for kind in TASK_TYPES:  # the buffers at the end, in the checker's format
        assert read_triplets(out / "absolute_zero" / f"{kind}.jsonl")
    assert (out / "final" / "model.safetensors").exists()


@pytest.mark.slow  # trains the tiny model
def test_a_resume_continues_exactly(tiny_run, tmp_path):
    """Resuming from checkpoint 1 redoes step 2 exactly: the same buffers and the same generations."""
    from azr.config import load_config
    from azr.training.run import run_train

    out = tiny_run
    before = {p.name: p.read_text() for p in (out / "checkpoints" / "checkpoint-2" / "absolute_zero").iterdir()}
    logged = [r for path in sorted((out / "generations").glob("*.jsonl")) for r in records(path) if r["step"] == 2]
    cfg = load_config(out / "config.yaml")
    assert run_train(cfg, resume_from=str(out / "checkpoints" / "checkpoint-1")) == 0
    after = {p.name: p.read_text() for p in (out / "checkpoints" / "checkpoint-2" / "absolute_zero").iterdir()}
    assert after == before
    again = [r for path in sorted((out / "generations").glob("*.jsonl")) for r in records(path) if r["step"] == 2]
    assert [r["completion"] for r in again] == [r["completion"] for r in logged]
    assert [r["rewards"] for r in again] == [r["rewards"] for r in logged]


def test_a_malformed_seed_file_stops_the_recipe_check(tmp_path):
    """Seed files (here in Absolute-Zero-Reasoner's shape) are read at the recipe check, before anything is written."""
    from azr.config import load_config
    from azr.errors import DataError
    from azr.training import preflight

    good, bad = tmp_path / "seed_io.jsonl", tmp_path / "code_f_seed_io.jsonl"
    good.write_text(
        json.dumps({"snippet": "def f(x):\n    return x", "input": "1", "output": "1", "imports": []}) + "\n"
    )
    bad.write_text(json.dumps({"snippet": "def f(x):\n    return x", "inputs": "1", "message": "m"}) + "\n")
    cfg = load_config(RECIPE, ["model.name_or_path=/m", f"absolute_zero.seed=[{good}, {bad}]"])
    assert cfg.absolute_zero.seed_files == [str(good), str(bad)]
    with pytest.raises(DataError, match=rf"^{bad}:1: field 'inputs': expected a non-empty list of strings"):
        preflight(cfg)


@pytest.mark.slow(minutes=1)  # trains the tiny model for ten steps
def test_stop_on_alarm_ends_an_absolute_zero_run_at_the_first_alarm(tiny_model_dir, tmp_path, caplog):
    """The untrained tiny model's completions run to an 8-token cap: the `length_at_cap` alarm fires once the rule's
    window of 10 logs is full, and `eval.stop_on_alarm` ends the run there, its final model saved."""
    import logging

    from azr.config import load_config
    from azr.training.run import run_train

    out = tmp_path / "run"
    short = [s for s in SHORT if not s.startswith(("grpo.max_steps", "grpo.save_steps", "grpo.max_completion"))]
    overrides = [*short, "sft.enabled=false", "grpo.max_completion_length=8", "grpo.max_steps=14"]
    overrides += ["grpo.save_steps=100", "eval.stop_on_alarm=true"]
    cfg = load_config(RECIPE, [f"model.name_or_path={tiny_model_dir}", f"output_dir={out}", *overrides])
    caplog.set_level(logging.WARNING, logger="azr")
    with pytest.MonkeyPatch.context() as env:
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
            env.setenv(name, "1")
        assert run_train(cfg) == 0
    logged = records(out / "metrics.jsonl")
    (alarm, *_) = [r for r in logged if r.get("kind") == "alarm"]
    assert alarm["rule"] == "length_at_cap"
    steps = [r["step"] for r in logged if r["phase"] == "grpo" and r.get("kind") is None]
    assert max(steps) == alarm["step"] < 14  # no step after the one that raised it
    assert (out / "final" / "model.safetensors").exists()
    assert any("eval.stop_on_alarm: training stops at step" in m for m in caplog.messages)
