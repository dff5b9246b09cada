"""The seed project's two config shapes convert: its main JSON shape and its YAML with a top-level `azr:` section.

The files here are written for these tests in the seed's shapes (keys and nesting), with values of their own.
Every key with an azr equivalent is mapped, the rest named in one warning line, its IA³ gates dropped with advice
on training IA³ here; a current recipe is never taken for the seed's.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import typing

import pytest

from azr.config import AzrConfig, ConfigError, load_config
from azr.config.legacy import _SHARED, SEED_KEYS

MAIN_SHAPE = {
    "model": {
        "model_id": "org/coder-8b",
        "lora_r": 8,
        "lora_alpha": 16,
        "quantization": "",
        "device_map": "auto",
        "lora_target_modules": ["q_proj", "v_proj"],
    },
    "rlhf": {
        "num_generations": 8,
        "max_prompt_length": 512,
        "max_completion_length": 256,
        "importance_sampling_level": "token",
        "clip_range_ratio": 0.2,
        "kl_coeff": 0.01,
        "bf16": False,
        "gradient_accumulation_steps": 8,
        "temperature": 0.8,
        "top_p": 0.9,
        "retry_temperature": 0.4,
    },
    "ia3": {
        "enabled": True,
        "init_value": 1.0,
        "targets": ["k_proj", "ffn_down"],
        "clamp_min": 0.5,
        "clamp_max": 1.5,
        "safe_mode": False,
        "warmup_steps": 10,
        "per_layer_head_gates": False,
        "rope_scale": {"enabled": False, "per_layer": True, "init_value": 1.0},
        "bitfit": {"enabled": False},
    },
    "penalties": {"format_error_penalty": 0.1},
    "thinking": {
        "enabled": False,
        "tag_open": "<t>",
        "tag_close": "</t>",
        "strip_for_reward": False,
        "policy_budget_tokens": 128,
        "opponent_budget_tokens": 256,
        "opponent_budget_note": "a note",
        "teacher_budget_tokens": 512,
        "policy_enable_thinking": False,
        "opponent_enable_thinking": True,
    },
    "training": {"lr": 2e-05, "warmup_ratio": 0.1, "weight_decay": 0.01, "output_dir": "out/run"},
    "self_play": {
        "enabled": True,
        "weight": 0.4,
        "device": "cuda:1",
        "update_every": 50,
        "opponent": {
            "source": "remote",
            "provider": "together_ai",
            "model_id": "org/opponent",
            "endpoint": "https://opponent.example/v1/chat/completions",
            "api_key_env": "OPPONENT_KEY",
            "max_concurrency": 3,
            "temperature": 0.5,
            "top_p": 0.8,
            "extra_body": {"k": 1},
        },
    },
    "teacher": {
        "source": "remote",
        "provider": "openai",
        "model_id": "org/teacher",
        "api_key_env": "TEACHER_KEY",
        "api_base_env": "TEACHER_BASE",
        "request_timeout": 30.0,
        "max_concurrency": 2,
        "extra_body": {"stop": ["END"]},
    },
    "teacher_assist": {
        "enabled": True,
        "modes": ["hint"],
        "sample_prob_neither": 0.6,
        "sample_prob_opp_only": 0.4,
        "max_hint_tokens": 300,
    },
    "teacher_solve": {"enabled": True, "prob": 0.5, "method": "replace", "max_tokens": 64, "max_failures": 1},
    "data": {"train_path": "data/tasks.jsonl"},
    "logging": {"log_executor_output": False, "exec_store": "last", "exec_max_bytes": 10, "debug_full_logs": False},
    "log_intersteps": False,
}

AZR_SECTION_SHAPE = """
azr:
  image: "registry.example/base:1"
  model_id: "org/coder-7b"
  quantization: "nf4"
  lora:
    r: 4
    alpha: 8
    target_modules: ["q_proj"]
  rlhf:
    num_generations: 2
    max_prompt_length: 128
    max_completion_length: 64
    clip_range_ratio: 0.3
    kl_coeff: 0.02
    bf16: false
    gradient_accumulation_steps: 1
  sandbox:
    timeout_s: 3
    memory_mb: 128
    max_tool_turns: 4
  web:
    max_bytes: 1000
    user_agent: "test-agent/1"
    headless: false
self_play:
  enabled: false
  weight: 0.1
  device: "cuda:0"
  use_tool_loop: true
  tie_breakers: ["code_length"]
  update:
    every_calls: 5
    strategy: "copy_lora"
