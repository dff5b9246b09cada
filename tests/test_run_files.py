"""The test helpers that share one run between tests (tests/run_files.py): a run made once per session whichever
pytest-xdist worker asks first, and a run folder that continues another run's warm start."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from run_files import continue_warm_start, once_per_session, read_jsonl

from azr.config.recipe import RUN_MARKER
from azr.training.state import RunState, resolve_resume


class WorkerTemp:
    """What `once_per_session` reads of pytest's TempPathFactory: a worker's own temp folder."""

    def __init__(self, path: Path):
        path.mkdir(parents=True, exist_ok=True)
        self.path = path

    def getbasetemp(self) -> Path:
        return self.path


def test_two_workers_asking_at_once_share_one_make(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    made, got = [], []

    def make(folder: Path) -> None:
        made.append(folder)
        time.sleep(0.3)  # the other worker asks meanwhile, and must wait rather than make its own
        folder.mkdir()
        (folder / "result").write_text("made once")

    def worker(name: str) -> None:
        got.append(once_per_session(WorkerTemp(tmp_path / f"popen-{name}"), "run", make))

    threads = [threading.Thread(target=worker, args=(name,)) for name in ("gw0", "gw1")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert made == [tmp_path / "run"] and got == [tmp_path / "run"] * 2
    assert (tmp_path / "run" / "result").read_text() == "made once"


def test_without_workers_the_run_lies_in_the_sessions_own_temp_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert once_per_session(WorkerTemp(tmp_path / "pytest-7"), "run", Path.mkdir) == tmp_path / "pytest-7" / "run"


def test_a_failed_make_fails_the_later_callers_at_once_without_making_it_again(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    calls = []

    def make(folder: Path) -> None:
        calls.append(folder)
        folder.mkdir()
        raise AssertionError("azr train exited 1\nthe rest of its log")

    with pytest.raises(AssertionError):
        once_per_session(WorkerTemp(tmp_path / "popen-gw0"), "run", make)
    with pytest.raises(
        pytest.fail.Exception, match=r"^run: .* failed in another test \(AssertionError: azr train exited 1\)$"
    ):
        once_per_session(WorkerTemp(tmp_path / "popen-gw1"), "run", make)
    assert len(calls) == 1


def test_a_continued_warm_start_resumes_at_grpo_with_the_earlier_phases_and_their_records(tmp_path):
    run, out = tmp_path / "run", tmp_path / "continued"
    (run / "sft" / "final").mkdir(parents=True)
    (run / "sft" / "checkpoints" / "checkpoint-50").mkdir(parents=True)
    (run / "sft" / "final" / "model.safetensors").write_text("weights")
    (run / RUN_MARKER).write_text("azr\n")
    phases = {"sft": {"seconds": 1.0}, "eval_before": {"pass_rate": 0.5}, "grpo": {"steps": 60}, "eval_after": {}}
    (run / "state.json").write_text(json.dumps({"phases": phases}))
    records = [{"phase": p, "step": 1} for p in ("sft", "eval_before", "grpo", "grpo", "eval_after")]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    continue_warm_start(run, out)
    state = RunState.load(out)
    assert state.phases == {"sft": {"seconds": 1.0}, "eval_before": {"pass_rate": 0.5}}
    assert [r["phase"] for r in read_jsonl(out / "metrics.jsonl")] == ["sft", "eval_before"]
    assert (out / "sft" / "final" / "model.safetensors").read_text() == "weights"
    assert not (out / "sft" / "checkpoints").exists()  # the warm start is finished: nothing resumes inside it
    assert resolve_resume(out, state, "latest", sft=True).phase == "grpo"
