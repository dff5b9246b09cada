"""The `vllm:` section: its modes, the LoRA ranks vLLM takes, and the combinations refused when a recipe loads."""

from __future__ import annotations

import os

import pytest

from azr.config import VLLM_LORA_RANKS, load_config, lora_refusal, served_lora_rank
from azr.errors import ConfigError

MIN = ["model.name_or_path=org/model"]


def load(*overrides: str):
    return load_config(None, [*MIN, *overrides])


def test_the_default_is_off_and_every_mode_loads():
    assert load().vllm.mode == "off"
    assert load("vllm.mode=adapter").vllm.mode == "adapter"
    assert load("vllm.mode=server", "vllm.gpus=[1]").vllm.gpus == [1]
    assert load("vllm.mode=colocate").vllm.mode == "colocate"
    with pytest.raises(ConfigError, match=r"^vllm\.mode: expected one of off, adapter, server, colocate; got 'on'$"):
        load("vllm.mode=on")


@pytest.mark.parametrize(("r", "served"), [(1, 1), (2, 8), (8, 8), (9, 16), (16, 16), (33, 64), (300, 320), (512, 512)])
def test_the_lora_rank_is_rounded_up_to_one_vllm_accepts(r, served):
    assert served_lora_rank(r) == served and served in VLLM_LORA_RANKS


def test_a_rank_past_vllms_largest_is_refused():
    with pytest.raises(ConfigError, match=r"^model\.adapter\.r=600: vLLM serves LoRA ranks up to 512$"):
        served_lora_rank(600)
    with pytest.raises(ConfigError, match=r"^vllm\.mode=adapter: model\.adapter\.r=1024: vLLM serves LoRA ranks up to"):
        load("vllm.mode=adapter", "model.adapter.r=1024")


SERVER = ["vllm.mode=server", "vllm.gpus=[1]"]
COLOCATE = ["vllm.mode=colocate"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        # adapter mode hot-loads a LoRA adapter: a fully fine-tuned policy has none
        (["vllm.mode=adapter", "model.adapter.kind=none"], r"^vllm\.mode=adapter: model\.adapter\.kind is none"),
        # vLLM serves plain LoRA only (azr.config.vllm_lora_problem)
        (["vllm.mode=adapter", "model.adapter.dora=true"], r"^vllm\.mode=adapter: model\.adapter\.dora: vLLM does not"),
        (["vllm.mode=adapter", "model.adapter.kind=ia3"], r"^vllm\.mode=adapter: model\.adapter\.kind is ia3"),
        # trl#4973: merged 4-bit weights do not fit the server's bf16 shapes
        ([*SERVER, "model.quantization=4bit"], r"^vllm\.mode=server: not with model\.quantization=4bit: .*trl#4973"),
        ([*SERVER, "model.quantization=8bit"], r"^vllm\.mode=server: not with model\.quantization=8bit"),
        (["vllm.mode=server"], r"^vllm\.gpus: server mode runs vLLM on GPUs of its own"),
        ([*SERVER, "vllm.gpus=[1,2,3]", "vllm.tensor_parallel_size=2"], r"^vllm\.gpus: 3 GPUs do not split"),
        ([*SERVER, "vllm.gpus=[1,1]"], r"^vllm\.gpus: expected distinct GPU indices"),
        ([*COLOCATE, "vllm.python=/venv/bin/python"], r"^vllm\.python: colocate mode runs vLLM inside"),
        ([*COLOCATE, "vllm.gpus=[1]"], r"^vllm\.gpus: colocate mode runs vLLM on the trainer's own GPUs"),
        ([*COLOCATE, "model.quantization=8bit"], r"^vllm\.mode=colocate: vLLM cannot load an 8-bit"),
        (["vllm.mode=adapter", "grpo.use_vllm=true"], r"^grpo\.use_vllm: vllm\.mode=adapter sets it from the vllm:"),
        ([*SERVER, "grpo.vllm_server_base_url=http://x"], r"^grpo\.vllm_server_base_url: "),
    ],
)
def test_combinations_no_machine_can_run_are_refused_at_load(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load(*overrides)


def test_qlora_is_fine_in_adapter_and_colocate_modes():
    """The adapter server serves the bf16 base with the adapter; the trainer keeps its 4-bit base."""
    assert load("vllm.mode=adapter", "model.quantization=4bit").model.quantization == "4bit"
    assert load("vllm.mode=colocate", "model.quantization=4bit").vllm.mode == "colocate"


def test_trls_own_vllm_fields_pass_through_when_azr_does_not_manage_vllm():
    cfg = load("grpo.use_vllm=true", "grpo.vllm_mode=server", "grpo.vllm_server_base_url=http://127.0.0.1:8000")
    assert cfg.vllm.mode == "off" and cfg.grpo["vllm_mode"] == "server"


def test_lora_refusal_is_none_for_a_plain_lora_policy():
    assert lora_refusal(load().model) is None


@pytest.mark.parametrize("key", ["vllm.sidecar=true", "vllm.host=0.0.0.0"])
def test_replaced_fields_say_what_replaced_them(key):
    with pytest.raises(ConfigError, match=rf"^{key.split('=')[0]}: (replaced by vllm\.mode|removed: the server)"):
        load(key)


def test_vllm_python_keeps_its_link(tmp_path, write):
    """A venv's interpreter is a link to the base interpreter: resolved, it would run outside the venv."""
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    os.symlink("/usr/bin/python3", tmp_path / "venv" / "bin" / "python")
    cfg = load_config(write("r.yaml", "model: {name_or_path: org/m}\nvllm: {python: venv/bin/python}\n"))
    assert cfg.vllm.python == str(tmp_path / "venv" / "bin" / "python")
