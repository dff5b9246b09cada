"""`mode: absolute_zero` and the `absolute_zero:` section: loading, one-line errors naming the field, and what the
mode refuses before anything is written."""

from __future__ import annotations

import re

import pytest

from azr.config import load_config
from azr.errors import ConfigError, NotAvailableError

BASE = "model: {name_or_path: org/model}\n"


def test_the_mode_and_its_section_load(write):
    cfg = load_config(
        write("r.yaml", BASE + "mode: absolute_zero\nabsolute_zero: {types: [deduction], references: 2}\n")
    )
    assert cfg.mode == "absolute_zero" and cfg.absolute_zero.types == ["deduction"]
    assert cfg.absolute_zero.references == 2 and cfg.absolute_zero.baseline == "group"
    assert load_config(write("d.yaml", BASE)).mode == "grpo"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mode: zero\n", "mode: expected one of grpo, absolute_zero; got 'zero'"),
        ("absolute_zero: {types: [deduce]}\n", "absolute_zero.types[0]: expected one of deduction, abduction"),
        ("absolute_zero: {types: []}\n", "absolute_zero.types: at least one task type is required"),
        ("absolute_zero: {types: [deduction, deduction]}\n", "absolute_zero.types: a type is listed twice"),
        ("absolute_zero: {induction_shown: 4}\n", "absolute_zero.induction_shown: must be below induction_inputs"),
        ("absolute_zero: {learnability_samples: 1}\n", "absolute_zero.learnability_samples: must be >= 2, got 1"),
        ("absolute_zero: {baseline: batch}\n", "absolute_zero.baseline: expected one of group, type_role"),
        ("absolute_zero: {reference: 2}\n", "absolute_zero.reference: unknown key (did you mean 'references'?)"),
    ],
)
def test_bad_values_name_the_field(write, text, message):
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        load_config(write("r.yaml", BASE + text))


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        (["grpo.per_device_train_batch_size=16", "grpo.num_generations=4"], ConfigError, "needs a multiple of 6"),
        (["sft.enabled=true", "sft.near_misses=2"], ConfigError, "sft.near_misses: not used with mode absolute_zero"),
        (["grpo.eval_strategy=steps"], ConfigError, "grpo.eval_strategy: needs evaluation through the trainer"),
        (["sampling.dynamic=true"], ConfigError, "sampling.dynamic: not with mode absolute_zero"),
        (["curriculum.enabled=true"], ConfigError, "curriculum.enabled: not with mode absolute_zero"),
    ],
)
def test_what_the_mode_cannot_do_is_refused_before_anything_is_written(tmp_path, write, overrides, error, message):
    from azr.training.run import run_train

    out = tmp_path / "run"
    cfg = load_config(write("r.yaml", BASE + f"mode: absolute_zero\noutput_dir: {out}\n"), overrides)
    with pytest.raises(error, match=message):
        run_train(cfg)
    assert not out.exists()


def test_several_training_processes_are_refused(tmp_path, write, monkeypatch):
    from azr.training.run import run_train

    monkeypatch.setenv("WORLD_SIZE", "2")
    cfg = load_config(write("r.yaml", BASE + f"mode: absolute_zero\noutput_dir: {tmp_path / 'run'}\n"))
    with pytest.raises(NotAvailableError, match="one training process"):
        run_train(cfg)
