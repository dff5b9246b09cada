"""The reward-hacking alarms on synthetic metrics.jsonl records: each rule fires on the pattern it names, once, and
stays quiet on a healthy run that looks close to it; the writer wrapper records alarms beside the records."""

from __future__ import annotations

import json
import random

import pytest

from azr.alarms import Alarm, Alarms, AlarmWatch, replay
from azr.logs import JsonlWriter, read_jsonl_records


def _log(step: int, **values: float) -> dict:
    return {"phase": "grpo", "step": step, "time": 1000.0 + step, **values}


def _eval(step: int, value: float, half: float = 0.03) -> dict:
    interval = {"value": value, "low": max(0.0, value - half), "high": min(1.0, value + half), "problems": 64}
    return {"phase": "grpo", "kind": "eval", "step": step, "pass_at_k": {"1": interval}, "mean_reward": value}


def _noisy(rng: random.Random, centre: float, spread: float = 0.02) -> float:
    return centre + rng.uniform(-spread, spread)


def _run(steps: int, seed: int = 0, evals: dict[int, float] | None = None, **curves) -> list[dict]:
    """Step logs whose keys follow `curves[key](fraction of the run)`, with small noise, and eval records."""
    rng, records = random.Random(seed), []
    for step in range(1, steps + 1):
        x = step / steps
        records.append(_log(step, **{k.replace("__", "/"): _noisy(rng, f(x)) for k, f in curves.items()}))
        if evals and step in evals:
            records.append(_eval(step, evals[step]))
    return records


def _fired(records: list[dict]) -> list[Alarm]:
    alarms = Alarms()
    return [a for r in records for a in alarms.feed(r)]


HEALTHY = {
    "reward": lambda x: 0.3 + 0.4 * x,
    "rewards__tests_reward__mean": lambda x: 0.3 + 0.4 * x,
    "rewards__format_reward__mean": lambda x: 0.6 + 0.3 * x,
    "completion_length": lambda x: 60 - 10 * x,
    "completions__clipped_ratio": lambda x: 0.05,
    "sandbox__timeout": lambda x: 0.03,
    "sandbox__crashed": lambda x: 0.03,
}


def test_a_healthy_run_raises_nothing():
    evals = {1: 0.2, 20: 0.25, 40: 0.3, 60: 0.33}
    assert _fired(_run(60, evals=evals, **HEALTHY)) == []


def test_reward_rising_while_heldout_falls():
    records = _run(60, evals={1: 0.2, 20: 0.4, 40: 0.3, 60: 0.15}, **HEALTHY)
    fired = _fired(records)
    assert [(a.rule, a.step) for a in fired] == [("reward_up_heldout_down", 40)]
    assert "pass@1 fell from 0.400" in fired[0].message and "step 20" in fired[0].message
    assert "reward" in fired[0].message and "tests_reward" in fired[0].message


def test_a_heldout_fall_within_its_interval_is_noise():
    records = _run(40, **HEALTHY)
    records[19:19] = [_eval(20, 0.35, half=0.07)]
    records.append(_eval(40, 0.27, half=0.07))
    assert _fired(records) == []  # 0.08 below the best, inside its intervals' noise (0.099)


def test_heldout_falling_while_the_reward_falls_too_is_not_hacking():
    curves = dict(HEALTHY, reward=lambda x: 0.7 - 0.4 * x, rewards__tests_reward__mean=lambda x: 0.7 - 0.4 * x)
    curves["rewards__format_reward__mean"] = lambda x: 0.9
    assert _fired(_run(60, evals={1: 0.4, 30: 0.3, 60: 0.1}, **curves)) == []


def test_one_reward_function_rising_is_enough():
    curves = dict(HEALTHY, reward=lambda x: 0.5, rewards__tests_reward__mean=lambda x: 0.4)
    curves["rewards__format_reward__mean"] = lambda x: 0.2 + 0.7 * x
    fired = _fired(_run(60, evals={10: 0.4, 60: 0.2}, **curves))
    heldout = [a for a in fired if a.rule == "reward_up_heldout_down"]
    assert len(heldout) == 1 and "format_reward" in heldout[0].message and "tests_reward" not in heldout[0].message


def test_format_rising_while_tests_stay_flat():
    curves = dict(HEALTHY, rewards__tests_reward__mean=lambda x: 0.2)
    curves["rewards__format_reward__mean"] = lambda x: 0.2 + 0.7 * x
    fired = _fired(_run(40, **curves))
    assert [a.rule for a in fired] == ["format_up_tests_flat"]
    assert "format reward rose" in fired[0].message


