"""Memory before work: a training recipe's peak memory on the CPU, estimated from the model's shape (its config.json)
and the batch, before the model loads, so a recipe that cannot fit this machine is told so with the knobs that bring
it down, rather than killed by the kernel minutes into its first step with no word.

The estimate counts what a GRPO step holds at its peak (float32 unless the model's dtype says otherwise):
- the weights, and the optimizer's two Adam moments and a gradient for every trained parameter;
- the activations autograd keeps for the backward pass of one micro-batch: per token and layer about
  8 hidden-size and 4 feed-forward-size values (every projection's input and output, the norms, the gated
  activation), only for the layers the backward pass reaches (all with full training; from the lowest adapted layer
  up with `model.adapter.top_layers`), or one hidden vector per layer plus one layer whole with gradient
  checkpointing;
- the logits over the vocabulary: TRL's fused LM head scores every position of the micro-batch on the CPU (prompt
  included), in tiles of up to 32,768 positions, and its backward holds about five copies of a tile's logits (the
  logits, their temperature-scaled softmax, the entropy's terms, their gradients);
- the runtime: Python, torch, transformers, TRL and peft imported (0.5 GB) and the allocator's slack;
- with adapter mode's vLLM server on the same machine (no GPU), the server's own copy of the weights, its KV cache
  (`VLLM_CPU_KVCACHE_SPACE`) and about 5 GiB of its own (measured with LoRA enabled).
Measured (2026-12-02, torch 2.13, TRL 1.16, SmolLM2-135M with the CPU recipe's adapter, one micro-batch's forward
and backward through TRL's fused head, peak resident memory): 9.3 GB for 8 sequences of 656 tokens and 5.8 GB for 4,
against 9.3 and 5.6 estimated; autograd's saved activations, counted by a saved-tensors hook, came to 10.2 thousand
values per token and layer (the estimate's 8 x 576 + 4 x 1,536 = 10.8 thousand). An estimate all the same: the
prompt length's spread and TRL's own buffers are not in it.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path

from azr.config import ModelConfig, VllmConfig
from azr.inputs import load_json

log = logging.getLogger(__name__)

GIB = 1 << 30
# A vLLM CPU server's API, engine and worker processes beyond its weights and KV cache, with LoRA enabled: the shipped
# CPU recipe's server peaked at 8.1 GB of resident memory over its processes with a 2 GiB cache (docs/real-model.md)
SERVER_OVERHEAD_GIB = 5.0
DEFAULT_KV_GIB = 4.0  # vLLM's CPU default for VLLM_CPU_KVCACHE_SPACE
RUNTIME_GIB = 1.2  # the interpreter, its libraries and the allocator's slack: the measured peaks' intercept
LOGIT_TILE = 32768  # positions per tile of TRL's fused LM head (trl.trainer.utils, TRL 1.16)
LOGIT_COPIES = 5  # copies of a tile's logits at the head's backward: the measured peaks' slope, less the activations


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per part of a step's peak, and their sum."""

    parts: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.parts.values())

    def describe(self) -> str:
        shown = ", ".join(f"{name} {value / GIB:.1f}" for name, value in self.parts.items() if value >= 0.05 * GIB)
        return f"{self.total / GIB:.1f} GiB ({shown})"


def model_shape(name_or_path: str) -> dict | None:
    """The local model's config.json, or None where there is none to read (a hub id, a GGUF file)."""
    config = Path(name_or_path).expanduser() / "config.json"
    try:
        return load_json(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def estimate_training_memory(
    shape: dict,
    model: ModelConfig,
    micro_batch: int,
    sequence_tokens: int,
    vllm: VllmConfig | None = None,
) -> MemoryEstimate | None:
    """The peak estimate (see the module docstring) for `micro_batch` sequences of `sequence_tokens` tokens."""
    text = shape.get("text_config", shape)
    try:
        hidden, layers = int(text["hidden_size"]), int(text["num_hidden_layers"])
        vocab = int(text["vocab_size"])
        ffn = int(text.get("intermediate_size") or 4 * hidden)
    except (KeyError, TypeError, ValueError):
        return None
    heads = int(text.get("num_attention_heads") or 1)
    kv = int(text.get("num_key_value_heads") or heads)
    head_dim = int(text.get("head_dim") or hidden // max(heads, 1))
    per_layer = 4 * hidden * hidden + 2 * hidden * kv * head_dim + 3 * hidden * ffn
    embed = vocab * hidden * (1 if text.get("tie_word_embeddings", shape.get("tie_word_embeddings", True)) else 2)
    params = layers * per_layer + embed
    width = 2 if model.dtype in ("bfloat16", "float16") else 4
    adapter = model.adapter
    if adapter.enabled:
        reached = min(adapter.top_layers or layers, layers) if adapter.kind == "lora" else layers
        rank = adapter.r if adapter.kind == "lora" else 1
        trained = reached * rank * (4 * (hidden + hidden) + 3 * (hidden + ffn))  # every linear layer's A and B
    else:
        reached, trained = layers, params
    tokens = micro_batch * sequence_tokens
    if model.gradient_checkpointing:
        activations = tokens * (reached * hidden + 8 * hidden + 4 * ffn) * width
    else:
        activations = tokens * reached * (8 * hidden + 4 * ffn) * width
    parts = {
        "weights": params * width,
        "optimizer and gradients": trained * 4 * 3,
        "activations": activations,
        "logits": LOGIT_COPIES * min(tokens, LOGIT_TILE) * vocab * 4,
        "runtime": RUNTIME_GIB * GIB,
    }
    if vllm is not None and vllm.mode == "adapter":
        kv_gib = _number(vllm.env.get("VLLM_CPU_KVCACHE_SPACE")) or _number(os.environ.get("VLLM_CPU_KVCACHE_SPACE"))
        parts["vLLM server"] = params * 4 + ((kv_gib or DEFAULT_KV_GIB) + SERVER_OVERHEAD_GIB) * GIB
    return MemoryEstimate(parts)


def machine_memory() -> int | None:
    """Bytes of RAM on this machine (its cgroup's limit where that is lower)."""
    total = None
    with contextlib.suppress(ValueError, OSError, AttributeError):
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit.isdigit():
            total = min(total or math.inf, int(limit))
    except OSError:
        pass
    return int(total) if total else None


def _number(value: object) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
