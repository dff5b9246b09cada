"""The `model:` section: which policy trains, how its weights load (dtype, backend, quantization, attention kernel)
and the adapter trained on it (`azr.config.adapter`). Loading itself is `azr.models`'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from azr.config.adapter import AdapterConfig
from azr.config.schema import field


@dataclass
class ModelConfig:
    name_or_path: str = field(
        "",
        "Hub id (e.g. Qwen/Qwen2.5-Coder-7B-Instruct) or local directory; a path starting with ./ ../ / or ~, "
        "or one that exists beside the config file, is resolved relative to the config file.",
    )
    revision: str | None = field(None, "Hub revision (branch, tag or commit) to load.")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = field(
        "auto", "Weight dtype; 'auto' is bfloat16 on a GPU that supports it and float32 on CPU."
    )
    backend: Literal["hf", "unsloth"] = field(
        "hf", "Model loader: transformers ('hf') or unsloth (GPU, optional extra)."
    )
    quantization: Literal["none", "4bit", "8bit"] = field("none", "Load the base model quantized with bitsandbytes.")
    trust_remote_code: bool = field(False, "Allow model code from the hub repository to run (transformers flag).")
    attn_implementation: str | None = field(
        None, "Attention kernel, e.g. 'sdpa' or 'flash_attention_2'; default lets transformers choose."
    )
    gradient_checkpointing: bool = field(True, "Recompute activations in the backward pass to save memory.")
    adapter: AdapterConfig = field(factory=AdapterConfig, help="The adapter trained on the base (peft).")
