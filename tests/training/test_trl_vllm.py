"""TRL's own vLLM modes as azr runs them (`azr.training.trl.vllm`): server mode's `vllm serve` command with TRL's
flags, the GRPOConfig fields of server and colocate modes, and the job's vLLM key sent by TRL's server-mode client,
against a real loopback server that refuses /v1 without it. No vLLM server starts here."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import argv_flag as flag

from azr.config import load_config
from azr.training import grpo_fields, trl_server

PY = "/venv/bin/python"
COLOCATE = ["vllm.mode=colocate", "vllm.python=null"]


def cfg(*overrides: str):
    return load_config(None, ["model.name_or_path=/models/qwen", f"vllm.python={PY}", *overrides])


def test_grpo_fields_are_trls_only_in_its_own_modes():
    assert grpo_fields(cfg("vllm.mode=off"), None, 0, 2048) == {}
    assert grpo_fields(cfg("vllm.mode=adapter"), None, 0, 2048) == {}  # azr's backend is attached instead


# --- server mode ---------------------------------------------------------------------------------------------


def test_server_mode_runs_trls_vllm_serve_command_on_its_gpus():
    c = cfg("vllm.mode=server", "vllm.gpus=[2,3]", "vllm.port=8200", "vllm.extra_args=[--enforce-eager]")
    server = trl_server(c, max_model_len=2304)
    argv = server.argv()
    # `trl vllm-serve` runs `vllm serve` with TRL's flags; azr runs that command with vllm.python
    assert argv[:4] == [PY, "-m", "vllm.entrypoints.cli.main", "serve"] and argv[4] == "/models/qwen"
    assert flag(argv, "--host") == "127.0.0.1" and flag(argv, "--port") == "8200"
    assert flag(argv, "--tensor-parallel-size") == "1" and flag(argv, "--data-parallel-size") == "2"
    assert flag(argv, "--gpu-memory-utilization") == "0.9" and flag(argv, "--max-model-len") == "2304"
    assert json.loads(flag(argv, "--weight-transfer-config")) == {"backend": "nccl"}  # TRL's NCCL weight sync
    assert flag(argv, "--logprobs-mode") == "processed_logprobs"
    assert argv[-1] == "--enforce-eager"
    assert server.env == {
        "CUDA_VISIBLE_DEVICES": "2,3",
        "VLLM_HOST_IP": "127.0.0.1",
        "VLLM_SERVER_DEV_MODE": "1",
    }
    assert server.url == "http://127.0.0.1:8200"


def test_server_mode_with_tensor_parallelism_splits_the_gpus():
    argv = trl_server(cfg("vllm.mode=server", "vllm.gpus=[4,5,6,7]", "vllm.tensor_parallel_size=2"), None).argv()
    assert flag(argv, "--tensor-parallel-size") == "2" and flag(argv, "--data-parallel-size") == "2"
    assert flag(argv, "--port") not in ("0", None)  # a free port chosen up front: the command holds it


def test_server_mode_passes_the_base_url_and_a_group_port_to_trl():
    c = cfg("vllm.mode=server", "vllm.gpus=[1]", "vllm.port=8300", "vllm.startup_timeout_s=90")
    fields = grpo_fields(c, trl_server(c, None), 51300, 2304)
    assert fields == {
        "use_vllm": True,
        "vllm_mode": "server",
        "vllm_server_base_url": "http://127.0.0.1:8300",
        "vllm_group_port": 51300,
        "vllm_server_timeout": 90.0,
    }
    from trl import GRPOConfig  # the fields are GRPOConfig's own

    args = GRPOConfig(output_dir="/tmp/x", use_cpu=True, bf16=False, **fields)
    assert args.vllm_server_base_url == "http://127.0.0.1:8300" and args.vllm_group_port == 51300


# --- colocate mode -------------------------------------------------------------------------------------------


def test_colocate_mode_passes_the_sections_settings_to_trl():
    c = cfg("vllm.mode=colocate", "vllm.python=null", "vllm.tensor_parallel_size=2", "vllm.gpu_memory_utilization=0.4")
    assert grpo_fields(c, None, 0, 2304) == {
        "use_vllm": True,
        "vllm_mode": "colocate",
        "vllm_gpu_memory_utilization": 0.4,
        "vllm_tensor_parallel_size": 2,
        "vllm_max_model_length": 2304,
    }
    assert grpo_fields(cfg(*COLOCATE), None, 0, 2304)["vllm_gpu_memory_utilization"] == 0.3  # TRL's default


# --- the job's key -------------------------------------------------------------------------------------------

KEY = "job-key-0123456789abcdef"


class _Guarded(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        ok = self.path == "/health" or self.headers.get("Authorization") == f"Bearer {KEY}"
        body = json.dumps({"data": [{"id": "served"}]} if ok else {"error": "Unauthorized"}).encode()
        self.send_response(200 if ok else 401)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_trl_client_sends_the_key_from_the_environment(monkeypatch):
    # requests comes with vllm on a GPU box; the CPU install pins it so that this runs everywhere
    from trl.generation import vllm_client

    from azr.training import send_server_key

    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setattr(vllm_client, "is_vllm_available", lambda: True)  # the client itself needs only requests
    monkeypatch.setattr(vllm_client, "requests", vllm_client.requests)  # undone after the test
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Guarded)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(Exception, match="401"):
            vllm_client.VLLMClient(base_url=url)
        monkeypatch.setenv("VLLM_API_KEY", KEY)
        assert send_server_key() is True
        assert vllm_client.VLLMClient(base_url=url).model == "served"
    finally:
        server.shutdown()


def test_no_key_changes_nothing(monkeypatch):
    from azr.training import send_server_key

    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    assert send_server_key() is False
