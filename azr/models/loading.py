"""Loading the policy and its tokenizer from `cfg.model`, and a saved peft adapter onto it (`load_policy`).

Covers transformers with optional bitsandbytes 4-bit (QLoRA) or 8-bit quantization (CPU or GPU) and unsloth (CUDA
only). A new adapter is not applied here (`azr.models.adapters` builds its peft config for the trainers). torch,
transformers, bitsandbytes, unsloth and peft are imported inside functions so that importing this module stays cheap.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

from azr.config import ModelConfig
from azr.errors import ConfigError
from azr.inputs import load_json
from azr.models.source import check_loader

log = logging.getLogger(__name__)


def resolve_dtype(name: str):
    """'auto' means bfloat16 on a GPU that has it, else float32 (bfloat16 on CPU is many times slower)."""
    import torch

    if name == "auto":
        gpu_bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
        return torch.bfloat16 if gpu_bf16 else torch.float32
    return getattr(torch, name)


def load_tokenizer(cfg: ModelConfig):
    """The policy's tokenizer, with a pad token guaranteed (the EOS token when the model has none)."""
    from transformers import AutoTokenizer

    tokenizer = _from_pretrained(AutoTokenizer, cfg, "a tokenizer from ", trust_remote_code=cfg.trust_remote_code)
    return _checked_tokenizer(tokenizer, cfg)


def _checked_tokenizer(tokenizer, cfg: ModelConfig):
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ConfigError(f"model.name_or_path: tokenizer of '{cfg.name_or_path}' has neither pad nor eos token")
        tokenizer.pad_token = tokenizer.eos_token
    if tokenizer.chat_template is None:
        raise ConfigError(f"model.name_or_path: '{cfg.name_or_path}' has no chat template; use an instruct model")
    return tokenizer


def build_model_and_tokenizer(cfg: ModelConfig, max_seq_length: int = 2048, tokenizer=None) -> tuple[Any, Any]:
    """Load the policy model (explicit dtype, quantized if asked) and its tokenizer from a hub id or a directory;
    `tokenizer`, when given, is `load_tokenizer(cfg)` already loaded.

    The adapter is not applied here: the trainer gets `build_peft_config(cfg.adapter, model)` as `peft_config` and
    wraps the model itself. `max_seq_length` (prompt plus completion tokens) is used by the unsloth backend only.
    """
    check_loader(cfg)
    dtype = resolve_dtype(cfg.dtype)
    if cfg.backend == "unsloth":
        return _load_unsloth(cfg, dtype, max_seq_length)
    from transformers import AutoModelForCausalLM

    kwargs: dict[str, Any] = {"dtype": dtype, "trust_remote_code": cfg.trust_remote_code}
    if cfg.quantization != "none":
        # No device_map: transformers then places a quantized model on the current GPU, or on the CPU without one.
        kwargs["quantization_config"] = _bnb_config(cfg.quantization, dtype)
    if cfg.attn_implementation:
        kwargs["attn_implementation"] = cfg.attn_implementation
    tokenizer = tokenizer or load_tokenizer(cfg)
    model = _from_pretrained(AutoModelForCausalLM, cfg, "", **kwargs)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    if cfg.quantization == "4bit" and model.device.type == "cpu":
        _keep_4bit_trainable_on_cpu(model)
    return model, tokenizer


def _keep_4bit_trainable_on_cpu(model) -> None:
    """On CPUs with AVX512-BF16, bitsandbytes repacks a 4-bit layer's weights for inference the first time it runs
    in eval mode without grad (as the pass-rate measurement does), and training through the repacked weights then
    fails. Turning that fast path off keeps a policy that is sampled between training phases trainable."""
    from bitsandbytes.nn import Linear4bit

    for module in model.modules():
        if isinstance(module, Linear4bit) and hasattr(module, "support_avx512bf16_for_cpu"):
            module.support_avx512bf16_for_cpu = False


def _bnb_config(quantization: str, dtype):
    """The bitsandbytes settings for `model.quantization` (`check_loader` has made sure bitsandbytes is there)."""
    from transformers import BitsAndBytesConfig

    if quantization == "8bit":
        return BitsAndBytesConfig(load_in_8bit=True)
    # The QLoRA recipe (Dettmers et al. 2023): NF4 fits normally distributed weights better than FP4, double
    # quantization also compresses the per-block scales (about 0.4 bit per weight saved), and each matmul
    # dequantizes to the model's dtype, so only the stored weights are 4-bit, not the activations.
    # Sharded over ranks (ZeRO-3, FSDP), a module's weights are flattened into buffers of one dtype: the packed
    # 4-bit weights are then stored in the model's dtype instead of uint8.
    storage = {"bnb_4bit_quant_storage": dtype} if sharded_launch() else {}
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=dtype,
        **storage,
    )


