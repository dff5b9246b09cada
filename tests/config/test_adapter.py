"""The `model.adapter` section: its checks at load, the seed's `ia3:` section, and `vllm_lora_problem`."""

from __future__ import annotations

import logging

import pytest

from azr.config import AdapterConfig, load_config, vllm_lora_problem
from azr.errors import ConfigError

MIN = ["model.name_or_path=m/x"]


def test_every_kind_and_option_loads_from_a_recipe(write):
    recipe = """
model:
  name_or_path: m/x
  adapter: {kind: lora, r: 8, alpha: 16, dora: true, rslora: true, bias: lora_only, train_norms: true,
            target_modules: [q_proj, v_proj]}
"""
    adapter = load_config(write("r.yaml", recipe)).model.adapter
    assert (adapter.kind, adapter.r, adapter.alpha, adapter.dora, adapter.rslora) == ("lora", 8, 16, True, True)
    assert (adapter.bias, adapter.train_norms, adapter.target_modules) == ("lora_only", True, ["q_proj", "v_proj"])
    ia3 = ["model.adapter.kind=ia3", "model.adapter.target_modules=[k_proj, down_proj]"]
    adapter = load_config(None, [*MIN, *ia3, "model.adapter.feedforward_modules=[down_proj]"]).model.adapter
    assert (adapter.kind, adapter.feedforward_modules) == ("ia3", ["down_proj"])
    assert load_config(None, [*MIN, "model.adapter.kind=ln_tuning"]).model.adapter.enabled
    assert not load_config(None, [*MIN, "model.adapter.kind=none"]).model.adapter.enabled


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model.adapter.kind=prompt_tuning"], r"^model\.adapter\.kind: prompt_tuning: prompt tuning is not offered: "),
        (["model.adapter.kind=prefix_tuning"], r"^model\.adapter\.kind: prefix_tuning: prompt tuning is not offered"),
        (["model.adapter.kind=adalora"], r"^model\.adapter\.kind: expected one of lora, ia3, ln_tuning, none"),
        (["model.adapter.kind=ia3", "model.adapter.r=4"], r"^model\.adapter\.r: a LoRA option, but .*kind is ia3$"),
        (["model.adapter.kind=ia3", "model.adapter.dora=true"], r"^model\.adapter\.dora: a LoRA option"),
        (["model.adapter.kind=ln_tuning", "model.adapter.train_norms=true"], r"^model\.adapter\.train_norms: a LoRA"),
        (["model.adapter.feedforward_modules=[down_proj]"], r"^model\.adapter\.feedforward_modules: an IA³ option"),
        (
            ["model.adapter.kind=ia3", "model.adapter.target_modules=[q]", "model.adapter.feedforward_modules=[x]"],
            r"^model\.adapter\.feedforward_modules: \['x'\] not among target_modules \['q'\]$",
        ),
        (["model.adapter.kind=none", "model.adapter.target_modules=[q_proj]"], r"^model\.adapter\.target_modules: "),
        (["model.adapter.kind=none", "model.quantization=4bit"], r"^model\.quantization=4bit: a quantized base model"),
        (["model.adapter.bias=some"], r"^model\.adapter\.bias: expected one of none, all, lora_only; got 'some'$"),
    ],
)
def test_bad_adapter_settings_are_one_line_errors_at_load(overrides, message):
    with pytest.raises(ConfigError, match=message) as err:
        load_config(None, [*MIN, *overrides])
    assert "\n" not in str(err.value)


WARM = ["sft.enabled=true", "sft.full_weights=true"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ([*WARM, "model.adapter.kind=none"], r"^sft\.full_weights: model\.adapter\.kind is none, so every phase"),
        ([*WARM, "model.quantization=4bit"], r"^sft\.full_weights: model\.quantization=4bit: a quantized base"),
        ([*WARM, "model.backend=unsloth"], r"^sft\.full_weights: model\.backend unsloth loads a model once"),
    ],
)
def test_a_warm_start_of_all_weights_under_an_adapter_is_refused_where_it_cannot_be_had(overrides, message):
    with pytest.raises(ConfigError, match=message) as err:
        load_config(None, [*MIN, *overrides])
    assert "\n" not in str(err.value)
    cfg = load_config(None, [*MIN, *WARM, "vllm.mode=adapter"])  # a LoRA (the default) on an unquantized hf model
    assert cfg.sft.full_weights and cfg.model.adapter.kind == "lora"
    assert load_config(None, [*MIN, "sft.full_weights=true", "model.adapter.kind=none"]).sft.full_weights  # sft off


