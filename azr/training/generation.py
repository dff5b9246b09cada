"""Where azr's own generation backend plugs into TRL's GRPOTrainer (adapter mode's `azr.serving.LoraSync`).

The switch itself touches TRL's private generation attributes, so it is `azr.rollouts.TrainerBatches.use_backend`
(the TRL adapter); this module decides when it is allowed. The loss applies TRL's importance-sampling correction to
the logprobs the backend returns; tests/training/test_generation.py exercises that on the tiny model. The trainer is
built with `use_vllm=False` (TRL would start its own vLLM otherwise) and switched over here.
"""

from __future__ import annotations

from typing import Any

from azr.errors import NotAvailableError
from azr.rollouts import TrainerBatches


def use_generation_backend(trainer: Any, backend: Any) -> None:
    """Make `trainer` (a GRPOTrainer) generate through `backend` (`sync_weights`, `generate`) like TRL's vLLM."""
    deepspeed = getattr(trainer.accelerator.state, "deepspeed_plugin", None)
    if trainer.is_fsdp_enabled or (deepspeed is not None and deepspeed.zero_stage == 3):
        # The main process saves the adapter it holds; with sharded parameters it holds only its shard.
        raise NotAvailableError("vllm.mode=adapter: not with FSDP or DeepSpeed ZeRO-3; use DDP or vllm.mode=server")
    TrainerBatches(trainer).use_backend(backend)
