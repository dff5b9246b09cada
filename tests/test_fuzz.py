"""Fuzzing what a user hands azr: recipes (YAML, JSON, `--set`) and task rows. Whatever the input, the answer is a
value or a one-line user error (ConfigError, DataError): never another exception, never a hang. Bounded in time:
a fixed number of examples, each with a deadline, derandomized so a failure reproduces."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from azr.config import AzrConfig, load_config
from azr.config.schema import iter_fields
from azr.data import task_from_row
from azr.errors import UserError

FUZZ = settings(
    max_examples=60,
    deadline=2000,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
DOTTED = sorted(name for name, *_ in iter_fields(AzrConfig, ""))
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["", "auto", "none", "1e-5", "010", "no", "1:30", "http://u:k@h/v1", "../x", "~", "\x1b[2K"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def recipes(draw) -> dict:
    """A nested mapping along real field paths (so values reach the schema's checks), with some unknown keys."""
    recipe: dict = {}
    for dotted in draw(st.lists(st.sampled_from(DOTTED) | st.text(min_size=1, max_size=10), max_size=6)):
        node = recipe
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else {}
        node[leaf] = draw(VALUES)
    return recipe


def _load(text: str, suffix: str, overrides: list[str] = ()) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"recipe{suffix}"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            assert isinstance(load_config(path, overrides), AzrConfig)
        except UserError as exc:
            assert str(exc)  # the CLI prints it on one line, control characters escaped


@FUZZ
@given(recipes())
def test_a_yaml_recipe_is_a_config_or_one_user_error(recipe):
    _load(yaml.safe_dump(recipe, allow_unicode=True), ".yaml")


@FUZZ
@given(recipes())
def test_a_json_recipe_is_a_config_or_one_user_error(recipe):
    text = json.dumps(recipe, allow_nan=True)
    _load(text, ".json")


@FUZZ
@given(st.text(max_size=300))
def test_any_text_as_a_recipe_is_a_config_or_one_user_error(text):
    _load(text.encode("utf-8", "replace").decode("utf-8"), ".yaml")


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(DOTTED) | st.text(max_size=12), st.text(max_size=20)), max_size=4))
def test_set_overrides_are_a_config_or_one_user_error(pairs):
    _load("model: {name_or_path: x}\n", ".yaml", [f"{k}={v}" for k, v in pairs])


ROW_KEYS = ["id", "prompt", "solution", "tests", "setup", "entry_point", "timeout_s", "memory_mb", "tags", "x"]


@FUZZ
@given(st.dictionaries(st.sampled_from(ROW_KEYS) | st.text(max_size=8), VALUES, max_size=8))
def test_a_task_row_is_a_task_or_one_data_error(row):
    try:
        task = task_from_row(row, "tasks.jsonl:1")
    except UserError as exc:
        assert str(exc).startswith("tasks.jsonl:1") and "\n" not in str(exc)
    else:
        assert task.id and task.tests
        assert task.timeout_s is None or (math.isfinite(task.timeout_s) and task.timeout_s > 0)
