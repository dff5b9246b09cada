"""Where azr's own generation backend plugs into TRL's GRPOTrainer (adapter mode's `azr.serving.LoraSync`).

TRL 1.16 generates through `self.vllm_generation` when `self.use_vllm` is set: `_generate_single_turn` calls its
`sync_weights()` whenever `state.global_step` differs from `_last_loaded_step` and then its `generate(prompts=token
ids, images=, num_generations=, profiler=)`, and the loss applies the importance-sampling correction to the logprobs
it returns. That contract is private to TRL; tests/training/test_generation.py pins it. The trainer is built with
`use_vllm=False` (TRL would start its own vLLM otherwise) and switched over here.
"""

from __future__ import annotations

from typing import Any

from azr.errors import NotAvailableError


def use_generation_backend(trainer: Any, backend: Any) -> None:
    """Make `trainer` (a GRPOTrainer) generate through `backend` (`sync_weights`, `generate`) like TRL's vLLM."""
    deepspeed = getattr(trainer.accelerator.state, "deepspeed_plugin", None)
    if trainer.is_fsdp_enabled or (deepspeed is not None and deepspeed.zero_stage == 3):
        # The main process saves the adapter it holds; with sharded parameters it holds only its shard.
        raise NotAvailableError("vllm.mode=adapter: not with FSDP or DeepSpeed ZeRO-3; use DDP or vllm.mode=server")
    trainer.vllm_generation = backend
    trainer.use_vllm = True
    # Server mode is how TRL reads the backend everywhere it asks (the tool loop's context limit, for one).
    trainer.vllm_mode = "server"
    trainer._last_loaded_step = -1  # the first batch syncs the adapter as it starts
