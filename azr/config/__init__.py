"""Recipes: the section dataclasses, loading with `--set` overrides and validation, and saving the resolved form.

The face of the config package: other packages import from here only. Nothing in it imports torch, transformers or
trl at module level.
"""

from azr.config.load import (
    MANAGED_TRAINER_FIELDS,
    PATH_FIELDS,
    dump_yaml,
    load_config,
    save_config,
    validate_grpo,
)
from azr.config.sampling import CurriculumConfig, SamplingConfig
from azr.config.schema import fields_markdown, parse_pairs
from azr.config.sections import (
    AzrConfig,
    DataConfig,
    LoggingConfig,
    LoraConfig,
    ModelConfig,
    RewardSpec,
    SandboxConfig,
    SftConfig,
    ThinkingConfig,
    VllmConfig,
)
from azr.config.selfplay import EndpointConfig, SelfPlayConfig, TeacherAssistConfig, TeacherConfig
from azr.errors import ConfigError

__all__ = [
    "MANAGED_TRAINER_FIELDS",
    "PATH_FIELDS",
    "AzrConfig",
    "ConfigError",
    "CurriculumConfig",
    "DataConfig",
    "EndpointConfig",
    "LoggingConfig",
    "LoraConfig",
    "ModelConfig",
    "RewardSpec",
    "SamplingConfig",
    "SandboxConfig",
    "SelfPlayConfig",
    "SftConfig",
    "TeacherAssistConfig",
    "TeacherConfig",
    "ThinkingConfig",
    "VllmConfig",
    "dump_yaml",
    "fields_markdown",
    "load_config",
    "parse_pairs",
    "save_config",
    "validate_grpo",
]
