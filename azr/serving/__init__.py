"""Serving: the vLLM server azr launches beside a run (argv, environment, health, teardown with the run), what each
`vllm.mode` launches and checks, adapter mode's LoRA hot-loading backend, and a server on a local model for
sampling. The face of the serving package; vLLM itself is never imported here.
"""

from azr.serving.lora_sync import LoraSync
from azr.serving.modes import (
    Host,
    adapter_rank,
    adapter_server,
    check_host,
    host_facts,
    memory_share,
    model_server,
)
from azr.serving.reaper import group_members
from azr.serving.sidecar import Endpoint, Sidecar, is_main_process, serve_model
from azr.serving.vllm import VllmServer, VllmServerError, free_port

__all__ = [
    "Endpoint",
    "Host",
    "LoraSync",
    "Sidecar",
    "VllmServer",
    "VllmServerError",
    "adapter_rank",
    "adapter_server",
    "check_host",
    "free_port",
    "group_members",
    "host_facts",
    "is_main_process",
    "memory_share",
    "model_server",
    "serve_model",
]
