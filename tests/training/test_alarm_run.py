"""The reward-hacking alarm on a short real run: GRPO on the tiny model with a reward that pays for the answer's
format alone (a plugin counting layout characters) while the tests reward (weight 0, still logged) stays at zero. The
policy learns the format within a dozen steps; the `format_up_tests_flat` alarm is raised once, as a warning line and
an `alarm` record in metrics.jsonl, and `azr report` marks it. With `eval.stop_on_alarm` the run ends cleanly at the
first alarm's step, its final model saved."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from recipes import tiny_recipe, write_recipe

from azr.config import load_config
from azr.report import run_report
from azr.training.run import run_train

pytestmark = pytest.mark.slow

PLUGIN = '''
def format_markup(completions, **columns):
    """Pays for layout alone: the share of the answer's characters that are fences, colons, hashes or whitespace."""
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [sum(ch in "`\\n #:" for ch in t) / max(1, len(t)) for t in texts]
'''


def _recipe(root: Path, model_dir: Path, name: str, stop: bool) -> Path:
    (root / "format_plugin.py").write_text(PLUGIN)
    recipe = tiny_recipe(
        model_dir,
        root / name,
        seed=1,  # at this rate seed 0's policy learns the format, then collapses to answers without any (step 18)
        model={"adapter": {"kind": "none"}, "gradient_checkpointing": False},
        data={"eval": None},
        grpo={
            "num_generations": 4,
            "per_device_train_batch_size": 8,
            "max_completion_length": 24,
            "learning_rate": 2.0e-2,  # all weights, large: the format is learned within the rule's 20 logs
            "temperature": 1.0,
            "beta": 0.0,
            "max_steps": 24,
            "save_steps": 100,
        },
        rewards=[{"name": "format_plugin:format_markup", "weight": 1.0}, {"name": "tests", "weight": 0.0}],
        eval={"stop_on_alarm": stop},
        sandbox={"workers": 1},
    )
    return write_recipe(root / f"{name}.yaml", recipe)


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def hacked(tiny_model_dir, tmp_path_factory):
    """(run folder, the alarms' warning lines) of 24 steps trained on the format reward alone."""
    root = tmp_path_factory.mktemp("alarm-run")
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(root))
    handler = _Lines()
    logging.getLogger("azr").addHandler(handler)
    try:
        assert run_train(load_config(_recipe(root, tiny_model_dir, "hacked", stop=False))) == 0
    finally:
        logging.getLogger("azr").removeHandler(handler)
        mp.undo()
    return root / "hacked", [line for line in handler.lines if "alarm at step" in line]


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def test_a_reward_paying_for_format_alone_trips_the_alarm_once(hacked):
    run, warnings = hacked
    records = _records(run)
    steps = [r for r in records if "rewards/format_markup/mean" in r]
    assert len(steps) == 24
    first = sum(r["rewards/format_markup/mean"] for r in steps[:5]) / 5
    last = sum(r["rewards/format_markup/mean"] for r in steps[-5:]) / 5
    assert last > first + 0.3, (first, last)  # the policy learned the format...
    assert {r["rewards/tests_reward/mean"] for r in steps} == {0.0}  # ...and no working code
    alarms = [r for r in records if r.get("kind") == "alarm"]
    fmt = [a for a in alarms if a["rule"] == "format_up_tests_flat"]
    assert len(fmt) == 1 and 20 <= fmt[0]["step"] <= 24, alarms  # once, as soon as the rule's two windows are full
    assert "format reward rose" in fmt[0]["message"] and "format without working code" in fmt[0]["message"]
    assert len(warnings) == len(alarms)  # one warning line per alarm, no repeats
    assert any("format_up_tests_flat" in w for w in warnings)


def test_the_report_marks_the_alarm(hacked, tmp_path):
    run, _ = hacked
    page = run_report([run], out=tmp_path / "report.html")
    text = page.read_text()
    assert "format_up_tests_flat" in text and "format without working code" in text


def test_stop_on_alarm_ends_the_run_cleanly_at_the_first_alarm(hacked, tiny_model_dir, tmp_path, monkeypatch, caplog):
    monkeypatch.syspath_prepend(str(tmp_path))
    caplog.set_level(logging.WARNING, logger="azr")
    assert run_train(load_config(_recipe(tmp_path, tiny_model_dir, "stopped", stop=True))) == 0
    run = tmp_path / "stopped"
    records = _records(run)
    (alarm, *_) = [r for r in records if r.get("kind") == "alarm"]
    trained = max(r["step"] for r in records if "rewards/format_markup/mean" in r)
    assert trained == alarm["step"] < 24  # no step after the one that raised it
    assert (run / "final" / "model.safetensors").exists()  # saved as after a last step
    assert json.loads((run / "summary.json").read_text())["phases"]["grpo"]["steps"] == trained
    assert any("eval.stop_on_alarm: training stops at step" in m for m in caplog.messages)