hardware:
  gpus:
    - name: "some GPU"
      vram_gb: 24
  cpu: {model: "some CPU", cores: 8}
"""


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "azr.config.legacy"]


def test_the_main_json_shape_converts(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)  # the seed opened its paths from the directory it ran in
    path = tmp_path / "conf" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(MAIN_SHAPE))
    with caplog.at_level(logging.WARNING, logger="azr.config.legacy"):
        cfg = load_config(path)
    assert (cfg.model.name_or_path, cfg.model.quantization) == ("org/coder-8b", "none")  # '' was its none
    adapter = cfg.model.adapter
    assert (adapter.kind, adapter.r, adapter.alpha, adapter.target_modules) == ("lora", 8, 16, ["q_proj", "v_proj"])
    assert cfg.grpo == {
        "num_generations": 8,
        "max_completion_length": 256,
        "importance_sampling_level": "token",
        "epsilon": 0.2,
        "beta": 0.01,
        "bf16": False,
        "gradient_accumulation_steps": 8,
        "temperature": 0.8,
        "top_p": 0.9,
        "learning_rate": 2e-05,
        "warmup_steps": 0.1,
        "weight_decay": 0.01,
    }
    assert cfg.output_dir == str(tmp_path / "out/run") and cfg.data.train == str(tmp_path / "data/tasks.jsonl")
    thinking = cfg.thinking
    assert (thinking.policy, thinking.opponent, thinking.teacher) == (False, True, True)
    assert (thinking.policy_budget_tokens, thinking.opponent_budget_tokens, thinking.teacher_budget_tokens) == (
        128,
        256,
        512,
    )
    sp = cfg.self_play
    assert (sp.enabled, sp.weight, sp.api, sp.base_url, sp.model) == (
        True,
        0.4,
        "chat",
        "https://opponent.example/v1",  # its endpoint wins over the provider's URL
        "org/opponent",
    )
    assert (sp.api_key_env, sp.concurrency, sp.temperature, sp.top_p, sp.extra_body) == (
        "OPPONENT_KEY",
        3,
        0.5,
        0.8,
        {"k": 1},
    )
    teacher = cfg.teacher
    assert (teacher.enabled, teacher.api, teacher.base_url, teacher.model) == (
        True,  # its teacher answered when teacher assistance was on
        "responses",
        "https://api.openai.com/v1",
        "org/teacher",
    )
    assert (teacher.api_key_env, teacher.timeout_s, teacher.concurrency, teacher.max_tokens) == (
        "TEACHER_KEY",
        30.0,
        2,
        300,
    )
    assert teacher.extra_body == {"stop": ["END"]}
    assist = cfg.teacher_assist
    assert (assist.enabled, assist.hint_prob_neither, assist.hint_prob_opponent_only) == (True, 0.6, 0.4)
    converted, dropped, ia3 = _warnings(caplog)
    assert "the seed project's schema converted" in converted
    assert dropped.endswith(
        "dropped (no meaning or no equivalent in azr): model.device_map, rlhf.max_prompt_length, "
        "rlhf.retry_temperature, penalties, thinking.enabled, thinking.tag_open, thinking.tag_close, "
        "thinking.strip_for_reward, thinking.opponent_budget_note, self_play.device, self_play.update_every, "
        "teacher.api_base_env, teacher_assist.modes, teacher_solve, logging.log_executor_output, logging.exec_store, "
        "logging.exec_max_bytes, logging.debug_full_logs, log_intersteps, ia3.per_layer_head_gates (disabled), "
        "ia3.rope_scale (disabled), ia3.bitfit (disabled)"
    )
    assert "IA³ gates (on k_proj, ffn_down) are dropped" in ia3
    assert (
        "model.adapter.kind: ia3 with target_modules: [k_proj, down_proj] and feedforward_modules: [down_proj]" in ia3
    )


def test_the_yaml_shape_with_an_azr_section_converts(tmp_path, caplog):
    path = tmp_path / "azr.params.yaml"
    path.write_text(AZR_SECTION_SHAPE)
    with caplog.at_level(logging.WARNING, logger="azr.config.legacy"):
        cfg = load_config(path)
    assert (cfg.model.name_or_path, cfg.model.quantization) == ("org/coder-7b", "4bit")
    assert (cfg.model.adapter.r, cfg.model.adapter.alpha, cfg.model.adapter.target_modules) == (4, 8, ["q_proj"])
    assert cfg.grpo == {
        "num_generations": 2,
        "max_completion_length": 64,
        "epsilon": 0.3,
        "beta": 0.02,
        "bf16": False,
        "gradient_accumulation_steps": 1,
    }
    assert (cfg.sandbox.timeout_s, cfg.sandbox.memory_mb, cfg.gen.max_turns) == (3.0, 128, 4)
    assert (cfg.tools.web.max_bytes, cfg.tools.web.user_agent) == (1000, "test-agent/1")
    assert (cfg.self_play.enabled, cfg.self_play.weight) == (False, 0.1)
    converted, dropped = _warnings(caplog)  # no ia3 block: no IA³ warning
    assert "the seed project's schema converted" in converted
    assert dropped.endswith(
        "dropped (no meaning or no equivalent in azr): azr.image, azr.rlhf.max_prompt_length, azr.web.headless, "
        "self_play.device, self_play.use_tool_loop, self_play.tie_breakers, self_play.update, hardware"
    )


def test_the_converted_recipes_pass_the_recipe_check_with_a_local_model(cli, tmp_path, monkeypatch, tiny_model_dir):
    """`azr config check` on each shape with only the model path overridden: TRL's own checks included."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    task = {
        "id": "t1",
        "prompt": "Write f(x) returning x.",
        "solution": "def f(x):\n    return x",
        "tests": ["assert f(1) == 1"],
    }
    (tmp_path / "data" / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    (tmp_path / "config.json").write_text(json.dumps(MAIN_SHAPE))
    (tmp_path / "azr.params.yaml").write_text(AZR_SECTION_SHAPE)
    for name in ("config.json", "azr.params.yaml"):
        code, out, err = cli(
            "config", "check", "--config", tmp_path / name, "--set", f"model.name_or_path={tiny_model_dir}"
        )
        assert code == 0, err
        assert out.startswith(f"ok: {tiny_model_dir}; GRPO ")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "azr: {model_id: m/x, rlhf: {kl_coef: 0.1}}",
            r"^azr\.rlhf\.kl_coef: unknown legacy key \(did you mean 'rlhf\.kl_coeff'",
        ),
        (
            "rlhf: {num_generation: 4}",
            r"^rlhf\.num_generation: unknown legacy key \(did you mean 'rlhf\.num_generations'",
        ),
        (
            "model: {model_id: m/x}\nself_play: {opponent: {source: local}}",
            r"^self_play\.opponent\.source: only a remote",
        ),
        ("model: {model_id: m/x}\nself_play: {opponent: {max_token: 9}}", r"^self_play\.opponent\.max_token: unknown"),
        ("azr: {model_id: m/x, lora: {rank: 4}}", r"^azr\.lora\.rank: unknown legacy key"),
        ("training: {lr: 0.1, epochs: 2}", r"^training\.epochs: unknown legacy key"),
        ("training: {output_dir: /}", r"^training\.output_dir: '/' is the file system's root; choose a folder$"),
        ("training: {output_dir: run/../..}", r"^training\.output_dir: 'run/\.\./\.\.' is the file system's root"),
        (
            "model: {model_id: m/x, name_or_path: m/y}",
            r"^model\.name_or_path: set twice, as model\.name_or_path and as legacy model\.model_id",
        ),
    ],
)
def test_seed_keys_that_do_not_convert_are_one_line_errors(write, text, message, monkeypatch):
    monkeypatch.chdir("/")  # the seed's paths are relative to the directory it runs in: here, the root
    with pytest.raises(ConfigError, match=message):
        load_config(write("seed.yaml", text))


def test_the_seeds_relative_output_dir_is_made_absolute_from_the_directory_it_runs_in(write, tmp_path, monkeypatch):
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    recipe = write("conf/seed.yaml", "model: {model_id: m/x}\ntraining: {output_dir: ../runs/./one}\n")
    assert load_config(recipe).output_dir == str(tmp_path / "runs" / "one")


def test_a_current_recipe_is_never_taken_for_the_seeds(caplog):
    """No seed key that converts is also an azr field (else a current recipe would be converted)."""

    def fields(cls: type, prefix: str = "") -> set[str]:
        hints = typing.get_type_hints(cls)
        out = set()
        for f in dataclasses.fields(cls):
            out.add(prefix + f.name)
            if dataclasses.is_dataclass(hints[f.name]):
                out |= fields(hints[f.name], f"{prefix}{f.name}.")
        return out

    assert set(SEED_KEYS) & fields(AzrConfig) == _SHARED
    with caplog.at_level(logging.WARNING, logger="azr.config.legacy"):
        load_config(None, ["model.name_or_path=m/x", "model.quantization=4bit", "thinking.teacher_budget_tokens=64"])
    assert not _warnings(caplog)
