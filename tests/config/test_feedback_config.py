"""The episode settings: `rollouts.env`, the `feedback:` section, `data.public_tests` and `eval.turns` — their names,
defaults, and one-line errors naming the field (exit 2 from the CLI) before any slow work."""

from __future__ import annotations

import dataclasses
import json

import pytest

from azr.config import FeedbackConfig, RolloutsConfig, check_recipe, load_config
from azr.errors import ConfigError

MIN = ["model.name_or_path=tiny"]


def test_the_names_and_defaults_are_rllms_two_turns_two_failures_300_characters():
    cfg = load_config(None, MIN)
    assert cfg.rollouts.env == "single"
    assert dataclasses.asdict(cfg.feedback) == {
        "max_turns": 2,
        "max_failures": 2,
        "max_chars": 300,
        "stop_on_pass": True,
        "turn_penalty": 0.0,
        "improvement_bonus": 0.0,
    }
    assert cfg.data.public_tests is None and cfg.eval.turns == 1
    for section in (FeedbackConfig, RolloutsConfig):
        assert all(f.metadata.get("help", "").strip() for f in dataclasses.fields(section))


def test_values_from_a_recipe_and_from_set():
    cfg = load_config(
        None,
        [*MIN, "rollouts.env=feedback", "feedback.max_turns=3", "feedback.turn_penalty=0.1", "data.public_tests=2"],
    )
    assert (cfg.rollouts.env, cfg.feedback.max_turns, cfg.feedback.turn_penalty) == ("feedback", 3, 0.1)
    assert cfg.data.public_tests == 2
    assert load_config(None, [*MIN, "eval.turns=3"]).eval.turns == 3


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["rollouts.env=feedbak"], "rollouts.env"),
        (["rollouts.envv=feedback"], "did you mean 'env'"),
        (["feedback.max_turns=0"], "feedback.max_turns: must be >= 1"),
        (["feedback.max_failures=0"], "feedback.max_failures: must be >= 1"),
        (["feedback.max_chars=3"], "feedback.max_chars: must be >= 16"),
        (["feedback.turn_penalty=-1"], "feedback.turn_penalty: must be >= 0"),
        (["feedback.improvement_bonus=-0.5"], "feedback.improvement_bonus: must be >= 0"),
        (["data.public_tests=-1"], "data.public_tests: must be >= 0"),
        (["eval.turns=0"], "eval.turns: must be >= 1"),
        (["rollouts.env=feedback", "mode=absolute_zero"], "rollouts.env: 'feedback' runs in mode 'grpo' only"),
        (["rollouts.env=feedback", "tools.enabled=true"], "rollouts.env: 'feedback' is not with tools.enabled"),
    ],
)
def test_bad_settings_are_one_line_errors_naming_the_field(overrides, message):
    with pytest.raises(ConfigError, match=message) as caught:
        load_config(None, [*MIN, *overrides])
    assert "\n" not in str(caught.value)


def _tasks(path, tests_per_task):
    rows = [
        {"id": f"t{i}", "prompt": "p", "tests": [f"assert f({j}) == {j}" for j in range(n)]}
        for i, n in enumerate(tests_per_task)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_feedback_on_a_file_without_hidden_tests_is_refused_naming_the_field(tmp_path):
    one = _tasks(tmp_path / "one.jsonl", [1, 1])
    out = ["output_dir=" + str(tmp_path / "run")]
    cfg = load_config(None, [*MIN, *out, f"data.train={one}", "data.eval=null", "rollouts.env=feedback"])
    with pytest.raises(ConfigError, match=r"rollouts.env: no task of .*one.jsonl has a hidden test"):
        check_recipe(cfg)
    check_recipe(load_config(None, [*MIN, *out, f"data.train={one}", "data.eval=null"]))  # single: fine
    two = _tasks(tmp_path / "two.jsonl", [2, 3])
    cfg = load_config(None, [*MIN, *out, f"data.train={two}", "data.eval=null", "rollouts.env=feedback"])
    check_recipe(cfg)  # one public, one or two hidden
    cfg = load_config(None, [*MIN, *out, f"data.train={two}", "data.eval=null", "rollouts.env=feedback"])
    cfg.data.public_tests = 3  # the recipe's override leaves no hidden test
    with pytest.raises(ConfigError, match=r"data.public_tests=3"):
        check_recipe(cfg)


def test_eval_turns_needs_hidden_tests_in_the_held_out_file(tmp_path):
    one = _tasks(tmp_path / "one.jsonl", [1])
    settings = [f"output_dir={tmp_path / 'run'}", "data.train=train", f"eval.tasks={one}", "eval.every_steps=2"]
    with pytest.raises(ConfigError, match=r"eval.turns: no task of .*one.jsonl"):
        check_recipe(load_config(None, [*MIN, *settings, "eval.turns=2"]))
    check_recipe(load_config(None, [*MIN, *settings]))


def test_the_cli_refuses_with_exit_2_and_one_line(cli):
    code, out, err = cli("config", "show", "--set", "model.name_or_path=tiny", "--set", "feedback.max_failures=0")
    assert code == 2 and not out
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "feedback.max_failures" in lines[0], err
