"""Where the policy comes from, checked before anything loads: a local model directory that exists, or a hub id that
is in the local cache or that the hub knows; and the loader the recipe asks for (bitsandbytes, unsloth) is usable.

Every problem is a one-line ConfigError naming `model.*`. Nothing here downloads weights: a hub id not in the cache
costs one metadata request, and none at all when the hub is off (HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from azr.config import ModelConfig
from azr.errors import ConfigError
from azr.models.gguf import imported_folder, inspect_gguf, is_gguf_source, resolve_gguf_source

HUB_TIMEOUT_S = 10.0
# Any one of these files makes a folder loadable: a model, or a peft adapter that names its base.
MODEL_FILES = ("config.json", "adapter_config.json")


def check_model(cfg: ModelConfig) -> None:
    """Raise ConfigError when the policy could not be loaded as `cfg` says (source or loader)."""
    check_loader(cfg)
    name = cfg.name_or_path
    if is_gguf_source(name):
        try:
            inspect_gguf(resolve_gguf_source(name))
        except ConfigError as exc:
            raise ConfigError(f"model.name_or_path: {exc}") from None
    elif looks_local(name):
        _check_folder(Path(name).expanduser())
    else:
        _check_hub_id(name, cfg.revision)


def local_source(cfg: ModelConfig) -> ModelConfig:
    """`cfg` with a `.gguf` source replaced by the folder it is imported into, once (the first run pays about half
    a minute; later ones reuse the folder): every reader of the model (trainer, vLLM server, adapters, export)
    then reads one plain folder. Any other source as it is."""
    if not is_gguf_source(cfg.name_or_path):
        return cfg
    import dataclasses

    folder = imported_folder(resolve_gguf_source(cfg.name_or_path), model_cache())
    return dataclasses.replace(cfg, name_or_path=str(folder))


def model_cache() -> Path:
    """Where imported models live: $XDG_CACHE_HOME/azr/models (~/.cache/azr/models)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "azr" / "models"


def check_loader(cfg: ModelConfig) -> None:
    """The loader's own requirements: quantization needs an adapter and bitsandbytes; unsloth needs itself and
    CUDA."""
    if cfg.quantization != "none" and not cfg.adapter.enabled:
        raise ConfigError(
            f"model.quantization={cfg.quantization}: a quantized base model cannot be fully fine-tuned; "
            "set model.adapter.kind (lora, ia3, ln_tuning) or model.quantization=none"
        )
    if cfg.quantization != "none" and importlib.util.find_spec("bitsandbytes") is None:
        raise ConfigError(f"model.quantization={cfg.quantization}: needs bitsandbytes; pip install 'azr[qlora]'")
    if cfg.backend == "unsloth":
        import torch

        # Checked first because unsloth refuses to import at all on a machine without a GPU.
        if not torch.cuda.is_available():
            raise ConfigError(
                "model.backend=unsloth: unsloth needs a CUDA GPU and none is visible; use model.backend=hf"
            )
        if importlib.util.find_spec("unsloth") is None:
            raise ConfigError("model.backend=unsloth: unsloth is not installed; pip install 'azr[unsloth]'")


def looks_local(name: str) -> bool:
    """A path (absolute, ./, ../, ~), or a name that exists here, rather than a hub id."""
    return name.startswith((".", "/", "~")) or Path(name).expanduser().exists()


def _check_folder(path: Path) -> None:
    if not path.is_dir():
        hint = f"; build the demo's model with `azr tiny-model {path}`" if "tiny-model" in path.name else ""
        what = "no such directory" if not path.exists() else "not a directory"
        raise ConfigError(f"model.name_or_path: {what}: {path}{hint}")
    if not any((path / name).is_file() for name in MODEL_FILES):
        raise ConfigError(f"model.name_or_path: {path} holds no model (no {' or '.join(MODEL_FILES)})")


def _check_hub_id(name: str, revision: str | None) -> None:
    from huggingface_hub import HfApi, try_to_load_from_cache
    from huggingface_hub.errors import (
        GatedRepoError,
        HFValidationError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        cached = try_to_load_from_cache(name, "config.json", revision=revision)
    except HFValidationError:
        raise ConfigError(
            f"model.name_or_path: '{name}' is neither a local directory nor a hub id (namespace/name)"
        ) from None
    if isinstance(cached, str):
        return
    if hub_offline():
        raise ConfigError(
            f"model.name_or_path: '{name}' is not in the local hub cache and the hub is off (HF_HUB_OFFLINE=1); "
            "download it first or give a local directory"
        )
    try:
        HfApi().model_info(name, revision=revision, timeout=HUB_TIMEOUT_S)
    except GatedRepoError:
        raise ConfigError(f"model.name_or_path: '{name}' is gated on the hub; accept its terms and log in") from None
    except RevisionNotFoundError:
        raise ConfigError(f"model.revision: '{revision}' is not a revision of '{name}' on the hub") from None
    except RepositoryNotFoundError:
        raise ConfigError(
            f"model.name_or_path: the hub knows no model '{name}' (or it is private: log in with `hf auth login`), "
            "and no local directory has that name"
        ) from None
    except Exception as exc:  # the network edge: a refused connection, DNS, TLS, a timeout, a 5xx
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise ConfigError(
            f"model.name_or_path: the hub cannot be reached to look up '{name}' ({reason}); check the network "
            "(or HF_ENDPOINT), or give a local directory"
        ) from None


def hub_offline() -> bool:
    """The hub is off for this process (read at call time: the library reads its constant only at import)."""
    from huggingface_hub import constants

    flags = (os.environ.get(name, "") for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    return constants.HF_HUB_OFFLINE or any(flag.strip().lower() in ("1", "on", "yes", "true") for flag in flags)
