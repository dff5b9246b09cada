"""Recipes: the section dataclasses, loading with `--set` overrides and validation, and saving the resolved form.

The face of the config package: other packages import from here only. Nothing in it imports torch, transformers or
trl at module level.
"""

from azr.config.absolute_zero import DEFAULT_IMPORTS, AbsoluteZeroConfig
from azr.config.adapter import AdapterConfig, vllm_lora_problem
from azr.config.heldout import HeldOutConfig
from azr.config.load import (
    MANAGED_TRAINER_FIELDS,
    PATH_FIELDS,
    dump_yaml,
    load_config,
    save_config,
)
from azr.config.passthrough import validate_grpo
from azr.config.sampling import CurriculumConfig, SamplingConfig
from azr.config.schema import fields_markdown, parse_pairs
from azr.config.sections import (
    AzrConfig,
    DataConfig,
    LoggingConfig,
    ModelConfig,
    RewardSpec,
    SandboxConfig,
    SftConfig,
    ThinkingConfig,
)
from azr.config.selfplay import EndpointConfig, SelfPlayConfig, TeacherAssistConfig, TeacherConfig
from azr.config.tools import TOOL_NAMES, GenConfig, PythonToolConfig, ToolsConfig, WebToolConfig
from azr.config.vllm import VLLM_LORA_RANKS, VllmConfig, check_vllm_config, lora_refusal, served_lora_rank
from azr.errors import ConfigError

__all__ = [
    "DEFAULT_IMPORTS",
    "MANAGED_TRAINER_FIELDS",
    "PATH_FIELDS",
    "TOOL_NAMES",
    "VLLM_LORA_RANKS",
    "AbsoluteZeroConfig",
    "AdapterConfig",
    "AzrConfig",
    "ConfigError",
    "CurriculumConfig",
    "DataConfig",
    "EndpointConfig",
    "GenConfig",
    "HeldOutConfig",
    "LoggingConfig",
    "ModelConfig",
    "PythonToolConfig",
    "RewardSpec",
    "SamplingConfig",
    "SandboxConfig",
    "SelfPlayConfig",
    "SftConfig",
    "TeacherAssistConfig",
    "TeacherConfig",
    "ThinkingConfig",
    "ToolsConfig",
    "VllmConfig",
    "WebToolConfig",
    "check_vllm_config",
    "dump_yaml",
    "fields_markdown",
    "load_config",
    "lora_refusal",
    "parse_pairs",
    "save_config",
    "served_lora_rank",
    "validate_grpo",
    "vllm_lora_problem",
]
