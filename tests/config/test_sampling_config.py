"""The `sampling:` and `curriculum:` sections: loading, and the one-line errors that name the field. (Their checks
against the trainer's batch are `azr.config.check_groups`', tested in tests/training/test_trainer_args.py.)"""

from __future__ import annotations

import re

import pytest

from azr.config import load_config
from azr.errors import ConfigError

MIN = ["model.name_or_path=m/x"]


def test_the_sections_load_with_their_defaults_off(write):
    cfg = load_config(None, MIN)
    assert not cfg.sampling.dynamic and not cfg.curriculum.enabled and not cfg.curriculum.replay
    recipe = """
model: {name_or_path: m/x}
grpo: {num_generations: 4, per_device_train_batch_size: 8}
sampling: {dynamic: true, oversample: 1.5, max_attempts: 2, carry_over: 0}
curriculum: {enabled: true, weighting: ucb, ucb_c: 0.3, rest_steps: 0}
"""
    cfg = load_config(write("r.yaml", recipe))
    assert (cfg.sampling.oversample, cfg.sampling.max_attempts, cfg.sampling.carry_over) == (1.5, 2, 0)
    assert (cfg.curriculum.weighting, cfg.curriculum.ucb_c, cfg.curriculum.rest_steps) == ("ucb", 0.3, 0)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["sampling.oversample=0.5"], "sampling.oversample: must be >= 1"),
        (["sampling.max_attempts=0"], "sampling.max_attempts: must be > 0"),
        (["curriculum.weighting=greedy"], "curriculum.weighting: expected one of learnability, ucb"),
        (["curriculum.window=0"], "curriculum.window: must be > 0"),
        (["curriculum.unseen_weight=0"], "curriculum.unseen_weight: must be > 0"),
        (["curriculum.replay=true"], "curriculum.replay: needs self_play.enabled: true"),
    ],
)
def test_bad_values_name_the_field(overrides, message):
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        load_config(None, MIN + overrides)


@pytest.mark.parametrize(
    ("sets", "reason"),
    [
        ([], "needs vllm.mode: adapter; HF generate"),
        (["vllm.mode=colocate"], "colocate mode generates inside"),
        (["vllm.mode=server", "vllm.gpus=[1]"], "NCCL sync replaces the served weights"),
        (["vllm.mode=adapter", "mode=absolute_zero"], "not with mode in this version (Absolute Zero generates"),
        (["vllm.mode=adapter", "grpo.vllm_importance_sampling_correction=false"], "without the off-policy correction"),
    ],
)
def test_asynchronous_grpo_is_refused_where_it_cannot_work_with_the_reason(sets, reason):
    from azr.config.recipe import check_staleness

    cfg = load_config(None, [*MIN, "sampling.max_staleness=1", *sets])
    with pytest.raises(ConfigError, match=rf"^sampling\.max_staleness: .*{re.escape(reason)}"):
        check_staleness(cfg)


def test_asynchronous_grpo_takes_dynamic_sampling_the_curriculum_self_play_and_heldout_evaluation():
    from azr.config.recipe import check_staleness

    both = ["self_play.base_url=http://127.0.0.1:9/v1", "self_play.model=m", "data.eval=held-out"]
    sets = ["sampling.dynamic=true", "curriculum.enabled=true", "self_play.enabled=true", "eval.every_steps=2", *both]
    check_staleness(load_config(None, [*MIN, "vllm.mode=adapter", "sampling.max_staleness=1", *sets]))


def test_asynchronous_grpo_loads_for_several_processes(monkeypatch):
    from azr.config.recipe import check_staleness

    monkeypatch.setenv("WORLD_SIZE", "2")  # the main process samples for every rank
    check_staleness(load_config(None, [*MIN, "vllm.mode=adapter", "sampling.max_staleness=1"]))


def test_asynchronous_grpo_in_adapter_mode_loads_and_asks_vllm_for_enough_adapters():
    from azr.config.recipe import check_staleness
    from azr.serving.modes import max_loras

    cfg = load_config(None, [*MIN, "vllm.mode=adapter", "sampling.max_staleness=3"])
    check_staleness(cfg)
    assert max_loras(cfg) == 5
    assert max_loras(load_config(None, MIN)) == 2  # synchronous: the one served and the one loading


def test_asynchronous_grpo_must_allow_at_least_one_generation_ahead():
    from types import SimpleNamespace

    from azr.config.recipe import check_generation_steps

    cfg = load_config(None, [*MIN, "vllm.mode=adapter", "sampling.max_staleness=1"])
    two = SimpleNamespace(steps_per_generation=4, num_iterations=2, gradient_accumulation_steps=4)
    with pytest.raises(ConfigError, match=r"^sampling\.max_staleness: 1 is less than the 2 optimizer steps .* to 2"):
        check_generation_steps(cfg, two)
    one = SimpleNamespace(steps_per_generation=4, num_iterations=1, gradient_accumulation_steps=4)
    check_generation_steps(cfg, one)
