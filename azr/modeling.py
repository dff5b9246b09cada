"""Models: load the policy and its tokenizer from `cfg.model`, and build the tiny offline model for tests and demos.

The tiny model is a random-init Qwen2 causal LM (head_dim 32, about 1 M parameters) with a byte-level BPE tokenizer
trained here on the shipped training tasks and a ChatML chat template; it is saved in HF format, loads with the
Auto classes and vLLM, and is byte-identical for a given seed. Nothing is downloaded. torch and transformers are
imported inside functions so that importing this module stays cheap.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from azr.config import ConfigError, ModelConfig
from azr.data import load_tasks

log = logging.getLogger(__name__)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]

# ChatML, as Qwen uses it. `enable_thinking=false` pre-fills an empty think block (the Qwen3 convention), so the
# same switch works for the tiny model and for real thinking models.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{ '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and not enable_thinking -%}{{ '<think>\\n\\n</think>\\n\\n' }}{%- endif -%}"
    "{%- endif -%}"
)

TINY_SHAPE = dict(
    hidden_size=128,
    intermediate_size=384,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=4096,
    tie_word_embeddings=True,
)


def build_tiny_model(out_dir: str | Path, seed: int = 0, vocab_size: int = 2048) -> Path:
    """Write a tiny random-init Qwen2 model and its tokenizer to `out_dir`; the same seed gives the same bytes."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM
    from transformers.utils import logging as hf_logging

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _train_tokenizer(vocab_size)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        use_sliding_window=False,
        **TINY_SHAPE,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
    )
    hf_logging.disable_progress_bar()  # a bar for writing one 4 MB file is noise
    try:
        model.save_pretrained(out)
    finally:
        hf_logging.enable_progress_bar()
    tokenizer.save_pretrained(out)
    return out


def _train_tokenizer(vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    corpus = []
    for task in load_tasks("train"):  # code-heavy text, so the tokenizer splits Python sensibly
        corpus += [task.prompt, task.solution or "", *task.tests]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>", "<think>", "</think>"],
        chat_template=CHAT_TEMPLATE,
        model_max_length=TINY_SHAPE["max_position_embeddings"],
    )


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
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ConfigError(f"model.name_or_path: tokenizer of '{cfg.name_or_path}' has neither pad nor eos token")
        tokenizer.pad_token = tokenizer.eos_token
    if tokenizer.chat_template is None:
        raise ConfigError(f"model.name_or_path: '{cfg.name_or_path}' has no chat template; use an instruct model")
    return tokenizer


def build_model_and_tokenizer(cfg: ModelConfig) -> tuple[Any, Any]:
    """Load the policy model (explicit dtype) and its tokenizer from a hub id or a local directory."""
    if cfg.backend != "hf" or cfg.quantization != "none":
        # The unsloth and bitsandbytes paths arrive with the training issue; refuse rather than silently ignore.
        raise ConfigError(
            f"model.backend={cfg.backend}, model.quantization={cfg.quantization}: not supported by "
            "this version yet (only backend 'hf' without quantization)"
        )
    from transformers import AutoModelForCausalLM

    tokenizer = load_tokenizer(cfg)
    kwargs: dict[str, Any] = {"dtype": resolve_dtype(cfg.dtype), "trust_remote_code": cfg.trust_remote_code}
    if cfg.attn_implementation:
        kwargs["attn_implementation"] = cfg.attn_implementation
    model = _from_pretrained(AutoModelForCausalLM, cfg, "", **kwargs)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def _from_pretrained(auto_class, cfg: ModelConfig, what: str, **kwargs):
    """`auto_class.from_pretrained` with a missing or broken model turned into a one-line ConfigError."""
    try:
        return auto_class.from_pretrained(cfg.name_or_path, revision=cfg.revision, **kwargs)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"model.name_or_path: cannot load {what}'{cfg.name_or_path}': {str(exc).splitlines()[0]}"
        ) from None


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())
