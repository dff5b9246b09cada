"""Training: `run_train` (the linear recipe over a `RunContext`: SFT warm start, GRPO or Absolute Zero's GRPO, the
before/after measurement), the trainer arguments and the checks a recipe passes before any slow work, the trainer,
callbacks, run state and model card. The face of the training package.
"""

from azr.training.context import RunContext, check_sandbox, fit_tasks
from azr.training.grpo import grpo_dataset, grpo_rows
from azr.training.preflight import preflight
from azr.training.ranks import Ranks
from azr.training.run import run_train
from azr.training.state import RunState, mean_rate, write_summary
from azr.training.trl import (
    TrainerArgs,
    build_trainer_args,
    check_grpo_inputs,
    grpo_args,
    grpo_fields,
    on_gpu,
    reward_weights,
    send_server_key,
    sft_args,
    trl_server,
    validate_grpo,
)

# Heavy (torch, transformers, trl at import): loaded on first use, so importing this package stays cheap.
_LAZY = {
    "AZRGRPOTrainer": "azr.training.trl.trainer",
    "MetricsCallback": "azr.training.callbacks",
    "find_near_misses": "azr.training.sft",
    "run_sft": "azr.training.trl.sft",
    "sft_dataset": "azr.training.sft",
}

__all__ = [
    "AZRGRPOTrainer",
    "MetricsCallback",
    "Ranks",
    "RunContext",
    "RunState",
    "TrainerArgs",
    "build_trainer_args",
    "check_grpo_inputs",
    "check_sandbox",
    "find_near_misses",
    "fit_tasks",
    "grpo_args",
    "grpo_dataset",
    "grpo_fields",
    "grpo_rows",
    "mean_rate",
    "on_gpu",
    "preflight",
    "reward_weights",
    "run_sft",
    "run_train",
    "send_server_key",
    "sft_args",
    "sft_dataset",
    "trl_server",
    "validate_grpo",
    "write_summary",
]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
