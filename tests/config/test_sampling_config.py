"""The `sampling:` and `curriculum:` sections: loading, and the one-line errors that name the field. (Their checks
against the trainer's batch are `azr.config.check_groups`', tested in tests/config/test_trainer_args.py.)"""

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