def load_policy(
    cfg: ModelConfig, adapter: str | Path | None = None, *, trainable: bool = False, flag: str = "--adapter"
) -> tuple[Any, Any]:
    """The base model of `cfg` and its tokenizer, with the peft adapter saved in `adapter` on it (its folder checked
    before the model loads: a one-line ConfigError naming `flag`). `trainable`: the adapter's weights train on, in
    float32 except under ZeRO-3 (TRL creates adapters in the model's dtype there: deploy/accelerate/zero3.yaml);
    otherwise in eval mode, for sampling (`azr eval`, `azr gen`), and merged into an unquantized base's weights:
    peft's unmerged layers run the adapter beside every linear layer they wrap, which cost SmolLM2-135M with a LoRA
    on 10 of its 30 layers a fifth of its generation speed here (docs/real-model.md), for the same function. A
    quantized base keeps the adapter unmerged (merging would round it into 4- or 8-bit weights)."""
    from azr.models.adapters import read_adapter_config

    if adapter is not None:
        read_adapter_config(adapter, flag)
    model, tokenizer = build_model_and_tokenizer(cfg)
    if adapter is not None:
        from peft import PeftModel

        fp32 = not (sharded_launch() == "zero3" and cfg.quantization == "none")
        model = PeftModel.from_pretrained(model, str(adapter), is_trainable=trainable, autocast_adapter_dtype=fp32)
        if not trainable and cfg.quantization == "none":
            model = model.merge_and_unload()
    return (model if trainable else model.eval()), tokenizer


def sharded_launch() -> str | None:
    """'zero3' or 'fsdp' when `accelerate launch` shards the weights over the ranks, read from the environment it
    gives each rank (deploy/accelerate/); None otherwise (one process, DDP, ZeRO-1/2)."""
    env = os.environ
    if env.get("ACCELERATE_USE_FSDP", "").lower() in ("1", "true"):
        return "fsdp"
    if env.get("ACCELERATE_USE_DEEPSPEED", "").lower() not in ("1", "true"):
        return None
    stage = env.get("ACCELERATE_DEEPSPEED_ZERO_STAGE")
    if stage is None and env.get("ACCELERATE_DEEPSPEED_CONFIG_FILE"):  # a DeepSpeed JSON of one's own
        with contextlib.suppress(OSError, ValueError, AttributeError):
            config = load_json(Path(env["ACCELERATE_DEEPSPEED_CONFIG_FILE"]).read_text())
            stage = str(config.get("zero_optimization", {}).get("stage"))
    return "zero3" if stage == "3" else None


def _load_unsloth(cfg: ModelConfig, dtype, max_seq_length: int) -> tuple[Any, Any]:
    from unsloth import FastLanguageModel  # `check_loader` has checked for CUDA and unsloth: it imports only there

    with _load_errors(cfg, ""):
        model, tokenizer = FastLanguageModel.from_pretrained(
            model_name=cfg.name_or_path,
            max_seq_length=max_seq_length,
            dtype=dtype,
            load_in_4bit=cfg.quantization == "4bit",  # unsloth defaults to 4-bit; say "no" explicitly
            load_in_8bit=cfg.quantization == "8bit",
            full_finetuning=not cfg.adapter.enabled,
            revision=cfg.revision,
            trust_remote_code=cfg.trust_remote_code,
        )
    tokenizer = _checked_tokenizer(tokenizer, cfg)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def _from_pretrained(auto_class, cfg: ModelConfig, what: str, **kwargs):
    """`auto_class.from_pretrained` with a missing or broken model turned into a one-line ConfigError."""
    with _load_errors(cfg, what):
        return auto_class.from_pretrained(cfg.name_or_path, revision=cfg.revision, **kwargs)


@contextlib.contextmanager
def _load_errors(cfg: ModelConfig, what: str):
    from safetensors import SafetensorError  # a damaged weights file

    try:
        yield
    except (OSError, ValueError, SafetensorError) as exc:
        raise ConfigError(
            f"model.name_or_path: cannot load {what}'{cfg.name_or_path}': {str(exc).splitlines()[0]}"
        ) from None


def count_parameters(model) -> int:
    """Parameters as in the unquantized model: transformers' count unpacks 4-bit weights (two per stored byte)."""
    if hasattr(model, "num_parameters"):
        return model.num_parameters()
    return sum(p.numel() for p in model.parameters())