def test_format_rising_with_tests_is_learning():
    curves = dict(HEALTHY, rewards__tests_reward__mean=lambda x: 0.2 + 0.5 * x)
    curves["rewards__format_reward__mean"] = lambda x: 0.2 + 0.7 * x
    assert _fired(_run(40, **curves)) == []


def test_completion_length_collapsing():
    fired = _fired(_run(40, **dict(HEALTHY, completion_length=lambda x: 80 if x < 0.5 else 6)))
    assert [a.rule for a in fired] == ["length_collapse"]
    assert "80" in fired[0].message


def test_completions_getting_shorter_is_not_a_collapse():
    assert _fired(_run(40, **dict(HEALTHY, completion_length=lambda x: 80 - 40 * x))) == []


def test_completions_cut_at_the_cap():
    fired = _fired(_run(30, **dict(HEALTHY, completions__clipped_ratio=lambda x: 0.1 if x < 0.5 else 0.8)))
    assert [a.rule for a in fired] == ["length_at_cap"]
    assert "max_completion_length" in fired[0].message


def test_a_few_completions_at_the_cap_are_fine():
    assert _fired(_run(30, **dict(HEALTHY, completions__clipped_ratio=lambda x: 0.3))) == []


def test_sandbox_timeouts_and_crashes_rising():
    curves = dict(HEALTHY, sandbox__timeout=lambda x: 0.02 + 0.3 * x, sandbox__crashed=lambda x: 0.02 + 0.1 * x)
    fired = _fired(_run(40, **curves))
    assert [a.rule for a in fired] == ["sandbox_failures"]


def test_a_steady_share_of_timeouts_is_not_rising():
    assert _fired(_run(40, **dict(HEALTHY, sandbox__timeout=lambda x: 0.3))) == []


def test_each_rule_fires_once_and_ignores_other_records():
    curves = dict(HEALTHY, completions__clipped_ratio=lambda x: 0.9)
    records = _run(50, **curves)
    records.insert(5, {"phase": "sft", "step": 3, "loss": 1.0})
    records.insert(6, {"phase": "eval_before", "step": 0, "pass_rate": 0.5})
    assert [a.rule for a in _fired(records)] == ["length_at_cap"]


def test_a_recorded_alarm_is_not_raised_again():
    records = _run(30, **dict(HEALTHY, completions__clipped_ratio=lambda x: 0.9))
    recorded = Alarm(12, "length_at_cap", "cut").record()
    assert _fired([recorded, *records]) == []
    assert [(a.step, a.message) for a in replay([*records, recorded])] == [(12, "cut")]


def test_replay_finds_alarms_a_run_did_not_record():
    records = _run(30, **dict(HEALTHY, completions__clipped_ratio=lambda x: 0.9))
    assert [(a.rule, a.step) for a in replay(records)] == [("length_at_cap", 10)]


@pytest.mark.parametrize("bad", [{"step": "x"}, {"kind": "eval", "step": 3, "pass_at_k": {"1": {"value": None}}}, {}])
def test_odd_records_are_skipped(bad):
    assert Alarms().feed(bad) == []


def test_watch_writes_alarm_records_beside_the_records_and_once_after_a_resume(tmp_path, caplog):
    path = tmp_path / "metrics.jsonl"
    records = _run(30, **dict(HEALTHY, completions__clipped_ratio=lambda x: 0.9))
    with AlarmWatch(JsonlWriter(path)) as watch:
        for record in records[:20]:
            watch.write(record)
    written = read_jsonl_records(path)
    alarms = [r for r in written if r.get("kind") == "alarm"]
    assert len(written) == 21 and [r["step"] for r in alarms] == [10]
    assert set(alarms[0]) == {"phase", "kind", "step", "time", "rule", "message"}
    assert written[10] == alarms[0] and json.loads(json.dumps(alarms[0])) == alarms[0]
    assert "alarm at step 10 (length_at_cap)" in caplog.text
    with AlarmWatch(JsonlWriter(path)) as again:  # a resumed run: primed with the file, nothing raised twice
        again.prime(read_jsonl_records(path))
        for record in records[20:]:
            again.write(record)
        assert [a.rule for a in again.fired] == ["length_at_cap"]
    assert sum(r.get("kind") == "alarm" for r in read_jsonl_records(path)) == 1
