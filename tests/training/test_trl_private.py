"""The contract between batch composition and the installed TRL, pinned without a model: the private methods
`azr.training.trl.private` calls (and the ones `AZRGRPOTrainer` overrides) exist with the parameters it passes, and
every tensor key TRL's `_generate_and_score_completions` may put in its output is one `azr.rollouts.tensors`' batch
layout classifies (text prompts) or one that marks a multimodal batch, which dynamic sampling refuses. The same contract
is exercised on the tiny model in tests/rollouts/test_dynamic.py and tests/training/test_absolute_zero_trainer.py.
"""

from __future__ import annotations

import inspect
import re

import pytest

trl = pytest.importorskip("trl")

from azr.rollouts.tensors import KNOWN, LEFT_PADDED, RIGHT_PADDED  # noqa: E402

# The keys TRL adds only for image prompts: not per-row-splittable, refused by `split_groups`.
MULTIMODAL = {
    "pixel_values",
    "image_grid_thw",
    "image_position_ids",
    "image_sizes",
    "num_images",
    "num_tiles",
    "pixel_attention_mask",
    "spatial_shapes",
    "token_type_ids",
    "mm_token_type_ids",
}


def _params(name: str) -> list[str]:
    return list(inspect.signature(getattr(trl.GRPOTrainer, name)).parameters)


@pytest.mark.parametrize(
    ("method", "leading"),
    [
        # called by TrainerBatches
        ("_get_per_token_logps_and_entropies", ["self", "model", "input_ids", "attention_mask", "logits_to_keep"]),
        ("_tokenize_prompts", ["self", "prompts"]),
        ("_generate_single_turn", ["self", "prompt_ids", "images", "multimodal_fields", "num_generations"]),
        # overridden by AZRGRPOTrainer (its `_score_round` calls the first through `super()`)
        ("_generate_and_score_completions", ["self", "inputs"]),
        ("_calculate_rewards", ["self", "inputs", "prompts", "completions", "completion_ids_list"]),
        ("_get_train_sampler", ["self", "dataset"]),
        ("_prepare_inputs", ["self", "generation_batch"]),
    ],
)
def test_the_private_methods_used_exist_with_the_parameters_passed(method, leading):
    assert _params(method)[: len(leading)] == leading
    if method == "_get_per_token_logps_and_entropies":
        assert "batch_size" in _params(method)  # passed by keyword


def test_every_key_trls_batch_may_hold_is_known_or_multimodal():
    source = inspect.getsource(trl.GRPOTrainer._generate_and_score_completions)
    assigned = set(re.findall(r'output\["(\w+)"\]', source))
    returned = set(re.findall(r'"(\w+)": ', source[source.rfind("output = {") :].split("}")[0]))
    assert {"prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages"} <= returned
    assert (assigned | returned) - KNOWN <= MULTIMODAL, (assigned | returned) - KNOWN - MULTIMODAL
    assert LEFT_PADDED.isdisjoint(RIGHT_PADDED)


def test_the_trainer_attributes_the_adapter_reads_exist():
    """Set in GRPOTrainer.__init__: checked in its source, as building one needs a model."""
    source = inspect.getsource(trl.GRPOTrainer.__init__)
    for name in ("num_generations", "reward_weights", "pad_to_multiple_of"):
        assert re.search(rf"self\.{name}\s*=", source), name


def test_the_generation_backend_attributes_are_trls_and_it_syncs_on_a_new_step():
    """`TrainerBatches.use_backend` / `sync_backend` set what TRL reads before it generates: `vllm_generation`,
    `use_vllm`, `vllm_mode` and `_last_loaded_step`, which `_generate_single_turn` compares with the step."""
    init = inspect.getsource(trl.GRPOTrainer.__init__)
    for name in ("use_vllm", "vllm_mode", "vllm_generation", "_last_loaded_step"):
        assert re.search(rf"self\.{name}\s*=", init), name
    turn = inspect.getsource(trl.GRPOTrainer._generate_single_turn)
    assert "self.state.global_step != self._last_loaded_step" in turn
    assert "self.vllm_generation.sync_weights()" in turn
    assert "self.vllm_generation.generate(" in turn


