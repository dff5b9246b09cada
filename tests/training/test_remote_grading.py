"""A tiny GRPO run whose every reward is graded on a loopback `azr sandbox serve` (sandbox.provider: remote)."""

from __future__ import annotations

import json

import httpx2
import pytest
import yaml
from procs import TOKEN, TOKEN_ENV, start_server, stop

from azr.config import load_config


@pytest.mark.slow(minutes=3)
def test_a_tiny_grpo_run_grades_every_reward_on_a_sandbox_server(tiny_model_dir, tmp_path, monkeypatch):
    from azr.training.run import run_train

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    server, url = start_server(tmp_path / "serve.log")
    try:
        out = tmp_path / "run"
        recipe = {
            "output_dir": str(out),
            "seed": 0,
            "model": {"name_or_path": str(tiny_model_dir), "adapter": {"r": 4}},
            "data": {"max_tasks": 4},
            "grpo": {
                "num_generations": 2,
                "per_device_train_batch_size": 4,
                "max_completion_length": 16,
                "max_steps": 2,
                "save_steps": 2,
                "logging_steps": 1,
            },
            "logging": {"console": "plain", "pass_rate_tasks": 2, "pass_rate_samples": 2},
            "sandbox": {"provider": "remote", "remote": {"urls": [url], "token_env": TOKEN_ENV}},
        }
        (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))
        assert run_train(load_config(tmp_path / "recipe.yaml")) == 0
        health = httpx2.get(f"{url}/health", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    finally:
        stop(server)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if r.get("phase") == "grpo" and "sandbox/passed" in r]
    assert len(steps) == 2
    assert all(r["sandbox/remote_requests"] > 0 and r.get("sandbox/remote_lost", 0) == 0 for r in steps)
    assert health["programs"] >= 2 * 4  # every completion of both steps, besides the reference checks
