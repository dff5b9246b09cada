"""The demo learns asynchronously: `examples/tiny.yaml` in adapter mode (a LoRA policy sampled by the vLLM CPU
server) sampling one generation ahead, through `azr train`. The recipe updates twice per generated batch
(num_iterations 2), so one generation ahead is `sampling.max_staleness: 2` (1 is refused at load: it could never
be met). The warm start trains all weights as the demo's does (`sft.full_weights`: a LoRA alone cannot warm-start
the random-init model; an earlier run with a LoRA warm start left a pass rate of 0), and GRPO trains a LoRA on the
warm-started weights, which the server serves as its base. GRPO alone, training on samples a generation old and
corrected by TRL's importance ratio against the version that drew them, still lifts the sampled train pass rate by
0.15, with the mean importance ratio near 1. A module of its own: the longest vLLM test.

That warm start and the pass rate before GRPO are bit for bit the demo's own (the same recipe, seed and data;
`sft.full_weights` only leaves the adapter out of the warm start), so the run continues the session's `demo_run`
(tests/conftest.py) after them with `--resume-from latest` rather than train them a second time: the same records
and final model as one run of its own (checked on a shortened recipe), one warm start less per CI run.

Each batch is sampled under its own seed (`azr.rollouts.pipeline.batch_seed`), so the run is the same however the
machine's load times it: two runs side by side on a loaded machine (32 min each) gave the same records and
0.635 -> 0.871, 512 samples each. Before the seeds, the batch drawn while the trainer trained came from the server's
shared random stream and the gain ranged over +0.10 .. +0.25 in five runs of one recipe (three of them under this
bar; with and without the TRL seam alike). It runs in the slow suite, and so in CI.
"""

from __future__ import annotations

import json
import statistics

import pytest
from conftest import VLLM_CPU_ARGS, VLLM_CPU_ENV, require_vllm_python
from run_files import continue_warm_start, read_phases, train_demo

# GRPO's LoRA: near full rank on the 128-wide tiny model, at a learning rate a few times the full-weight recipe's
# 5e-5 (an adapter's update is low-rank and starts from zero, as LoRA recipes scale it).
ADAPTER = ["model.adapter.kind=lora", "model.adapter.r=64", "model.adapter.alpha=128", "model.adapter.dropout=0"]


@pytest.mark.slow(minutes=15)  # the demo run (when this test is the one to make it), then GRPO with a vLLM server
@pytest.mark.timeout(3900)  # the demo's 1,500 s and this run's 2,400 s: setup (demo_run) and call count together
def test_the_demo_learns_with_samples_a_generation_old_in_adapter_mode(cli, tiny_model_dir, demo_run, tmp_path):
    out = tmp_path / "run"
    continue_warm_start(demo_run, out)
    overrides = [
        f"model.name_or_path={tiny_model_dir}",
        "logging.console=plain",
        *ADAPTER,
        "sft.full_weights=true",  # the demo's own warm start, of all weights; the LoRA is GRPO's
        "grpo.learning_rate=2.0e-4",
        "vllm.mode=adapter",
        f"vllm.python={require_vllm_python()}",
        "vllm.max_model_len=1024",
        f"vllm.extra_args={json.dumps(VLLM_CPU_ARGS)}",
        f"vllm.env={json.dumps(VLLM_CPU_ENV)}",
        "vllm.startup_timeout_s=540",
        "sampling.max_staleness=2",  # one generation ahead: the recipe updates twice per generated batch
    ]
    summary = train_demo(cli, out, overrides, resume=True)
    assert read_phases(out) == ["sft", "eval_before", "grpo", "eval_after"]
    before, after = summary["eval_before"], summary["eval_after"]
    assert after["pass_rate"] - before["pass_rate"] >= 0.15, (before, after)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    grpo = [r for r in records if r.get("phase") == "grpo" and "loss" in r]
    assert all(r["async/dropped_samples"] == 0 for r in grpo)
    # The second update on a batch generates nothing: the ratio and the staleness are in the generating steps' records.
    generated = [r for r in grpo if "async/staleness_mean" in r]
    assert len(generated) == len(grpo) // 2, [r["step"] for r in generated]
    ratios = [r["sampling/importance_sampling_ratio/mean"] for r in generated]
    assert abs(statistics.mean(ratios) - 1) < 0.05, ratios
    assert statistics.mean(r["async/staleness_mean"] for r in generated) > 0.5  # it did sample ahead
