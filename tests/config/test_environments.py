"""One environment switch: a recipe's kind of episode is resolved in one place, and every module reads what the kind
declares instead of comparing names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from azr.config import (
    FEEDBACK,
    KINDS,
    SINGLE,
    TOOLS,
    environment_named,
    environment_of,
    gen_environment_of,
    load_config,
)
from azr.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("sets", "kind", "gen_kind"),
    [
        ([], SINGLE, TOOLS),  # azr gen collects tool episodes unless the recipe shows feedback
        (["rollouts.env=feedback"], FEEDBACK, FEEDBACK),
        (["tools.enabled=true", "tools.names=[python_run]"], TOOLS, TOOLS),
    ],
)
def test_a_recipe_asks_for_one_kind(sets, kind, gen_kind):
    cfg = load_config(None, ["model.name_or_path=x", *sets])
    assert environment_of(cfg) is kind and gen_environment_of(cfg) is gen_kind


def test_what_each_kind_declares():
    assert (FEEDBACK.hidden_tests, FEEDBACK.feedback_turns, FEEDBACK.token_episodes, FEEDBACK.tools) == (
        True, True, True, False,
    )  # fmt: skip
    assert TOOLS.tools and not (TOOLS.hidden_tests or TOOLS.feedback_turns or TOOLS.token_episodes)
    assert not (SINGLE.hidden_tests or SINGLE.feedback_turns or SINGLE.tools) and SINGLE.rollouts is None
    cfg = load_config(None, ["model.name_or_path=x", "feedback.max_turns=3", "gen.max_turns=5"])
    assert (SINGLE.max_turns(cfg), FEEDBACK.max_turns(cfg), TOOLS.max_turns(cfg)) == (1, 3, 5)
    assert TOOLS.is_named(None) and FEEDBACK.is_named("feedback") and not FEEDBACK.is_named(None)


def test_every_kind_that_plays_episodes_names_a_builder_that_exists():
    import importlib

    for kind in KINDS.values():
        if kind.rollouts is not None:
            module, name = kind.rollouts.split(":")
            assert callable(getattr(importlib.import_module(module), name)), kind.name


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["rollouts.env=feedback", "mode=absolute_zero"], "rollouts.env: 'feedback' runs in mode 'grpo' only"),
        (["rollouts.env=feedback", "tools.enabled=true"], "rollouts.env: 'feedback' is not with tools.enabled"),
    ],
)
def test_a_recipe_no_kind_can_run_is_refused_at_load(sets, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(None, ["model.name_or_path=x", "tools.names=[python_run]", *sets])


def test_an_unknown_name_is_a_config_error():
    assert environment_named("feedback") is FEEDBACK
    with pytest.raises(ConfigError, match=r"unknown environment 'chat' \(one of single, feedback, tools\)"):
        environment_named("chat")


def test_no_module_outside_the_registry_compares_an_environment_name():
    names = "|".join(KINDS)
    compare = re.compile(rf"""(==|!=)\s*["']({names})["']|["']({names})["']\s*(==|!=)""")
    found = [
        f"{path.relative_to(REPO)}:{number}"
        for path in sorted((REPO / "azr").rglob("*.py"))
        if path.name != "environments.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if compare.search(line)
    ]
    assert found == []
