"""Where azr's own generation backend (adapter mode's `azr.serving.LoraSync`) plugs into TRL's GRPOTrainer: this
module decides when it is allowed; the switch of TRL's private attributes is `azr.training.trl.private`'s. The
trainer is built with `use_vllm=False` (TRL would start its own vLLM otherwise) and switched over here;
tests/training/test_generation.py exercises it, TRL's importance-sampling correction included, on the tiny model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from azr.errors import NotAvailableError
from azr.training.trl.private import GenerationBackend, TrainerBatches

if TYPE_CHECKING:
    from azr.training.trl.trainer import AZRGRPOTrainer


def use_generation_backend(trainer: AZRGRPOTrainer, backend: GenerationBackend) -> None:
    """Make `trainer` (a GRPOTrainer) generate through `backend` (`sync_weights`, `generate`) like TRL's vLLM."""
    deepspeed = getattr(trainer.accelerator.state, "deepspeed_plugin", None)
    if trainer.is_fsdp_enabled or (deepspeed is not None and deepspeed.zero_stage == 3):
        # The main process saves the adapter it holds; with sharded parameters it holds only its shard.
        raise NotAvailableError("vllm.mode=adapter: not with FSDP or DeepSpeed ZeRO-3; use DDP or vllm.mode=server")
    TrainerBatches(trainer).use_backend(backend)
