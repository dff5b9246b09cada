"""TRL's own vLLM modes (`vllm.mode` server and colocate), the part of them that is TRL's: the `vllm serve` command
`trl vllm-serve` builds (TRL's flags, kept in step with its client), the GRPOConfig fields TRL reads in each mode, and
the job's API key handed to TRL's server-mode client. `azr.serving.Sidecar` launches, watches and stops the server,
with `trl_server` passed in as server mode's command; serving/ itself imports no trl.
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path
from typing import Any

from azr.config import AzrConfig
from azr.secrets import register
from azr.serving import VllmServer, free_port, memory_share

KEY_ENV = "VLLM_API_KEY"


def trl_server(cfg: AzrConfig, max_model_len: int | None, log_path: Path | None = None) -> VllmServer:
    """TRL's server mode: `vllm serve` with the flags `trl vllm-serve` sets (NCCL weight transfer, processed
    logprobs, dev-mode endpoints), on `vllm.gpus`, listening on 127.0.0.1."""
    from trl.scripts.vllm_serve import ScriptArguments, build_command  # TRL's own flags, kept in step with its client

    vllm, model = cfg.vllm, cfg.model
    port = vllm.port or free_port()
    script = ScriptArguments(
        model=model.name_or_path,
        revision=model.revision,
        tensor_parallel_size=vllm.tensor_parallel_size,
        data_parallel_size=len(vllm.gpus) // vllm.tensor_parallel_size,
        host="127.0.0.1",
        port=port,
        gpu_memory_utilization=memory_share(vllm),
        max_model_len=vllm.max_model_len or max_model_len,
        trust_remote_code=model.trust_remote_code,
    )
    python = vllm.python or sys.executable
    command = [python, *build_command(script, list(vllm.extra_args))[1:]]
    env = {
        **vllm.env,
        "CUDA_VISIBLE_DEVICES": ",".join(map(str, vllm.gpus)),
        # The NCCL weight-sync group rendezvouses on this address; the trainer reaches the server over loopback.
        "VLLM_HOST_IP": "127.0.0.1",
        "VLLM_SERVER_DEV_MODE": "1",  # the weight-transfer and prefix-cache endpoints TRL's client calls
    }
    return VllmServer(
        model=model.name_or_path,
        python=python,
        port=port,
        command=command,
        env=env,
        log_path=log_path,
        startup_timeout_s=vllm.startup_timeout_s,
    )


def grpo_fields(
    cfg: AzrConfig, server: VllmServer | None, group_port: int, max_model_len: int | None
) -> dict[str, Any]:
    """The GRPOConfig fields of TRL's own vLLM modes; {} for 'off' and 'adapter' (azr's backend is attached to the
    trainer instead: `azr.training.grpo` does it). `server` is None before it starts and on ranks but the main one."""
    vllm = cfg.vllm
    if vllm.mode == "server":
        return {
            "use_vllm": True,
            "vllm_mode": "server",
            "vllm_server_base_url": server.url if server is not None else None,
            "vllm_group_port": group_port,
            "vllm_server_timeout": vllm.startup_timeout_s,
        }
    if vllm.mode == "colocate":
        return {
            "use_vllm": True,
            "vllm_mode": "colocate",
            "vllm_gpu_memory_utilization": memory_share(vllm),
            "vllm_tensor_parallel_size": vllm.tensor_parallel_size,
            "vllm_max_model_length": vllm.max_model_len or max_model_len,
        }
    return {}


def send_server_key(key: str | None = None) -> bool:
    """Make TRL's vLLM client send `key` (default: $VLLM_API_KEY) as a bearer token; False when there is none.

    A vLLM server started outside azr (a Slurm job's) gets a key generated per run, which `vllm serve` reads from
    $VLLM_API_KEY itself; TRL 1.16's `VLLMClient` sends no Authorization header, and vLLM refuses its `/v1` requests
    without one. The key never appears on a command line, in a log or in a file."""
    key = key if key is not None else os.environ.get(KEY_ENV, "").strip()
    if not key:
        return False
    register(key)
    try:
        import requests
    except ImportError:  # TRL's client cannot run without it either, and says so itself
        return False
    from trl.generation import vllm_client

    class KeyedSession(requests.Session):
        def __init__(self) -> None:
            super().__init__()
            self.headers["Authorization"] = f"Bearer {key}"

    # Only this module's view of `requests` changes: every other user of requests.Session is left as it was.
    vllm_client.requests = types.SimpleNamespace(**{**vars(requests), "Session": KeyedSession})
    return True
