"""The `eval:` section: its names (relied on outside), defaults (off), and one-line errors at load."""

from __future__ import annotations

import dataclasses

import pytest

from azr.config import HeldOutConfig, load_config
from azr.errors import ConfigError

MIN = ["model.name_or_path=tiny"]


def test_the_names_outside_checks_rely_on_are_there_and_it_is_off_by_default():
    names = {f.name for f in dataclasses.fields(HeldOutConfig)}
    assert names >= {"every_steps", "tasks", "max_tasks", "samples", "k", "temperature", "max_new_tokens"}
    assert "stop_on_alarm" in names
    cfg = load_config(None, MIN)
    assert cfg.eval.every_steps == 0 and cfg.eval.tasks is None and cfg.eval.k == [1]
    assert all(f.metadata.get("help", "").strip() for f in dataclasses.fields(HeldOutConfig))


def test_a_task_file_in_the_recipe_is_relative_to_it(tmp_path):
    (tmp_path / "tasks.jsonl").write_text("")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "model: {name_or_path: tiny}\neval: {every_steps: 5, tasks: tasks.jsonl, k: [1, 4], samples: 4}\n"
    )
    cfg = load_config(recipe)
    assert cfg.eval.tasks == str(tmp_path / "tasks.jsonl") and cfg.eval.k == [1, 4]
    assert load_config(None, [*MIN, "eval.tasks=held-out"]).eval.tasks == "held-out"  # a split stays a name


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["eval.every_steps=-1"], "eval.every_steps: must be >= 0"),
        (["eval.evry_steps=3"], "did you mean 'every_steps'"),
        (["eval.k=[1,8]"], "eval.k[1]: 8 is more than eval.samples=4"),
        (["eval.k=[0]"], "eval.k[0]: expected a positive integer"),
        (["eval.k=[]"], "eval.k: at least one k"),
        (["eval.k=[2,2]"], "eval.k: a value is listed twice"),
        (["eval.samples=0"], "eval.samples: must be > 0"),
        (["eval.max_tasks=0"], "eval.max_tasks: must be > 0"),
        (["eval.temperature=-1"], "eval.temperature: must be >= 0"),
        (["eval.every_steps=2", "data.eval=null"], "eval.tasks: no held-out tasks"),
        (["eval.every_steps=2", "mode=absolute_zero"], "eval.every_steps: held-out evaluation runs in mode 'grpo'"),
    ],
)
def test_errors_are_one_line_and_name_the_field(overrides, message):
    with pytest.raises(ConfigError) as err:
        load_config(None, [*MIN, *overrides])
    assert message in str(err.value) and "\n" not in str(err.value)
