"""The random-reward control arm (`reward_control: shuffle`): the recipe's rewards permuted within each batch, one
permutation for every reward function of the batch, so the batch keeps its values while a completion's pay loses its
link to what it wrote; the functions keep their names (TRL's metrics) and the recipe's own rubric is untouched."""

from __future__ import annotations

import pytest

from azr.config import load_config
from azr.errors import ConfigError
from azr.rewards import recipe_rubric, trained_rubric
from azr.rewards.control import Shuffled, batch_permutation


def _reward(name):
    def reward(prompts=None, completions=None, **columns):
        return [float(len(c)) for c in completions]

    reward.__name__ = name
    return reward


COMPLETIONS = [f"answer {'x' * i}" for i in range(16)]


def test_each_function_of_a_batch_moves_its_values_the_same_way():
    first, second = Shuffled(_reward("a"), seed=0), Shuffled(_reward("b"), seed=0)
    values = _reward("a")(completions=COMPLETIONS)
    moved_a, moved_b = first(completions=COMPLETIONS), second(completions=COMPLETIONS)
    assert sorted(moved_a) == sorted(values) and moved_a != values  # the same values, elsewhere
    assert moved_a == moved_b  # a completion's rewards move together: its total is another completion's
    assert first.__name__ == "a"
    assert moved_a == first(completions=COMPLETIONS)  # the same batch again: the same permutation


def test_other_batches_and_seeds_get_other_permutations():
    order = batch_permutation(COMPLETIONS, 0)
    assert sorted(order) == list(range(16))
    assert batch_permutation(COMPLETIONS, 1) != order
    assert batch_permutation([*COMPLETIONS[1:], "other"], 0) != order


def test_the_recipe_trains_on_shuffled_rewards_and_reports_on_its_own():
    cfg = load_config(None, ["model.name_or_path=tiny", "reward_control=shuffle"])
    rubric = recipe_rubric(cfg)
    trained = trained_rubric(cfg, rubric)
    assert all(isinstance(f, Shuffled) for f in trained.funcs)
    assert not any(isinstance(f, Shuffled) for f in rubric.funcs)  # pass rate, held-out, azr gen: the real rewards
    assert trained.names == rubric.names and trained.weights == rubric.weights
    plain = load_config(None, ["model.name_or_path=tiny"])
    assert not any(isinstance(f, Shuffled) for f in trained_rubric(plain, recipe_rubric(plain)).funcs)


def test_absolute_zero_has_no_control_arm():
    with pytest.raises(ConfigError, match=r"^reward_control: "):
        load_config(None, ["model.name_or_path=tiny", "mode=absolute_zero", "reward_control=shuffle"])
