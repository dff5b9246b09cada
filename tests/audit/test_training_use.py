"""Training reads an audit: data.min_kill_rate drops weak tasks (one log line), the figures reach summary.json and
the report page; a recipe asking for min_kill_rate without an audit file is refused at load."""

from __future__ import annotations

import json
import logging

import pytest

from azr.audit import read_audit, weak_tasks
from azr.config import load_config
from azr.data import Task
from azr.errors import ConfigError, DataError
from azr.training.context import audited_tasks
from azr.training.state import RunState, write_summary

MIN = ["model.name_or_path=m"]


def _records(path):
    rows = [
        {"id": "a", "kill_rate": 0.2, "mutants": 5, "killed": 1, "equivalent": 0, "survivors": [], "probes_passed": []},
        {"id": "b", "kill_rate": 0.9, "mutants": 5, "killed": 4, "equivalent": 0, "survivors": [], "probes_passed": []},
        {
            "id": "c",
            "kill_rate": 1.0,
            "mutants": 5,
            "killed": 5,
            "equivalent": 0,
            "survivors": [],
            "probes_passed": ["returns None"],
        },
        {
            "id": "d",
            "kill_rate": None,
            "mutants": 0,
            "killed": 0,
            "equivalent": 0,
            "survivors": [],
            "probes_passed": [],
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


TASKS = [Task(i, "p", ["assert True"], "x = 1") for i in "abcde"]


def test_weak_tasks_are_those_under_the_rate_or_with_a_probe_passed(tmp_path):
    records = read_audit(_records(tmp_path / "audit.jsonl"))
    assert weak_tasks(TASKS, records, 0.5) == {"a", "c"}


def test_a_row_that_is_not_an_audit_record_is_named(tmp_path):
    bad = tmp_path / "audit.jsonl"
    bad.write_text('{"id": "a", "kill_rate": 2}\n')
    with pytest.raises(DataError, match=r"audit.jsonl:1: field 'kill_rate'"):
        read_audit(bad)


def test_min_kill_rate_drops_weak_tasks_logs_once_and_the_figures_reach_the_summary(tmp_path, caplog):
    audit = _records(tmp_path / "audit.jsonl")
    cfg = load_config(None, [*MIN, f"data.audit={audit}", "data.min_kill_rate=0.5"])
    out = tmp_path / "run"
    out.mkdir()
    with caplog.at_level(logging.INFO, logger="azr.training.context"):
        kept = audited_tasks(TASKS, cfg, out)
    assert [t.id for t in kept] == ["b", "d", "e"]
    (line,) = [r.getMessage() for r in caplog.records if "min_kill_rate" in r.getMessage()]
    assert "drops 2 of 5 tasks" in line and "1 without a record" in line
    summary = write_summary(out, RunState.load(out), 1.0)
    assert summary["audit"]["dropped"] == 2 and summary["audit"]["kill_rate"] == pytest.approx(0.9)

    from azr.report import read_run
    from azr.report.page import render

    page = render([read_run(out)], "now")
    assert "test strength (data.audit)" in page and "kill rate 0.90" in page


def test_min_kill_rate_without_an_audit_file_is_refused():
    from azr.config.recipe import check_task_files

    with pytest.raises(ConfigError, match=r"data\.min_kill_rate: needs data\.audit"):
        check_task_files(load_config(None, [*MIN, "data.min_kill_rate=0.5"]))
    with pytest.raises(ConfigError, match=r"data\.audit: .*file not found"):
        check_task_files(load_config(None, [*MIN, "data.audit=/nonexistent/audit.jsonl"]))
