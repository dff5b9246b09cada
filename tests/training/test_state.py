"""Where a run stands and where `--resume-from` continues, on fabricated output folders (no training here)."""

from __future__ import annotations

import json

import pytest

from azr.errors import ConfigError
from azr.training.state import Resume, RunState, checkpoints, mean_rate, resolve_resume


def _checkpoint(out, phase: str, step: int, complete: bool = True):
    folder = out / ("sft/checkpoints" if phase == "sft" else "checkpoints") / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "adapter_model.safetensors").write_bytes(b"weights")
    if complete:  # the HF Trainer writes trainer_state.json last
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return folder


def _state(out, *done: str) -> RunState:
    state = RunState.load(out)
    for phase in done:
        state.finish(phase, {"phase": phase})
    return RunState.load(out)  # as a new process would see it


def test_a_new_output_dir_starts_fresh(tmp_path):
    assert resolve_resume(tmp_path, RunState.load(tmp_path), None, sft=True) == Resume()
    assert not (tmp_path / "state.json").exists()


def test_latest_on_an_empty_dir_starts_fresh(tmp_path):
    assert resolve_resume(tmp_path, RunState.load(tmp_path), "latest", sft=False) == Resume()


def test_latest_continues_the_highest_complete_checkpoint_of_the_first_unfinished_phase(tmp_path):
    _checkpoint(tmp_path, "sft", 3)  # a finished phase's checkpoints do not count
    for step in (2, 4):
        _checkpoint(tmp_path, "grpo", step)
    _checkpoint(tmp_path, "grpo", 6, complete=False)  # killed while saving
    torn = _checkpoint(tmp_path, "grpo", 8, complete=False)
    (torn / "trainer_state.json").write_text('{"global_st')  # killed while writing its last file
    (tmp_path / "checkpoints" / "checkpoint-x").mkdir()  # not a checkpoint name
    state = _state(tmp_path, "sft", "eval_before")
    resume = resolve_resume(tmp_path, state, "latest", sft=True)
    assert resume == Resume("grpo", str(tmp_path / "checkpoints" / "checkpoint-4"), 4)
    assert [step for step, _ in checkpoints(tmp_path, "grpo")] == [2, 4]


def test_latest_passes_over_a_measurement_that_never_ran_to_the_checkpoints_after_it(tmp_path):
    """logging.pass_rate_tasks 0: eval_before never runs, so it is never finished; GRPO's checkpoints still say
    where the run was (it used to restart GRPO from step 0, pruning every record)."""
    _checkpoint(tmp_path, "grpo", 2)
    state = _state(tmp_path)
    assert resolve_resume(tmp_path, state, "latest", sft=False) == Resume(
        "grpo", str(tmp_path / "checkpoints" / "checkpoint-2"), 2
    )


def test_latest_without_a_checkpoint_restarts_the_unfinished_phase_and_prunes_its_logs(tmp_path):
    state = _state(tmp_path, "eval_before")
    assert resolve_resume(tmp_path, state, "latest", sft=False) == Resume("grpo", None, 0)


def test_a_run_killed_before_its_first_checkpoint_counts_as_started(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"phase": "sft", "step": 10}\n')  # logged, nothing saved yet
    state = RunState.load(tmp_path)
    assert resolve_resume(tmp_path, state, "latest", sft=True) == Resume("sft", None, 0)  # its logs get pruned
    with pytest.raises(ConfigError, match="already holds a run"):
        resolve_resume(tmp_path, state, None, sft=True)


