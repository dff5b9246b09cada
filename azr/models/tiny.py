"""The tiny offline model for tests and the CPU demo: a random-init Qwen2 causal LM (head_dim 32, about 1 M
parameters) with a byte-level BPE tokenizer trained here on the shipped training tasks' prompts and reference
solutions (not their tests) and a ChatML chat template.

It loads with the Auto classes and vLLM and is byte-identical for a given seed. Nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

from azr.data import load_tasks

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]

# ChatML, as Qwen uses it. `enable_thinking=false` pre-fills an empty think block (the Qwen3 convention), so the
# same switch works for the tiny model and for real thinking models. With `tools=`, the schemas go into the system
# turn and calls are Hermes-style `<tool_call>{"name", "arguments"}</tool_call>` blocks (what vLLM's `hermes` parser
# reads), results come back in a user turn as `<tool_response>` blocks, and `reasoning_content` is rendered as a
# think block. Assistant turns are wrapped in `{% generation %}` (up to and including `<|im_end|>`) for TRL's
# assistant-only loss. Each message renders the same whatever follows it (prefix-preserving, as the episode runner
# needs), and a conversation without tools, calls or reasoning renders byte for byte as the plain ChatML template did.
CHAT_TEMPLATE = (
    "{%- if tools -%}"
    "{{ '<|im_start|>system\\n' }}"
    "{%- if messages[0]['role'] == 'system' -%}{{ messages[0]['content'] + '\\n\\n' }}{%- endif -%}"
    "{{ '# Tools\\nYou may call the functions below. Their signatures, one JSON object a line:\\n<tools>' }}"
    "{%- for tool in tools -%}{{ '\\n' + (tool | tojson) }}{%- endfor -%}"
    "{{ '\\n</tools>\\nTo call one, write a JSON object with its name and arguments between tags:\\n"
    '<tool_call>\\n{"name": NAME, "arguments": {ARGUMENTS}}\\n</tool_call>\\n'
    "Each result comes back between <tool_response> tags.<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'assistant' -%}"
    "{{ '<|im_start|>assistant\\n' }}"
    "{%- generation -%}"
    "{%- if message['reasoning_content'] is string -%}"
    "{{ '<think>\\n' + message['reasoning_content'].strip('\\n') + '\\n</think>\\n\\n' }}"
    "{%- endif -%}"
    "{{ message['content'] if message['content'] is string else '' }}"
    "{%- for call in message['tool_calls'] or [] -%}"
    "{%- set call = call['function'] if call['function'] is defined else call -%}"
    "{%- if not loop.first or message['content'] -%}{{ '\\n' }}{%- endif -%}"
    "{{ '<tool_call>\\n{\"name\": \"' + call['name'] + '\", \"arguments\": ' }}"
    "{{ call['arguments'] if call['arguments'] is string else (call['arguments'] | tojson) }}"
    "{{ '}\\n</tool_call>' }}"
    "{%- endfor -%}"
    "{{ '<|im_end|>' }}"
    "{%- endgeneration -%}"
    "{{ '\\n' }}"
    "{%- elif message['role'] == 'tool' -%}"
    "{%- if loop.first or messages[loop.index0 - 1]['role'] != 'tool' -%}{{ '<|im_start|>user' }}{%- endif -%}"
    "{{ '\\n<tool_response>\\n' + message['content'] + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1]['role'] != 'tool' -%}{{ '<|im_end|>\\n' }}{%- endif -%}"
    "{%- elif not (tools and loop.first and message['role'] == 'system') -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{ '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and not enable_thinking -%}{{ '<think>\\n\\n</think>\\n\\n' }}{%- endif -%}"
    "{%- endif -%}"
)

# How transformers' `tokenizer.parse_response` reads a generated assistant turn of the template above back into a
# message (`azr.tools.parse_turn` calls it for the tool environment): an optional think block, then the visible
# content, and any number of Hermes-style call blocks whose JSON becomes an OpenAI `tool_calls` entry, up to the end
# of turn. It is the same reading TRL ships for Qwen3's ChatML (`tests/models/test_tiny.py` pins the two together),
# written out here because the template it parses is this module's.
RESPONSE_TEMPLATE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "reasoning_content": {"open": "<think>", "close_pattern": r"</think>\s*", "content": "text"},
        "tool_calls": {
            "open": "<tool_call>",
            "close_pattern": r"</tool_call>\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"<\|im_end\|>\s*", "content": "text"},
    },
}

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

    # What the policy reads and writes: each training task's prompt and reference solution (code-heavy text, so the
    # tokenizer splits Python sensibly). Not the tests: the model never sees them, and strengthening a task's tests
    # must not change the tokenizer, and with it every seeded sample of the tiny model.
    corpus = []
    for task in load_tasks("train"):
        corpus += [task.prompt, task.solution or ""]
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
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>", "<think>", "</think>"],
        chat_template=CHAT_TEMPLATE,
        model_max_length=TINY_SHAPE["max_position_embeddings"],
    )
    tokenizer.response_template = RESPONSE_TEMPLATE  # saved in tokenizer_config.json with the chat template
    return tokenizer
