"""`StopOnAlarm`: training stops cleanly once the metrics writer's alarm watch has fired, on every process together."""

from __future__ import annotations

from transformers import TrainerControl, TrainerState

from azr.alarms import AlarmWatch
from azr.logs import JsonlWriter
from azr.training.alarms import StopOnAlarm


def _cut_records(n: int) -> list[dict]:
    return [{"phase": "grpo", "step": s, "completions/clipped_ratio": 0.9} for s in range(1, n + 1)]


def test_stops_at_the_first_step_end_after_an_alarm(tmp_path):
    watch = AlarmWatch(JsonlWriter(tmp_path / "metrics.jsonl"))
    stop, state, control = StopOnAlarm(watch), TrainerState(), TrainerControl()
    for record in _cut_records(9):
        state.global_step = record["step"]
        watch.write(record)
        stop.on_step_end(None, state, control)
    assert not control.should_training_stop  # nine logs: under the rule's window
    state.global_step = 10
    watch.write(_cut_records(10)[-1])
    stop.on_log(None, state, control, logs={})
    assert control.should_training_stop and stop.stopped_at == 10
    watch.close()


def test_a_rank_without_the_writer_stops_with_the_main_one():
    """Only the main process writes metrics; the summed flag stops every rank at the same step."""
    calls = []

    def total(*numbers: float) -> list[float]:
        calls.append(numbers)
        return [1.0]  # the main process has fired

    stop, control = StopOnAlarm(None, total), TrainerControl()
    stop.on_step_end(None, TrainerState(), control)
    assert control.should_training_stop and calls == [(0.0,)]
    quiet = TrainerControl()
    StopOnAlarm(None, lambda *n: [0.0]).on_step_end(None, TrainerState(), quiet)
    assert not quiet.should_training_stop
