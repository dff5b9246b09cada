"""`azr gen`: the rollouts file (schema, grading, secrets), resume after a SIGKILL without duplicates on the tiny
model, and bad input refused before any slow work."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scripted_policy import ReferencePolicy

import azr.envs.gen as gen_module
from azr.config import load_config
from azr.envs import run_gen
from azr.tools import SCHEMA

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-gen-test-4242424242-SECRET"


def recipe(write, model: str, **gen) -> Path:
    settings = {"max_tasks": 4, "samples": 1, "max_turns": 3, "max_new_tokens": 32, "max_tokens": 96, **gen}
    text = (
        f"model: {{name_or_path: '{model}'}}\nsandbox: {{workers: 1, backend: bwrap}}\nlogging: {{console: plain}}\n"
        f"tools: {{names: [python_run, web_fetch]}}\ngen: {json.dumps(settings)}\n"
        "self_play: {api_key_env: AZR_FAKE_KEY}\n"
    )
    return write("gen.yaml", text)


def test_records_of_scripted_episodes(write, tmp_path, monkeypatch):
    monkeypatch.setenv("AZR_FAKE_KEY", KEY)
    monkeypatch.setattr(gen_module, "build_policy", lambda cfg, kind, stack: ReferencePolicy())
    cfg = load_config(recipe(write, "unused"), [])
    out = tmp_path / "rollouts.jsonl"
    assert run_gen(cfg, out) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 4 and len({r["id"] for r in records}) == 4
    r = records[0]
    assert r["schema"] == SCHEMA and r["id"] == f"{r['task_id']}#0" and isinstance(r["seed"], int)
    assert r["model"]["policy"] == "local" and r["sampling"]["max_turns"] == 3
    assert [t["function"]["name"] for t in r["tools"]] == ["python_run", "web_fetch"]
    assert [m["role"] for m in r["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    call = r["messages"][2]["tool_calls"][0]
    assert call["type"] == "function" and isinstance(call["function"]["arguments"], dict)
    assert r["messages"][3]["tool_call_id"] == call["id"] and r["messages"][3]["content"]
    assert r["tool_events"][0]["name"] == "python_run" and r["tool_events"][0]["status"] == "ok"
    assert set(r["tool_events"][0]) == {"name", "ok", "status", "duration_s", "truncated", "error"}
    assert r["finish_reason"] == "answer" and r["usage"]["turns"] == 2 and r["usage"]["tool_calls"] == 1
    assert all(x["grade"]["passed"] and x["grade"]["status"] == "passed" for x in records)
    assert r["rewards"]["tests_reward"] == 1.0 and r["rewards"]["total"] == pytest.approx(1.1)
    assert KEY not in out.read_text()


def test_a_key_reaches_no_record_or_log_even_when_the_model_writes_it(write, tmp_path, monkeypatch, caplog):
    """Defence in depth: the sandbox has no key to print, but a model that somehow wrote one into a call and got it
    echoed back still leaves no trace of it in the file or the logs."""
    monkeypatch.setenv("AZR_FAKE_KEY", KEY)
    probe = f"import os\nprint(dict(os.environ))\nprint('{KEY}')\nraise SystemExit('{KEY}')"
    monkeypatch.setattr(gen_module, "build_policy", lambda cfg, kind, stack: ReferencePolicy(probe=probe))
    out = tmp_path / "rollouts.jsonl"
    with caplog.at_level("DEBUG"):
        assert run_gen(load_config(recipe(write, "unused", max_tasks=1), []), out) == 0
    text = out.read_text()
    assert KEY not in text and KEY not in caplog.text
    record = json.loads(text)
    assert "<redacted>" in record["messages"][2]["tool_calls"][0]["function"]["arguments"]["code"]
    assert record["messages"][3]["content"].count("<redacted>") == 2 and "AZR_FAKE_KEY" not in text


def test_resume_refusals_come_before_any_slow_work(write, tmp_path, cli):
    path = recipe(write, "unused")
    out = tmp_path / "r.jsonl"
    out.write_text(json.dumps({"schema": SCHEMA, "model": {"policy": "other"}, "sampling": {}}) + "\n")
    code, _, err = cli("gen", "--config", path, "--out", out)
    assert code == 2 and "pass --resume" in err
    code, _, err = cli("gen", "--config", path, "--out", out, "--resume")
    assert code == 2 and "other model settings" in err
    code, _, err = cli("gen", "--config", path, "--out", tmp_path / "x.jsonl", "--set", "gen.policy=endpoint")
    assert code == 2 and "gen.endpoint.base_url: required" in err
    code, _, err = cli("gen", "--config", path, "--out", tmp_path / "x.jsonl", "--set", "tools.names=[python]")
    assert code == 2 and "did you mean 'python_run'" in err


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.slow  # minutes: azr gen on the tiny model, killed and resumed
def test_tiny_model_gen_over_8_tasks_survives_a_sigkill(write, tmp_path, tiny_model_dir):
    """The acceptance run: the tiny model over 8 tasks, killed with SIGKILL after its second episode, then resumed."""
    path = recipe(write, str(tiny_model_dir), max_tasks=8, max_turns=2, max_new_tokens=16, concurrency=2)
    out = tmp_path / "rollouts.jsonl"
    argv = [sys.executable, "-c", "from azr.cli import gen_main; gen_main()", "--config", str(path), "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 240
    while len(_lines(out)) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = [json.loads(line) for line in _lines(out)]
    assert 2 <= len(before) < 8, proc.stderr.read().decode()[-2000:]
    done = subprocess.run([*argv, "--resume"], env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-2000:]
    records = [json.loads(line) for line in _lines(out)]  # every line parses
    ids = [r["id"] for r in records]
    assert len(ids) == 8 and len(set(ids)) == 8, ids
    assert records[: len(before)] == before  # what was written before the kill is kept as it was
    assert all(r["schema"] == SCHEMA and r["grade"]["status"] != "error" for r in records)
    assert all(r["finish_reason"] in ("answer", "max_tokens", "max_turns", "parse_error") for r in records)
    assert "episodes" in done.stdout and "8" in done.stdout  # the summary table


def test_an_endpoint_replying_100000_levels_deep_fails_its_episodes_without_a_traceback(write, tmp_path, monkeypatch):
    """Each episode is a counted failure with its reason; the output holds those records, never an empty file."""
    from http_stub import Fault, StubServer

    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with StubServer() as stub:
        stub.always = Fault(body="[" * 100_000 + "]" * 100_000)
        endpoint = {"base_url": stub.url, "model": "m", "max_retries": 0}
        cfg = load_config(recipe(write, "unused", max_tasks=2, policy="endpoint", endpoint=endpoint), [])
        out = tmp_path / "rollouts.jsonl"
        assert run_gen(cfg, out) == 1
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 2 and all("response too deep" in (r["error"] or "") for r in records)
