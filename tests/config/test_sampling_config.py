"""The `sampling:` and `curriculum:` sections: loading, and the one-line errors that name the field before anything
slow starts."""

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
        (
            ["sampling.dynamic=true", "grpo.num_generations=1", "grpo.per_device_train_batch_size=4"],
            "sampling.dynamic: needs grpo.num_generations >= 2 (a group of one has no difference)",
        ),
        (
            ["sampling.dynamic=true", "grpo.num_generations=4", "grpo.per_device_train_batch_size=6"],
            "sampling.dynamic: a process's generation batch must be whole prompt groups: "
            "grpo.per_device_train_batch_size x steps_per_generation = 6 x 1 is not a multiple of "
            "grpo.num_generations = 4",
        ),
    ],
)
def test_bad_values_name_the_field(overrides, message):
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        load_config(None, MIN + overrides)


def test_whole_groups_count_steps_per_generation_and_the_curriculum_needs_none():
    # 6 rows a step, two steps a generation: 12 rows are three groups of four.
    grpo = ["grpo.num_generations=4", "grpo.per_device_train_batch_size=6"]
    load_config(None, [*MIN, *grpo, "sampling.dynamic=true", "grpo.steps_per_generation=2"])
    load_config(None, [*MIN, *grpo, "sampling.dynamic=true", "grpo.gradient_accumulation_steps=2"])
    # The curriculum composes every process's rows at once: a group may straddle two processes.
    assert load_config(None, [*MIN, *grpo, "curriculum.enabled=true"]).curriculum.enabled