def test_a_run_that_died_before_logging_anything_may_be_started_again(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("")  # opened, never written: e.g. the model failed to load
    (tmp_path / "config.yaml").write_text("seed: 1\n")
    assert resolve_resume(tmp_path, RunState.load(tmp_path), None, sft=True) == Resume()


def test_latest_resumes_sft_when_enabled_and_skips_it_when_not(tmp_path):
    _checkpoint(tmp_path, "sft", 5)
    state = RunState.load(tmp_path)
    sft_path = str(tmp_path / "sft" / "checkpoints" / "checkpoint-5")
    assert resolve_resume(tmp_path, state, "latest", sft=True) == Resume("sft", sft_path, 5)
    assert resolve_resume(tmp_path, state, "latest", sft=False) == Resume("eval_before", None, 0)


def test_latest_on_a_finished_run_has_nothing_to_continue(tmp_path):
    _checkpoint(tmp_path, "grpo", 2)
    state = _state(tmp_path, "eval_before", "grpo", "eval_after")
    assert resolve_resume(tmp_path, state, "latest", sft=False) == Resume()
    assert list(RunState.load(tmp_path).phases) == ["eval_before", "grpo", "eval_after"]  # nothing forgotten


def test_an_explicit_checkpoint_forgets_its_phase_and_every_later_one(tmp_path):
    _checkpoint(tmp_path, "sft", 1)
    grpo = _checkpoint(tmp_path, "grpo", 2)
    _checkpoint(tmp_path, "grpo", 4)
    state = _state(tmp_path, "sft", "eval_before", "grpo", "eval_after")
    resume = resolve_resume(tmp_path, state, str(grpo), sft=True)
    assert resume == Resume("grpo", str(grpo), 2)  # not the latest: the one asked for
    assert list(state.phases) == ["sft", "eval_before"]
    assert list(RunState.load(tmp_path).phases) == ["sft", "eval_before"]  # on disk too, atomically


def test_an_explicit_sft_checkpoint_reruns_everything_after_it(tmp_path, monkeypatch):
    _checkpoint(tmp_path, "sft", 1)
    state = _state(tmp_path, "sft", "eval_before", "grpo")
    monkeypatch.chdir(tmp_path)
    resume = resolve_resume(tmp_path, state, "sft/checkpoints/checkpoint-1", sft=True)  # relative to the CWD
    assert resume == Resume("sft", str(tmp_path / "sft" / "checkpoints" / "checkpoint-1"), 1)
    assert RunState.load(tmp_path).phases == {}


@pytest.mark.parametrize(
    "where",
    [
        "other-run/checkpoints/checkpoint-2",  # another run's checkpoint
        "run/checkpoint-2",  # the output dir itself, not its checkpoints folder
        "run/checkpoints/best",  # not a checkpoint-N name
        "run/checkpoints/checkpoint-2/nested",
    ],
)
def test_an_explicit_folder_that_is_not_a_checkpoint_of_this_run_is_a_config_error(tmp_path, where):
    out = tmp_path / "run"
    _checkpoint(out, "grpo", 2)
    _checkpoint(tmp_path / "other-run", "grpo", 2)
    (tmp_path / where).mkdir(parents=True, exist_ok=True)
    (tmp_path / where / "trainer_state.json").write_text("{}")
    state = _state(out, "eval_before")
    with pytest.raises(ConfigError, match=r"^--resume-from: .* is not a checkpoint-N folder of this run"):
        resolve_resume(out, state, str(tmp_path / where), sft=False)
    assert list(RunState.load(out).phases) == ["eval_before"]  # a refused resume changes nothing


def test_an_explicit_incomplete_checkpoint_is_a_config_error(tmp_path):
    folder = _checkpoint(tmp_path, "grpo", 4, complete=False)
    with pytest.raises(ConfigError, match=r"^--resume-from: .*checkpoint-4 is incomplete"):
        resolve_resume(tmp_path, RunState.load(tmp_path), str(folder), sft=False)


@pytest.mark.parametrize("started_by", ["state", "checkpoint"])
def test_a_new_run_into_an_existing_run_is_refused(tmp_path, started_by):
    if started_by == "state":
        _state(tmp_path, "eval_before")
    else:  # killed before any phase finished, but after its first checkpoint
        _checkpoint(tmp_path, "sft", 1)
    with pytest.raises(ConfigError, match=r"^output_dir: .* already holds a run; pass --resume-from latest"):
        resolve_resume(tmp_path, RunState.load(tmp_path), None, sft=True)


def test_run_state_records_phases_in_order_and_rejects_a_foreign_file(tmp_path):
    state = RunState.load(tmp_path)
    for phase in ("sft", "eval_before", "grpo"):
        state.finish(phase, {"n": phase})
    assert list(RunState.load(tmp_path).phases) == ["sft", "eval_before", "grpo"]
    assert RunState.load(tmp_path).info("grpo") == {"n": "grpo"} and not RunState.load(tmp_path).done("eval_after")
    (tmp_path / "state.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match=r"state\.json: not a run state file azr wrote"):
        RunState.load(tmp_path)


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"phases": {"sft": ' + "9" * 5000 + "}}"])
def test_a_state_or_checkpoint_file_too_deep_or_too_long_is_refused_not_a_traceback(tmp_path, text):
    """A folder handed back as a run may hold anything: its files are read within the JSON limits."""
    (tmp_path / "state.json").write_text(text)
    with pytest.raises(ConfigError, match=r"state\.json: not a run state file azr wrote"):
        RunState.load(tmp_path)
    (tmp_path / "state.json").unlink()
    folder = _checkpoint(tmp_path, "grpo", 4)
    (folder / "trainer_state.json").write_text(text)
    assert checkpoints(tmp_path, "grpo") == []  # not complete: never resumed from


def test_the_summary_rate_weights_each_record_by_the_time_it_covers():
    # Step 1 generated (100 tokens/s for 2 s), step 2 re-used that batch (0 tokens/s for 1 s), steps 3-4 one record.
    rows = [
        {"step": 1, "tokens_per_s": 100.0, "step_time_s": 2.0},
        {"step": 2, "tokens_per_s": 0.0, "step_time_s": 1.0},
        {"step": 4, "tokens_per_s": 50.0, "step_time_s": 1.5},
    ]
    assert mean_rate(rows) == pytest.approx((200 + 0 + 150) / 6)
    assert mean_rate([{"step": 1, "loss": 0.1}]) is None
