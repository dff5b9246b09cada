"""TRL's adapter, the only door to TRL: azr's GRPOTrainer (`AZRGRPOTrainer`, and Absolute Zero's), the one module
that touches TRL's private trainer API (`private`, pinned by tests/training/test_trl_private.py), the translation of
a checked recipe into TRL's GRPOConfig and SFTConfig with TRL's own checks named in the recipe's terms
(`trainer_args`, `contract`, `passthrough`, and `args`: the arguments a run trains with), TRL's own vLLM modes
(`vllm`), where azr's generation backend plugs into TRL (`generation`) and the SFT warm start's trainer (`sft`).
No module of azr outside this folder imports trl (tests/test_layering.py). Importing it stays cheap: TRL is loaded
when a trainer is built or a config checked.
"""

from azr.training.trl.args import TrainerArgs, build_trainer_args, on_gpu, reward_weights
from azr.training.trl.passthrough import validate_grpo
from azr.training.trl.trainer_args import check_grpo_inputs, grpo_args, sft_args
from azr.training.trl.vllm import grpo_fields, send_server_key, trl_server

__all__ = [
    "TrainerArgs",
    "build_trainer_args",
    "check_grpo_inputs",
    "grpo_args",
    "grpo_fields",
    "on_gpu",
    "reward_weights",
    "send_server_key",
    "sft_args",
    "trl_server",
    "validate_grpo",
]
