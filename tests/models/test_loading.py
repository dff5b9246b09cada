"""The tiny offline model and the real loading code, exercised on it (bitsandbytes quantization included)."""

from __future__ import annotations

import hashlib
import sys

import pytest

from azr.config import AdapterConfig, ModelConfig
from azr.errors import ConfigError
from azr.models.adapters import build_peft_config
from azr.models.loading import build_model_and_tokenizer, count_parameters, resolve_dtype
from azr.models.tiny import build_tiny_model


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


# peft still calls the transformers names that 5.x renamed to activation_checkpointing_*; not ours to fix.
@pytest.mark.slow  # an optimizer step on a 4-bit base
@pytest.mark.filterwarnings("ignore:`(gradient_checkpointing_enable|is_gradient_checkpointing)` is deprecated")
@pytest.mark.parametrize("quantization", ["4bit", "8bit"])
def test_quantized_base_trains_only_the_lora_weights_on_cpu(tiny_model_dir, quantization):
    import bitsandbytes as bnb
    import peft
    import torch

    adapter = AdapterConfig(r=4, dropout=0.0)
    cfg = ModelConfig(name_or_path=str(tiny_model_dir), quantization=quantization, adapter=adapter)
    model, tokenizer = build_model_and_tokenizer(cfg)
    layer, weight = {
        "4bit": (bnb.nn.Linear4bit, bnb.nn.Params4bit),
        "8bit": (bnb.nn.Linear8bitLt, bnb.nn.Int8Params),
    }[quantization]
    # Every projection is quantized; the head stays in full precision (it is tied to the embedding).
    linears = {name: m for name, m in model.named_modules() if isinstance(m, torch.nn.Linear) and name != "lm_head"}
    assert len(linears) == 7 * model.config.num_hidden_layers
    assert all(isinstance(m, layer) and isinstance(m.weight, weight) for m in linears.values())
    full, _ = build_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))
    assert count_parameters(model) == count_parameters(full)
    batch = tokenizer(["def f(x):", "Write a function"], return_tensors="pt", padding=True)
    assert torch.isfinite(model(**batch).logits).all()

    # Checkpointing on, as in training; non-reentrant is transformers 5's default, which peft's {} would drop.
    model = peft.prepare_model_for_kbit_training(model, gradient_checkpointing_kwargs={"use_reentrant": False})
    model = peft.get_peft_model(model, build_peft_config(cfg.adapter, model))
    model.train()
    model(**batch, labels=batch["input_ids"]).loss.backward()
    params = dict(model.named_parameters())
    trained = {name for name, p in params.items() if p.requires_grad}
    assert trained and all(".lora_" in name for name in trained)
    assert all(params[name].grad is not None for name in trained)
    # lora_B starts at zero, so only its gradient is nonzero after the first backward pass.
    assert all(params[name].grad.abs().sum() > 0 for name in trained if ".lora_B." in name)
    assert all(p.grad is None for name, p in params.items() if name not in trained)


def test_quantization_errors_are_config_errors(monkeypatch):
    no_lora = ModelConfig(name_or_path="x", quantization="4bit", adapter=AdapterConfig(kind="none"))
    with pytest.raises(ConfigError, match=r"^model\.quantization=4bit: a quantized base model cannot be fully"):
        build_model_and_tokenizer(no_lora)
    monkeypatch.setitem(sys.modules, "bitsandbytes", None)  # makes `import bitsandbytes` fail
    with pytest.raises(
        ConfigError, match=r"^model\.quantization=8bit: needs bitsandbytes; pip install 'azr\[qlora\]'$"
    ):
        build_model_and_tokenizer(ModelConfig(name_or_path="x", quantization="8bit"))


def test_unsloth_errors_are_config_errors(monkeypatch):
    """unsloth needs a CUDA GPU, so only its two refusals can be tested here."""
    import torch

    cfg = ModelConfig(name_or_path="x", backend="unsloth")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"^model\.backend=unsloth: unsloth needs a CUDA GPU.*model\.backend=hf$"):
        build_model_and_tokenizer(cfg)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)  # dtype 'auto' asks
    monkeypatch.setitem(sys.modules, "unsloth", None)
    with pytest.raises(
        ConfigError, match=r"^model\.backend=unsloth: unsloth is not installed; pip install 'azr\[unsloth\]'$"
    ):
        build_model_and_tokenizer(cfg)


def test_lora_on_the_top_layers_only_trains_those_layers(tiny_model_dir):
    import peft

    from azr.config.adapter import check_adapter

    model, _ = build_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))
    layers = model.config.num_hidden_layers
    config = build_peft_config(AdapterConfig(kind="lora", r=4, top_layers=1), model)
    assert config.layers_to_transform == [layers - 1] and "q_proj" in config.target_modules
    trained = [n for n, p in peft.get_peft_model(model, config).named_parameters() if p.requires_grad]
    assert trained and all(f".layers.{layers - 1}." in n for n in trained)
    with pytest.raises(ConfigError, match=r"^model\.adapter\.top_layers: 99, but the model has"):
        build_peft_config(AdapterConfig(kind="lora", top_layers=99), model)
    with pytest.raises(ConfigError, match=r"^model\.adapter\.top_layers: a LoRA option"):
        check_adapter(AdapterConfig(kind="ia3", top_layers=2), "none")
    with pytest.raises(ConfigError, match=r"^model\.adapter\.top_layers: needs target_modules as a list"):
        check_adapter(AdapterConfig(kind="lora", top_layers=2, target_modules=".*q_proj"), "none")
