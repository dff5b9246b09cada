"""Loading the policy and its tokenizer from `cfg.model`.

Covers transformers with optional bitsandbytes 4-bit (QLoRA) or 8-bit quantization (CPU or GPU) and unsloth (CUDA
only); `lora_config` turns `cfg.model.lora` into the peft config the TRL trainers apply. torch, transformers, peft,
bitsandbytes and unsloth are imported inside functions so that importing this module stays cheap.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

from azr.config import ModelConfig
from azr.errors import ConfigError
from azr.models.source import check_loader

if TYPE_CHECKING:
    import peft

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

    LoRA is not applied here: the trainer gets `lora_config(cfg)` as `peft_config` and wraps the model itself.
    `max_seq_length` (prompt plus completion tokens) is used by the unsloth backend only.
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


def lora_config(cfg: ModelConfig) -> peft.LoraConfig | None:
    """The peft LoRA config for `cfg.lora`, or None when LoRA is off; TRL trainers take it as `peft_config`."""
    if not cfg.lora.enabled:
        return None
    from peft import LoraConfig

    lora = cfg.lora
    targets = lora.target_modules if isinstance(lora.target_modules, str) else list(lora.target_modules)
    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=targets,
        task_type="CAUSAL_LM",
        bias="none",
    )


def _bnb_config(quantization: str, dtype):
    """The bitsandbytes settings for `model.quantization` (`check_loader` has made sure bitsandbytes is there)."""
    from transformers import BitsAndBytesConfig

    if quantization == "8bit":
        return BitsAndBytesConfig(load_in_8bit=True)
    # The QLoRA recipe (Dettmers et al. 2023): NF4 fits normally distributed weights better than FP4, double
    # quantization also compresses the per-block scales (about 0.4 bit per weight saved), and each matmul
    # dequantizes to the model's dtype, so only the stored weights are 4-bit, not the activations.
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=dtype,
    )


def _load_unsloth(cfg: ModelConfig, dtype, max_seq_length: int) -> tuple[Any, Any]:
    from unsloth import FastLanguageModel  # `check_loader` has checked for CUDA and unsloth: it imports only there

    with _load_errors(cfg, ""):
        model, tokenizer = FastLanguageModel.from_pretrained(
            model_name=cfg.name_or_path,
            max_seq_length=max_seq_length,
            dtype=dtype,
            load_in_4bit=cfg.quantization == "4bit",  # unsloth defaults to 4-bit; say "no" explicitly
            load_in_8bit=cfg.quantization == "8bit",
            full_finetuning=not cfg.lora.enabled,
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
    try:
        yield
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"model.name_or_path: cannot load {what}'{cfg.name_or_path}': {str(exc).splitlines()[0]}"
        ) from None


def count_parameters(model) -> int:
    """Parameters as in the unquantized model: transformers' count unpacks 4-bit weights (two per stored byte)."""
    if hasattr(model, "num_parameters"):
        return model.num_parameters()
    return sum(p.numel() for p in model.parameters())
