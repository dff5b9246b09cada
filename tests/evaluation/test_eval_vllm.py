"""`azr eval --vllm`: the local model and its adapter sampled through a vLLM server azr starts for the evaluation (one
real vLLM CPU server, ~40 s idle), with the same samples and report as HF generate gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import VLLM_CPU_ARGS, VLLM_CPU_ENV, require_vllm_python

from azr.data.tasks import load_tasks

HELD_OUT = load_tasks("held-out")


def servers_of(model_dir: Path) -> list[int]:
    """Pids of vLLM servers on `model_dir` still running."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"vllm.entrypoints.openai.api_server" in argv and str(model_dir).encode() in argv:
            found.append(int(entry.name))
    return found


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]


@pytest.mark.slow(minutes=0.8)  # starts a vLLM server
@pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing.*:FutureWarning")  # peft's save_pretrained
def test_an_adapter_evaluated_through_vllm_gives_hf_generates_samples(cli, tiny_model_dir, tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    python = require_vllm_python()
    lora = LoraConfig(r=8, lora_alpha=64, target_modules=["q_proj", "v_proj", "o_proj"], init_lora_weights=False)
    get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir), lora).save_pretrained(tmp_path / "adapter")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t.to_json()) + "\n" for t in HELD_OUT[:4]))
    recipe = tmp_path / "r.yaml"
    vllm = {"python": python, "max_model_len": 1024, "extra_args": VLLM_CPU_ARGS, "env": VLLM_CPU_ENV}
    recipe.write_text(yaml.safe_dump({"model": {"name_or_path": str(tiny_model_dir)}, "vllm": vllm}))
    common = ["eval", "--config", recipe, "--adapter", tmp_path / "adapter", "--dataset", tasks]
    common += ["--temperature", "0", "--max-new-tokens", "12"]

    before = set(servers_of(tiny_model_dir))  # the session's shared server may serve the same model on this worker
    code, _, err = cli(*common, "--vllm", "--output-dir", tmp_path / "vllm")
    assert code == 0, err
    assert not set(servers_of(tiny_model_dir)) - before, "the evaluation's server outlived it"
    code, _, err = cli(*common, "--output-dir", tmp_path / "hf")
    assert code == 0, err

    served, local = records(tmp_path / "vllm"), records(tmp_path / "hf")
    assert [set(r) for r in served] == [set(r) for r in local]  # the same samples file
    assert all(r["status"] != "request_failed" for r in served)
    # greedy, float32 on both sides, the chat template applied by each: the adapter's answers word for word
    assert [r["completion"] for r in served] == [r["completion"] for r in local]
    vllm_report = json.loads((tmp_path / "vllm" / "report.json").read_text())
    hf_report = json.loads((tmp_path / "hf" / "report.json").read_text())
    assert vllm_report["settings"]["model"] == {**hf_report["settings"]["model"], "backend": "vllm"}
    assert vllm_report["pass_at_k"] == hf_report["pass_at_k"]

    # a folder sampled by HF generate is not continued by vLLM (nor the other way round)
    code, _, err = cli(*common, "--vllm", "--output-dir", tmp_path / "hf")
    assert code == 2 and "backend" in err


def test_vllm_needs_a_local_model(cli, tmp_path):
    code, _, err = cli("eval", "--endpoint", "http://127.0.0.1:9/v1", "--endpoint-model", "m", "--vllm",
                       "--dataset", "held-out", "--output-dir", tmp_path / "o")  # fmt: skip
    assert code == 2 and err.startswith("azr: error: --vllm: serves a local model; give --model or --config"), err
