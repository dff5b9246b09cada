"""The tiny offline model and the real loading code, exercised on it."""

from __future__ import annotations

import hashlib

import pytest

from azr.config import ConfigError, ModelConfig
from azr.modeling import build_model_and_tokenizer, build_tiny_model, count_parameters, resolve_dtype


def _digest(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_tiny_model_shape_and_size(tiny_model_dir):
    model, tokenizer = build_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))
    cfg = model.config
    assert cfg.model_type == "qwen2"
    assert cfg.hidden_size // cfg.num_attention_heads >= 32  # vLLM serves head_dim >= 32
    assert count_parameters(model) <= 2_000_000
    assert model.dtype == resolve_dtype("auto")  # float32 on CPU, bfloat16 on a GPU that has it
    assert tokenizer.pad_token == "<|endoftext|>" and tokenizer.eos_token == "<|im_end|>"
    assert 1000 < len(tokenizer) <= 2048


def test_tiny_model_is_deterministic_for_a_seed(tiny_model_dir, tmp_path):
    assert _digest(build_tiny_model(tmp_path / "same", seed=0)) == _digest(tiny_model_dir)
    other = _digest(build_tiny_model(tmp_path / "other", seed=1))
    assert other["model.safetensors"] != _digest(tiny_model_dir)["model.safetensors"]
    assert other["tokenizer.json"] == _digest(tiny_model_dir)["tokenizer.json"]


def test_chat_template_is_chatml_with_a_thinking_switch(tiny_model_dir):
    _, tokenizer = build_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"
    off = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, enable_thinking=False)
    assert off == text + "<think>\n\n</think>\n\n"
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)
    assert tokenizer.decode(ids) == text  # special tokens round-trip as single tokens


def test_tiny_model_generates_a_batch_with_its_own_eos_and_pad(tiny_model_dir):
    import torch

    model, tokenizer = build_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))
    batch = tokenizer(["def f(x):", "Write a function"], return_tensors="pt", padding=True, padding_side="left")
    torch.manual_seed(0)
    out = model.generate(**batch, max_new_tokens=8, min_new_tokens=8, do_sample=True)
    assert out.shape == (2, batch["input_ids"].shape[1] + 8)
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id
    assert model.generation_config.pad_token_id == tokenizer.pad_token_id != tokenizer.eos_token_id


def test_loader_errors_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"^model\.name_or_path: cannot load a tokenizer from"):
        build_model_and_tokenizer(ModelConfig(name_or_path=str(tmp_path / "missing")))
    with pytest.raises(ConfigError, match=r"^model\.backend=unsloth, model\.quantization=none: not supported"):
        build_model_and_tokenizer(ModelConfig(name_or_path="x", backend="unsloth"))
