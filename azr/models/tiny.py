"""The tiny offline model for tests and the CPU demo: a random-init Qwen2 causal LM (head_dim 32, about 1 M
parameters) with a byte-level BPE tokenizer trained here on the shipped training tasks and a ChatML chat template.

It loads with the Auto classes and vLLM and is byte-identical for a given seed. Nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

from azr.data import load_tasks

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
    bars_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a bar for writing one 4 MB file is noise
    try:
        model.save_pretrained(out)
    finally:
        if bars_on:
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
