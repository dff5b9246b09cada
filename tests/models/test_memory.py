"""Memory before work: a CPU recipe whose training step is estimated past the machine's RAM is warned about before the
model loads, naming the knobs; the estimate follows the knobs it names."""

from __future__ import annotations

import dataclasses
import json
import logging

from azr.config import load_config
from azr.models.memory import GIB, estimate_training_memory

SMOLLM2 = {  # SmolLM2-135M's config.json as `make smollm2` writes it
    "hidden_size": 576, "num_hidden_layers": 30, "vocab_size": 49152, "intermediate_size": 1536,
    "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64, "tie_word_embeddings": True,
}  # fmt: skip


def _model(**adapter):
    cfg = load_config(None, ["model.name_or_path=x"])
    adapter = dataclasses.replace(cfg.model.adapter, **adapter)
    return dataclasses.replace(cfg.model, adapter=adapter, gradient_checkpointing=False)


def test_the_estimate_follows_every_knob_it_names():
    base = estimate_training_memory(SMOLLM2, _model(), 16, 768).total
    assert estimate_training_memory(SMOLLM2, _model(), 4, 768).total < base / 2
    assert estimate_training_memory(SMOLLM2, _model(), 16, 400).total < base
    assert estimate_training_memory(SMOLLM2, _model(top_layers=10), 16, 768).total < base
    checkpointed = dataclasses.replace(_model(), gradient_checkpointing=True)
    assert estimate_training_memory(SMOLLM2, checkpointed, 16, 768).total < base
    # the recipe the kernel killed at 23.4 GB of a 24 GB machine (micro-batches of 16, 256 new tokens, every layer,
    # no checkpointing): its peak lay beyond that
    assert 22 * GIB < base < 32 * GIB


def test_the_estimate_is_near_the_measured_peak_of_one_micro_batch():
    # one forward and backward through TRL's fused head, the CPU recipe's adapter (LoRA r 16, last 10 layers), 656
    # tokens a sequence: 9.3 GB peak resident for 8 sequences, 5.8 GB for 4 (azr.models.memory's docstring)
    recipe = _model(top_layers=10)
    for sequences, measured in ((8, 9.3e9), (4, 5.8e9)):
        assert abs(estimate_training_memory(SMOLLM2, recipe, sequences, 656).total - measured) < 0.1 * measured


def test_a_recipe_past_the_machine_is_warned_about_before_the_model_loads(tmp_path, monkeypatch, caplog):
    import importlib

    pf = importlib.import_module("azr.training.preflight")  # the module; the package's face names its function

    (tmp_path / "config.json").write_text(json.dumps(SMOLLM2))
    monkeypatch.setattr("azr.models.machine_memory", lambda: 16 * GIB)
    sets = [f"model.name_or_path={tmp_path}", "model.gradient_checkpointing=false", "grpo.max_completion_length=256"]
    with caplog.at_level(logging.WARNING, logger="azr.training.preflight"):
        pf.warn_memory(load_config(None, sets), 16)
    [record] = caplog.records
    assert "estimated at" in record.message and "16.0 GiB" in record.message
    for knob in ("grpo.per_device_train_batch_size", "grpo.max_completion_length", "gradient_checkpointing"):
        assert knob in record.message
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="azr.training.preflight"):
        pf.warn_memory(load_config(None, sets), 2)
    assert not caplog.records
