"""`azr export`: each adapter kind merged into the tiny model gives the same logits as the adapter on its base, saves
as a full model that `AutoModelForCausalLM` loads, and is served by the real vLLM CPU server; a 4-bit base is
dequantized first (peft itself refuses to merge IA³ into 4-bit weights); user errors exit 2 before torch loads."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from azr.config import AdapterConfig, AzrConfig, ModelConfig, save_config

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*(is_)?gradient_checkpointing.*:FutureWarning"),
    pytest.mark.filterwarnings("ignore:Unsupported layer type .*RMSNorm:UserWarning"),
]
KINDS = {
    "lora": AdapterConfig(r=4, dora=True, rslora=True, bias="all", train_norms=True),
    "ia3": AdapterConfig(kind="ia3"),
    "ln_tuning": AdapterConfig(kind="ln_tuning"),
}


def _adapter(model_dir: Path, folder: Path, adapter: AdapterConfig, quantization: str = "none"):
    """An adapter of `adapter`'s kind whose every trained tensor is moved off its start, saved as a run saves it;
    returns the peft model it was saved from."""
    import peft

    from azr.models import build_model_and_tokenizer, build_peft_config

    cfg = ModelConfig(name_or_path=str(model_dir), quantization=quantization, adapter=adapter)
    base, tokenizer = build_model_and_tokenizer(cfg)
    model = peft.get_peft_model(base, build_peft_config(adapter, base))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for _, param in model.named_parameters():
            if param.requires_grad:
                noise = torch.randn(param.shape, generator=generator, dtype=torch.float32)
                param.add_((0.05 * noise).to(param.dtype))
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return model.eval(), tokenizer


def _logits(model, tokenizer) -> torch.Tensor:
    batch = tokenizer(["def add(a, b):\n    return a + b"], return_tensors="pt")
    with torch.no_grad():
        return model(**batch).logits.float()


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_merged_model_computes_what_the_adapter_did(cli, tiny_model_dir, tmp_path, kind):
    from transformers import AutoModelForCausalLM

    adapted, tokenizer = _adapter(tiny_model_dir, tmp_path / "adapter", KINDS[kind])
    code, out, err = cli(
        "export", "--adapter", tmp_path / "adapter", "--out", tmp_path / "merged", "--dtype", "float32"
    )
    assert code == 0, err
    assert f"merged model written to {tmp_path / 'merged'}" in out
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged")
    assert not any(
        "lora" in n or "ia3" in n or "ln_tuning" in n or "modules_to_save" in n for n, _ in merged.named_parameters()
    )
    assert torch.allclose(_logits(merged, tokenizer), _logits(adapted, tokenizer), atol=1e-4)
    assert (tmp_path / "merged" / "tokenizer.json").is_file()
    card = (tmp_path / "merged" / "README.md").read_text()
    assert "merged into its base by azr export" in card and "quantization none; from adapter_config.json" in card
    assert not (tmp_path / "merged.partial").exists()


@pytest.mark.parametrize("kind", ["lora", "ia3"])
def test_an_adapter_loaded_for_sampling_is_merged_into_its_base_and_computes_what_it_did(
    tiny_model_dir, tmp_path, kind
):
    """`azr eval --adapter` and `azr gen` sample a merged model (peft's unmerged layers cost generation time); a
    run that trains the adapter on keeps it a peft model."""
    from peft import PeftModel

    from azr.models import load_policy

    adapted, tokenizer = _adapter(tiny_model_dir, tmp_path / "adapter", KINDS[kind])
    cfg = ModelConfig(name_or_path=str(tiny_model_dir))
    sampled, _ = load_policy(cfg, tmp_path / "adapter")
    assert not isinstance(sampled, PeftModel) and not sampled.training
    assert torch.allclose(_logits(sampled, tokenizer), _logits(adapted, tokenizer), atol=1e-4)
    trained, _ = load_policy(cfg, tmp_path / "adapter", trainable=True)
    assert isinstance(trained, PeftModel)


def test_a_4bit_base_is_dequantized_before_merging(cli, tiny_model_dir, tmp_path, caplog):
    """A run's final/ adapter on a 4-bit base: the base settings come from the run's config.yaml."""
    pytest.importorskip("bitsandbytes", reason="a 4-bit base needs bitsandbytes (pip install 'azr[qlora]')")
    run = tmp_path / "run"
    cfg = AzrConfig(output_dir=str(run), model=ModelConfig(str(tiny_model_dir), quantization="4bit"))
    cfg.model.adapter = AdapterConfig(kind="ia3")
    run.mkdir()
    save_config(cfg, run / "config.yaml")
    adapted, tokenizer = _adapter(tiny_model_dir, run / "final", cfg.model.adapter, quantization="4bit")
    with pytest.raises(
        ValueError, match="Cannot merge ia3 layers when the model is loaded in 4-bit mode"
    ):  # what `azr export` avoids: peft cannot merge IA³ into 4-bit
        adapted.merge_and_unload()
    with caplog.at_level(logging.WARNING, logger="azr.models.export"):
        code, _, err = cli("export", "--adapter", run / "final", "--out", tmp_path / "merged", "--dtype", "float32")
    assert code == 0, err
    assert "trained 4bit-quantized; it is dequantized to float32" in caplog.text
    config = json.loads((tmp_path / "merged" / "config.json").read_text())
    assert "quantization_config" not in config
    from transformers import AutoModelForCausalLM

    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged")
    assert torch.allclose(_logits(merged, tokenizer), _logits(adapted, tokenizer), atol=1e-3)
    card = (tmp_path / "merged" / "README.md").read_text()
    assert f"quantization 4bit; from {run / 'config.yaml'}" in card and "dequantized first" in card


def test_user_errors_exit_2_in_one_line_before_torch_loads(tiny_model_dir, tmp_path):
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "base_model_name_or_path": "x"}))
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "file").write_text("kept")
    prompt = tmp_path / "prompt"
    prompt.mkdir()
    (prompt / "adapter_config.json").write_text(json.dumps({"peft_type": "PROMPT_TUNING"}))
    typeless = tmp_path / "typeless"
    typeless.mkdir()
    (typeless / "adapter_config.json").write_text(json.dumps({"r": 8}))  # peft itself raised KeyError: 'peft_type'
    cases = [
        (["--adapter", tmp_path / "missing", "--out", tmp_path / "o"], "--adapter .*missing: no such directory"),
        (["--adapter", typeless, "--out", tmp_path / "o"], "typeless: adapter_config.json names no peft_type"),
        (["--adapter", tiny_model_dir, "--out", tmp_path / "o"], "not a peft adapter directory"),
        (["--adapter", prompt, "--out", tmp_path / "o"], "peft type 'PROMPT_TUNING' is not one azr merges"),
        (["--adapter", adapter, "--out", tmp_path / "o", "--dtype", "int8"], "--dtype: expected one of bfloat16"),
        (["--adapter", adapter, "--out", taken], "--out .*taken: already exists and is not an empty folder"),
        (["--out", tmp_path / "o"], "Missing option '--adapter'"),
    ]
    script = (
        "import sys; from azr.cli import azr, invoke; code = invoke(azr, 'azr', sys.argv[1:]); "
        "print('torch loaded' if 'torch' in sys.modules else 'no torch'); sys.exit(code)"
    )
    for args, message in cases:
        done = subprocess.run(
            [sys.executable, "-c", script, "export", *map(str, args)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("azr: error: "), done.stderr
        assert re.search(message, done.stderr), done.stderr
        assert done.stdout.strip() == "no torch"
    assert (taken / "file").read_text() == "kept" and not (tmp_path / "o").exists()


@pytest.mark.slow(minutes=0.8)  # starts a vLLM server
def test_vllm_serves_the_merged_model(tiny_model_dir, tmp_path):
    """One server start, on the export with every LoRA option merged in (the adapter vLLM could not serve)."""
    from conftest import vllm_python

    from azr.config import vllm_lora_problem
    from azr.models import export_merged, plan_export
    from azr.remote import ChatClient
    from azr.serving import VllmServer

    python, reason = vllm_python()
    if python is None:
        if os.environ.get("AZR_REQUIRE_VLLM") == "1":
            pytest.fail(f"AZR_REQUIRE_VLLM=1 but {reason}")
        pytest.skip(reason)
    assert vllm_lora_problem(KINDS["lora"]) is not None  # unmerged, vLLM would refuse this adapter
    _adapter(tiny_model_dir, tmp_path / "adapter", KINDS["lora"])
    merged = export_merged(plan_export(tmp_path / "adapter", tmp_path / "merged", "bfloat16"))
    server = VllmServer(
        model=str(merged),
        python=python,
        served_model_name="merged",
        max_model_len=1024,
        extra_args=["--enforce-eager", "--dtype", "float32", "--max-num-seqs", "8", "--max-num-batched-tokens", "8192"],
        env={"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        log_path=tmp_path / "server.log",
        startup_timeout_s=540,
    )
    with server:
        client = ChatClient(server.base_url, server.model_name, timeout_s=120, max_retries=0, concurrency=1)
        (reply,) = client.chat_many([[{"role": "user", "content": "Write add(a, b)."}]], max_tokens=8)
        assert reply.ok, reply.error
        assert isinstance(reply.text, str)
