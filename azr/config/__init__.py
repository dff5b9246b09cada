"""Recipes: the section dataclasses, loading with `--set` overrides and validation, saving the resolved form, and the
whole-recipe check of a training run (`check_recipe`, `check_batch`); the translation into TRL's classes is
`azr.training`'s.

The face of the config package: other packages import from here only. Nothing in it imports torch, transformers or
trl at module level.
"""

from azr.config.absolute_zero import DEFAULT_IMPORTS, AbsoluteZeroConfig
from azr.config.adapter import AdapterConfig, vllm_lora_problem
from azr.config.environments import (
    FEEDBACK,
    KINDS,
    SINGLE,
    TOOLS,
    EnvironmentKind,
    environment_named,
    environment_of,
    gen_environment_of,
)
from azr.config.evaluate import EvalCommandConfig, eval_command_config, eval_flag_help, parse_ks
from azr.config.feedback import FeedbackConfig, RolloutsConfig
from azr.config.heldout import HeldOutConfig
from azr.config.load import (
    MANAGED_TRAINER_FIELDS,
    PATH_FIELDS,
    check_packages,
    dump_yaml,
    load_config,
    save_config,
)
from azr.config.model import ModelConfig
from azr.config.recipe import (
    RUN_MARKER,
    Batch,
    check_batch,
    check_groups,
    check_hidden_tests,
    check_output_dir,
    check_recipe,
    prompt_groups,
    sequence_lengths,
    steps_per_generation,
)
from azr.config.sampling import CurriculumConfig, SamplingConfig
from azr.config.schema import fields_markdown, parse_pairs
from azr.config.sections import (
    AzrConfig,
    DataConfig,
    LoggingConfig,
    RemoteSandboxConfig,
    RewardSpec,
    SandboxConfig,
    SftConfig,
    ThinkingConfig,
)
from azr.config.selfplay import EndpointConfig, SelfPlayConfig, TeacherAssistConfig, TeacherConfig, check_base_url
from azr.config.tools import TOOL_NAMES, GenConfig, PythonToolConfig, ToolsConfig, WebToolConfig
from azr.config.vllm import VLLM_LORA_RANKS, VllmConfig, check_vllm_config, lora_refusal, served_lora_rank
from azr.errors import ConfigError

__all__ = [
    "DEFAULT_IMPORTS",
    "FEEDBACK",
    "KINDS",
    "MANAGED_TRAINER_FIELDS",
    "PATH_FIELDS",
    "RUN_MARKER",
    "SINGLE",
    "TOOLS",
    "TOOL_NAMES",
    "VLLM_LORA_RANKS",
    "AbsoluteZeroConfig",
    "AdapterConfig",
    "AzrConfig",
    "Batch",
    "ConfigError",
    "CurriculumConfig",
    "DataConfig",
    "EndpointConfig",
    "EnvironmentKind",
    "EvalCommandConfig",
    "FeedbackConfig",
    "GenConfig",
    "HeldOutConfig",
    "LoggingConfig",
    "ModelConfig",
    "PythonToolConfig",
    "RemoteSandboxConfig",
    "RewardSpec",
    "RolloutsConfig",
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
    "check_base_url",
    "check_batch",
    "check_groups",
    "check_hidden_tests",
    "check_output_dir",
    "check_packages",
    "check_recipe",
    "check_vllm_config",
    "dump_yaml",
    "environment_named",
    "environment_of",
    "eval_command_config",
    "eval_flag_help",
    "fields_markdown",
    "gen_environment_of",
    "load_config",
    "lora_refusal",
    "parse_ks",
    "parse_pairs",
    "prompt_groups",
    "save_config",
    "sequence_lengths",
    "served_lora_rank",
    "steps_per_generation",
    "vllm_lora_problem",
]