def test_the_backends_request_settings_an_evaluation_sets_for_one_call_are_read_per_call():
    """`TrainerBatches.sample_backend` sets TRL's `VLLMGeneration.temperature` and `max_completion_length` for one
    call: both are set in its `__init__` and read again by each `generate`."""
    from trl.generation.vllm_generation import VLLMGeneration

    init, generate = inspect.getsource(VLLMGeneration.__init__), inspect.getsource(VLLMGeneration.generate)
    for name in ("temperature", "max_completion_length"):
        assert re.search(rf"self\.{name}\s*=", init), name
        assert re.search(rf"=\s*self\.{name}\b", generate), name


def test_the_rollout_function_and_the_correction_asynchronous_grpo_relies_on():
    """Asynchronous GRPO sets `rollout_func` after construction and reads the correction's settings: TRL's
    `_generate` calls `self.rollout_func(prompts, self)` after syncing the backend on a new step, takes its
    prompt_ids / completion_ids / logprobs, merges the other keys into the rows as columns, and compares the
    sampler's log-probs with the policy's through `vllm_importance_sampling_*`."""
    init = inspect.getsource(trl.GRPOTrainer.__init__)
    for name in (
        "rollout_func",
        "vllm_importance_sampling_correction",
        "vllm_importance_sampling_mode",
        "vllm_importance_sampling_clip_min",
        "vllm_importance_sampling_clip_max",
    ):
        assert re.search(rf"self\.{name}\s*=", init), name
    generate = inspect.getsource(trl.GRPOTrainer._generate)
    assert "self.rollout_func(prompts, self)" in generate
    assert 'output["prompt_ids"], output["completion_ids"], output["logprobs"]' in generate
    assert "self.state.global_step != self._last_loaded_step" in generate
    # an episode's environment tokens: `env_mask` (1 = the model's token) becomes TRL's tool mask, out of the loss
    assert 'tool_mask = extra_fields.pop("env_mask", None)' in generate
    scored = inspect.getsource(trl.GRPOTrainer._generate_and_score_completions)
    assert "inp[key] = values[i]" in scored  # extra fields become row columns (our policy_version)
    assert "old_per_token_logps - sampling_per_token_logps" in scored


def test_the_logged_advantages_are_a_list_trl_extends_per_batch():
    init = inspect.getsource(trl.GRPOTrainer.__init__)
    assert re.search(r'self\._logs = \{[^}]*"advantages"', init, re.S)
    scored = inspect.getsource(trl.GRPOTrainer._generate_and_score_completions)
    assert 'self._logs["advantages"].extend(' in scored


class _Backend:
    def __init__(self):
        self.syncs = 0

    def sync_weights(self):
        self.syncs += 1


class _Trainer:
    """The few attributes of a GRPOTrainer the generation view reads and writes."""

    def __init__(self):
        self.state = type("State", (), {"global_step": 0})()
        self.use_vllm, self.vllm_generation, self._logs = False, None, {"advantages": [9.0, 0.5, -0.5]}


def test_the_view_switches_generation_to_a_backend_and_syncs_it_once_per_step():
    from azr.training.trl.private import TrainerBatches

    trainer, backend = _Trainer(), _Backend()
    view = TrainerBatches(trainer)
    assert view.backend is None  # the policy's own generate
    view.use_backend(backend)
    assert view.backend is backend and trainer.use_vllm and trainer.vllm_mode == "server"
    view.sync_backend()
    view.sync_backend()
    assert backend.syncs == 1 and trainer._last_loaded_step == 0  # TRL will not load them again for step 0
    trainer.state.global_step = 1
    view.sync_backend()
    assert backend.syncs == 2


def test_replacing_logged_advantages_keeps_earlier_batches():
    from azr.training.trl.private import TrainerBatches

    trainer = _Trainer()
    TrainerBatches(trainer).replace_logged_advantages([1.0, -1.0])
    assert trainer._logs["advantages"] == [9.0, 1.0, -1.0]
