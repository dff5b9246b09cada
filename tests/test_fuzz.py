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


# Data sets' own row shapes: a valid row of each format, then columns replaced by fuzzed values (any JSON value, or
# text that looks like what the column holds: JSON lists, base64 pickles, code, huge numbers, deep nesting).
_CASES = json.dumps([{"input": "1\n", "output": "1\n", "testtype": "stdin"}])
FORMAT_ROWS = {
    "mbpp": {"task_id": 1, "text": "Add.", "code": "def f(a):\n    return a\n", "test_list": ["assert f(1) == 1"]},
    "humaneval": {
        "task_id": "HumanEval/0",
        "prompt": "def f(a):\n",
        "canonical_solution": "    return a\n",
        "test": "def check(candidate):\n    assert candidate(1) == 1\n",
        "entry_point": "f",
    },
    "apps": {
        "problem_id": 1,
        "question": "Echo.",
        "solutions": json.dumps(["print(input())"]),
        "input_output": json.dumps({"inputs": ["1\n"], "outputs": ["1\n"]}),
    },
    "livecodebench": {
        "question_id": "q",
        "question_content": "Echo.",
        "starter_code": "",
        "public_test_cases": _CASES,
        "private_test_cases": "",
        "metadata": "{}",
    },
    "code_contests": {
        "name": "c",
        "description": "Echo.",
        "public_tests": {"input": ["1\n"], "output": ["1\n"]},
        "solutions": {"language": [3], "solution": ["print(input())"]},
    },
    "primeintellect": {
        "problem_id": "p",
        "prompt": "Echo.",
        "verification_info": json.dumps({"test_cases": [{"type": "stdin_stdout", "input": "1\n", "output": "1\n"}]}),
        "gold_standard_solution": "```python\nprint(input())\n```",
    },
    "kodcode": {
        "question_id": "k",
        "question": "Add.",
        "solution": "def f(a):\n    return a\n",
        "test": "from solution import f\n\ndef test_f():\n    assert f(1) == 1\n",
    },
    "bigcodebench": {
        "task_id": "BigCodeBench/0",
        "complete_prompt": "def task_func(a):\n",
        "canonical_solution": "    return a\n",
        "test": "import unittest\nclass TestCases(unittest.TestCase):\n"
        "    def test_a(self):\n        self.assertEqual(task_func(1), 1)\n",
        "entry_point": "task_func",
    },
}


def _packed(value) -> str:
    import base64
    import pickle
    import zlib

    return base64.b64encode(zlib.compress(pickle.dumps(value))).decode()


HOSTILE_TEXT = st.sampled_from(
    [
        "[" * 150 + "]" * 150,
        "[" + "9" * 5000 + "]",
        '["a", "b"',
        "[{}]",
        '[{"input": 1}]',
        '[{"input": "1", "output": "1", "testtype": "functional"}]',
        "{}",
        "def f(:",
        "assert " + "+".join(["1"] * 3000) + " == 3000",
        "0x" + "f" * 5000,
        _packed([[1, 2]]),
        _packed("not json"),
        _packed([{"input": "1\n", "output": "1\n", "testtype": "stdin"}] * 3),
        "```python\n```",
        "\x00stdio:{}",
    ]
)


@st.composite
def format_rows(draw) -> tuple[str, dict]:
    name = draw(st.sampled_from(sorted(FORMAT_ROWS)))
    row = dict(FORMAT_ROWS[name])
    for key in draw(st.lists(st.sampled_from(sorted(row)) | st.text(max_size=8), min_size=1, max_size=3)):
        row[key] = draw(VALUES | HOSTILE_TEXT | st.lists(HOSTILE_TEXT | VALUES, max_size=3))
    return name, row


@settings(FUZZ, max_examples=200)
@given(format_rows())
def test_a_formats_row_is_a_task_or_one_data_error(case):
    from azr.data import load_tasks

    name, row = case
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "rows.jsonl"
        path.write_text(json.dumps(row, allow_nan=True) + "\n")
        try:
            tasks = load_tasks(path, format=name)
        except UserError as exc:
            assert "\n" not in str(exc) and str(exc).startswith(str(path)), str(exc)
        else:
            assert len(tasks) == 1 and tasks[0].tests
