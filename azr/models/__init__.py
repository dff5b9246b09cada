"""Models: loading the policy (HF, quantized, unsloth), its adapter through peft (LoRA, IA³, LN tuning), merging an
adapter into full weights for export, GGUF files imported as plain folders, and the tiny offline model used by tests
and the demo.

The face of the models package; importing it stays cheap (torch and friends are imported inside functions).
"""

from azr.models.adapters import (
    build_peft_config,
    keep_vectors_fp32,
    norm_module_names,
    read_adapter_config,
    trainable_parameters,
)
from azr.models.export import ExportPlan, export_merged, plan_export
from azr.models.gguf import import_gguf, imported_folder, is_gguf_source
from azr.models.loading import (
    build_model_and_tokenizer,
    count_parameters,
    load_policy,
    load_tokenizer,
    resolve_dtype,
    sharded_launch,
)
from azr.models.memory import GIB, MemoryEstimate, estimate_training_memory, machine_memory, model_shape
from azr.models.noise import quiet_third_party
from azr.models.source import check_model, local_source
from azr.models.tiny import CHAT_TEMPLATE, build_tiny_model

__all__ = [
    "CHAT_TEMPLATE",
    "GIB",
    "ExportPlan",
    "MemoryEstimate",
    "build_model_and_tokenizer",
    "build_peft_config",
    "build_tiny_model",
    "check_model",
    "count_parameters",
    "estimate_training_memory",
    "export_merged",
    "import_gguf",
    "imported_folder",
    "is_gguf_source",
    "keep_vectors_fp32",
    "load_policy",
    "load_tokenizer",
    "local_source",
    "machine_memory",
    "model_shape",
    "norm_module_names",
    "plan_export",
    "quiet_third_party",
    "read_adapter_config",
    "resolve_dtype",
    "sharded_launch",
    "trainable_parameters",
]
