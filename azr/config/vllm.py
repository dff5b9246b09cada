"""The `vllm:` section: how GRPO (and `azr eval`) generate through vLLM, and the combinations refused at load.

Owns the section's fields, the LoRA ranks vLLM accepts, and the checks that need nothing but the recipe (a mode
that cannot serve this policy's adapter, QLoRA with TRL's server mode, a server without GPUs). Checks that need
the machine (GPUs, vLLM installed) are `azr.serving`'s; launching and talking to the server too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from azr.config.adapter import vllm_lora_problem
from azr.config.model import ModelConfig
from azr.config.schema import field
from azr.errors import ConfigError

# --max-lora-rank values vLLM accepts (vllm.config.lora.MaxLoRARanks in vLLM 0.32).
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
# GRPOConfig fields a vllm.mode other than 'off' sets itself (with vllm.mode: off, `grpo:` may still drive TRL's own
# vLLM integration against a server the user runs).
TRL_VLLM_FIELDS = (
    "use_vllm",
    "vllm_mode",
    "vllm_server_base_url",
    "vllm_server_host",
    "vllm_server_port",
    "vllm_group_port",
    "vllm_server_timeout",
    "vllm_gpu_memory_utilization",
    "vllm_tensor_parallel_size",
    "vllm_max_model_length",
)


@dataclass
class VllmConfig:
    mode: Literal["off", "adapter", "server", "colocate"] = field(
        "off",
        "How GRPO generates: 'off' HF generate in the trainer; 'adapter' a vLLM server azr launches (from "
        "vllm.python) that hot-loads the LoRA adapter at every step, CPU included; 'server' TRL's server mode with "
        "NCCL weight sync (2+ GPUs, no QLoRA); 'colocate' TRL's colocate mode (vLLM inside the trainer, GPU).",
    )
    python: str | None = field(
        None,
        "Python interpreter of the vLLM environment for the server azr launches (adapter and server modes, "
        "`azr eval --vllm`); null for the trainer's own. Server mode needs the same vLLM version in both.",
    )
    port: int = field(0, "Port of the server azr launches, on 127.0.0.1; 0 picks a free one.", ge=0, le=65535)
    gpus: list[int] = field(
        factory=list,
        help="GPUs the server runs on (CUDA indices as nvidia-smi numbers them). Server mode: required, and the "
        "trainer must not see them (start azr with CUDA_VISIBLE_DEVICES naming the others). Adapter mode: empty "
        "shares the trainer's GPU.",
        le=1023,
    )
    gpu_memory_utilization: float | None = field(
        None,
        "Fraction of each of its GPUs' memory vLLM takes (on the CPU backend: of RAM, unless VLLM_CPU_KVCACHE_SPACE "
        "is set). Null: 0.9 when the server has GPUs of its own (vllm.gpus), 0.35 in adapter mode on the trainer's "
        "GPU, TRL's 0.3 in colocate mode.",
        gt=0,
        le=1,
    )
    tensor_parallel_size: int = field(
        1, "GPUs vLLM shards the model over (server mode: data parallel over the rest of vllm.gpus).", gt=0, le=1024
    )
    max_model_len: int | None = field(
        None,
        "Context length vLLM reserves per sequence; null: the run's budget (max_completion_length + 2048) in "
        "training, the model's own in `azr eval`.",
        gt=0,
        le=1 << 24,
    )
    startup_timeout_s: float = field(600.0, "How long to wait for the server's health check.", gt=0, le=86_400)
    request_timeout_s: float = field(
        900.0, "How long one generation request (a whole GRPO batch in adapter mode) may take.", gt=0, le=86_400
    )
    max_restarts: int = field(
        3,
        "Adapter mode: how many times in a run a server that dies (its engine fails, the OOM killer) is started "
        "again, with the adapter versions it served, and the request it died on sent again; 0: a death stops the run.",
        ge=0,
        le=1000,
    )
    extra_args: list[str] = field(
        factory=list,
        help="Extra command-line arguments for the server (CPU: --enforce-eager --dtype float32 ...).",
    )
    env: dict[str, str] = field(
        factory=dict, help="Extra environment variables for the server, e.g. {VLLM_CPU_KVCACHE_SPACE: '4'} on a CPU."
    )


def served_lora_rank(r: int) -> int:
    """The smallest --max-lora-rank vLLM accepts that holds rank `r`."""
    for rank in VLLM_LORA_RANKS:
        if rank >= r:
            return rank
    raise ConfigError(f"model.adapter.r={r}: vLLM serves LoRA ranks up to {VLLM_LORA_RANKS[-1]}")


def lora_refusal(model: ModelConfig) -> str | None:
    """Why vLLM cannot serve this policy's adapter as a plain LoRA (hot-loaded at every step), or None."""
    problem = vllm_lora_problem(model.adapter)
    if problem is None and model.adapter.r > VLLM_LORA_RANKS[-1]:
        problem = f"model.adapter.r={model.adapter.r}: vLLM serves LoRA ranks up to {VLLM_LORA_RANKS[-1]}"
    return problem


def check_vllm_config(vllm: VllmConfig, model: ModelConfig, grpo: dict[str, Any]) -> None:
    """Refuse, naming the field and the reason, what no machine could run with this `vllm:` section, `model:`
    section and `grpo:` pass-through: called when a recipe is loaded."""
    if vllm.mode != "off":
        for key in (k for k in TRL_VLLM_FIELDS if k in grpo):
            raise ConfigError(f"grpo.{key}: vllm.mode={vllm.mode} sets it from the vllm: section; leave it out")
    if vllm.mode == "adapter" and (reason := lora_refusal(model)):
        raise ConfigError(f"vllm.mode=adapter: {reason}")
    if vllm.mode == "server":
        if model.quantization != "none":
            raise ConfigError(
                f"vllm.mode=server: not with model.quantization={model.quantization}: TRL merges the adapter into "
                "the quantized base and pushes weights whose shapes the server's bf16 model does not have "
                "(huggingface/trl#4973); use vllm.mode=adapter, which serves the bf16 base with the adapter"
            )
        if not vllm.gpus:
            raise ConfigError(
                "vllm.gpus: server mode runs vLLM on GPUs of its own; name them, e.g. [1], and start azr with "
                "CUDA_VISIBLE_DEVICES naming the trainer's"
            )
    if vllm.gpus and len(vllm.gpus) % vllm.tensor_parallel_size:
        raise ConfigError(
            f"vllm.gpus: {len(vllm.gpus)} GPUs do not split into groups of vllm.tensor_parallel_size="
            f"{vllm.tensor_parallel_size}"
        )
    if len(set(vllm.gpus)) != len(vllm.gpus) or any(g < 0 for g in vllm.gpus):
        raise ConfigError(f"vllm.gpus: expected distinct GPU indices, got {vllm.gpus}")
    if vllm.mode == "colocate":
        if vllm.python:
            raise ConfigError("vllm.python: colocate mode runs vLLM inside the trainer's interpreter; leave it unset")
        if vllm.gpus:
            raise ConfigError("vllm.gpus: colocate mode runs vLLM on the trainer's own GPUs; leave it unset")
        if model.quantization == "8bit":
            raise ConfigError("vllm.mode=colocate: vLLM cannot load an 8-bit bitsandbytes model (TRL refuses)")
