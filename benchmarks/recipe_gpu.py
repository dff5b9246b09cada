"""A shipped GPU recipe on a model of the real shape: peak GPU memory and GRPO tokens/s, against the recipe's notes.

No model hub is reachable from azr's test machines, so the script writes a random-init model with the named shape
(Qwen2.5-Coder-7B or -1.5B: the same layers, widths and 152k vocabulary, hence the same weights, activations and
logits memory) and azr's tiny-model tokenizer, whose ids all fall inside that vocabulary. A random model rarely
emits EOS, so every completion runs to `max_completion_length`: the worst case for generation time and the KV cache,
which is what a memory figure should cover. The recipe is then run by `azr train` as shipped, with only what a
measurement needs changed (a few steps, no evaluation, no checkpoints, no before/after sampling, no warm start).

Peak memory is read two ways while the run goes: nvidia-smi's used memory (what other processes on the GPU see,
CUDA context and allocator cache included) sampled every 0.2 s, and, after the run, the trainer's own logs.

Usage: python benchmarks/recipe_gpu.py --recipe examples/qwen2.5-coder-7b-qlora.yaml --shape qwen2.5-coder-7b
           [--steps 2] [--work DIR] [--set KEY=VALUE ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from recipe_memory import ARCHS  # the published shapes, one table for both GPU benchmarks

SHAPES = {
    "qwen2.5-coder-7b": ARCHS["Qwen/Qwen2.5-Coder-7B-Instruct"],
    "qwen2.5-coder-1.5b": ARCHS["Qwen/Qwen2.5-Coder-1.5B-Instruct"],
}
# What a measurement changes in a recipe; everything else runs as shipped.
MEASURE = [
    "logging.pass_rate_tasks=0",
    "sft.enabled=false",
    "grpo.eval_strategy=no",
    "grpo.eval_on_start=false",
    "grpo.save_strategy=no",
    "grpo.report_to=none",
    "logging.console=plain",
]


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def build_random_model(shape: str, out: Path) -> Path:
    """A random-init Qwen2 causal LM of `shape` in bfloat16 with the tiny model's tokenizer, saved to `out`."""
    import torch
    from transformers import Qwen2ForCausalLM

    from azr.models import build_tiny_model

    tokenizer_dir = build_tiny_model(out / "tokenizer-source")  # the tokenizer and chat template azr tests with
    config = json.loads((tokenizer_dir / "config.json").read_text())
    qwen = SHAPES[shape].qwen2_config(
        bos_token_id=None,
        eos_token_id=config["eos_token_id"],
        pad_token_id=config["pad_token_id"],
        use_sliding_window=False,
        torch_dtype="bfloat16",
    )
    device = "cuda" if torch.cuda.is_available() else "cpu"
    started = time.monotonic()
    with torch.device(device):
        model = Qwen2ForCausalLM(qwen).to(torch.bfloat16)
    model_dir = out / shape
    model.save_pretrained(model_dir)
    for name in os.listdir(tokenizer_dir):
        if "token" in name or name.endswith(".jinja") or name == "generation_config.json":
            (model_dir / name).write_bytes((tokenizer_dir / name).read_bytes())
    params = sum(p.numel() for p in model.parameters())
    _say(f"random-init {shape}: {params / 1e9:.2f} B parameters written in {time.monotonic() - started:.0f} s")
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    return model_dir


class GpuSampler:
    """Samples nvidia-smi's used memory (MiB, first GPU) every `period` seconds in a thread; `peak` is the maximum."""

    def __init__(self, period: float = 0.2):
        self.period, self.peak, self._stop = period, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        query = ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"]
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, int(subprocess.run(query, capture_output=True, text=True).stdout.split()[0]))
            except (OSError, ValueError, IndexError):
                return
            self._stop.wait(self.period)

    def __enter__(self) -> GpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_recipe(recipe: Path, model_dir: Path, out: Path, steps: int, extra: list[str]) -> dict:
    overrides = [f"model.name_or_path={model_dir}", f"output_dir={out}", f"grpo.max_steps={steps}", *MEASURE, *extra]
    argv = [sys.executable, "-c", "from azr.cli import train_main; train_main()", "--config", str(recipe)]
    for item in overrides:
        argv += ["--set", item]
    started = time.monotonic()
    with GpuSampler() as gpu:
        result = subprocess.run(argv)
    wall = time.monotonic() - started
    if result.returncode != 0:
        sys.exit(f"recipe_gpu: azr train exited {result.returncode}")
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    grpo = [r for r in records if r.get("phase") == "grpo" and r.get("step_time_s")]
    rates = [r["tokens_per_s"] for r in grpo if r.get("tokens_per_s")]
    return {
        "steps": len(grpo),
        "wall_s": round(wall, 1),
        "nvidia_smi_peak_gib": round(gpu.peak / 1024, 2),
        "tokens_per_s": rates,
        "step_time_s": [r["step_time_s"] for r in grpo],
        "reward_share": [r.get("reward_share") for r in grpo],
        "completion_length": [r.get("completion_length") for r in grpo],
        "gpu_peak_allocated_gib": max((r.get("gpu_peak_allocated_gib") or 0 for r in grpo), default=None),
        "gpu_peak_reserved_gib": max((r.get("gpu_peak_reserved_gib") or 0 for r in grpo), default=None),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", type=Path, required=True)
    parser.add_argument("--shape", choices=sorted(SHAPES), required=True)
    parser.add_argument("--steps", type=int, default=2, help="optimizer steps (the 7B recipe does 2 per generation)")
    parser.add_argument("--work", type=Path, help="folder for the model and the run (default: a temp dir)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="more recipe overrides")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="azr-recipe-gpu-"))
    model_dir = work / args.shape
    if not (model_dir / "config.json").exists():
        model_dir = build_random_model(args.shape, work)
    figures = {
        "recipe": str(args.recipe),
        "shape": args.shape,
        **run_recipe(args.recipe, model_dir, work / "run", args.steps, args.set),
    }
    if args.json:
        print(json.dumps(figures))
        return
    for key, value in figures.items():
        print(f"{key:>24}: {value}")


if __name__ == "__main__":
    main()