def test_the_seeds_lora_and_ia3_sections_convert_where_their_meaning_maps(write, caplog):
    legacy = """
azr: {model_id: m/x, lora: {r: 8, alpha: 16, dropout: 0.0, target_modules: [q_proj, v_proj]}}
ia3:
  enabled: true
  init_value: 1.0
  layernorm_gamma: {enabled: true}
  bitfit: {enabled: true, include_lm_head_bias: false}
  per_layer_head_gates: false
  rope_scale: {enabled: false}
"""
    with caplog.at_level(logging.WARNING, logger="azr.config.legacy"):
        adapter = load_config(write("old.yaml", legacy)).model.adapter
    assert (adapter.kind, adapter.r, adapter.alpha, adapter.dropout) == ("lora", 8, 16, 0.0)
    assert (adapter.train_norms, adapter.bias, adapter.target_modules) == (True, "all", ["q_proj", "v_proj"])
    assert "IA³ gates are dropped" in caplog.text and "set model.adapter.kind: ia3" in caplog.text
    disabled = load_config(write("off.yaml", "azr: {model_id: m/x}\nia3: {enabled: false, rope_scale: true}\n"))
    assert disabled.model.adapter == AdapterConfig()  # the seed read nothing from a disabled section


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("{enabled: true, per_layer_head_gates: true}", r"^ia3\.per_layer_head_gates: the seed's per-head and grouped"),
        ("{enabled: true, attention_logit_gates: {enabled: true}}", r"^ia3\.attention_logit_gates: the seed's"),
        ("{enabled: true, rope_scale: {enabled: true}}", r"^ia3\.rope_scale: the seed's RoPE scalers are not ported"),
        ("{enabled: true, lora_mlp_down: {enabled: true}}", r"^ia3\.lora_mlp_down: the seed's LoRA-MLP adapters"),
        ("{enabled: true, prefix_prompts: {enabled: true}}", r"^ia3\.prefix_prompts: the seed's soft prompts"),
        ("{enabled: true, init_value: 0.5}", r"^ia3\.init_value: gates starting at 0\.5 are not ported"),
        ("{enabled: true, warmup: 10}", r"^ia3\.warmup: unknown legacy key"),
        ("[1, 2]", r"^ia3: expected a mapping"),
    ],
)
def test_the_seeds_ia3_parts_without_a_peft_equivalent_are_one_line_errors(write, section, message):
    with pytest.raises(ConfigError, match=message) as err:
        load_config(write("old.yaml", f"azr: {{model_id: m/x}}\nia3: {section}\n"))
    assert "\n" not in str(err.value)


def test_a_legacy_norm_setting_and_a_current_one_cannot_both_be_given(write):
    text = "azr: {model_id: m/x}\nmodel: {adapter: {train_norms: false}}\nia3: {enabled: true, layernorm_gamma: true}\n"
    with pytest.raises(ConfigError, match=r"^model\.adapter\.train_norms: set twice, .* legacy ia3\.layernorm_gamma$"):
        load_config(write("both.yaml", text))


@pytest.mark.parametrize(
    ("adapter", "problem"),
    [
        (AdapterConfig(), None),
        (AdapterConfig(rslora=True, r=64, target_modules=["q_proj"]), None),  # rsLoRA is a scale vLLM reads
        (AdapterConfig(dora=True), "model.adapter.dora: vLLM does not serve DoRA"),
        (AdapterConfig(bias="all"), "model.adapter.bias=all: vLLM does not serve LoRA adapters with trained biases"),
        (AdapterConfig(bias="lora_only"), "model.adapter.bias=lora_only"),
        (AdapterConfig(train_norms=True), "model.adapter.train_norms: vLLM does not load the trained norm weights"),
        (AdapterConfig(kind="ia3"), "model.adapter.kind is ia3: vLLM serves LoRA adapters only"),
        (AdapterConfig(kind="ln_tuning"), "model.adapter.kind is ln_tuning: vLLM serves LoRA adapters only"),
        (AdapterConfig(kind="none"), "model.adapter.kind is none: all weights train"),
    ],
)
def test_vllm_lora_problem_says_why_an_adapter_is_not_plain_lora(adapter, problem):
    found = vllm_lora_problem(adapter)
    assert found == problem if problem is None else found.startswith(problem)
