"""Models: loading the policy (HF, LoRA/QLoRA, unsloth) and the tiny offline model used by tests and the demo.

The face of the models package; importing it stays cheap (torch and friends are imported inside functions).
"""

from azr.models.loading import (
    build_model_and_tokenizer,
    count_parameters,
    load_tokenizer,
    lora_config,
    resolve_dtype,
)
from azr.models.noise import quiet_third_party
from azr.models.source import check_model
from azr.models.tiny import CHAT_TEMPLATE, build_tiny_model

__all__ = [
    "CHAT_TEMPLATE",
    "build_model_and_tokenizer",
    "build_tiny_model",
    "check_model",
    "count_parameters",
    "load_tokenizer",
    "lora_config",
    "quiet_third_party",
    "resolve_dtype",
]
