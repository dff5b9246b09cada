"""GRPO step throughput with HF generate against adapter mode's vLLM server, and the per-step sync cost, side by side.

Both arms train the same LoRA policy (the tiny model unless --model) for K GRPO steps with the same GRPOConfig,
dataset and a trivial reward (completion length / 1000: no sandbox, constant cost), so the difference between them
is generation: (a) TRL's HF `generate` in the trainer, (b) `azr.serving.LoraSync`, which saves the adapter, loads
it into the vLLM server (`--enable-lora`, a new name per step) and samples each batch there as token ids. The
server starts once (its start-up time is reported apart); runs alternate A B B A ... so that drift in the machine's
load falls on both arms alike.

Reported per arm: tokens/s (prompt + completion tokens, TRL's `num_input_tokens_seen`, over train wall time) and
seconds per step; for the vLLM arm also the sync per step (save, then load + unload) and generation per step.
On a CPU with a 1 M-parameter model vLLM need not win: its per-request and per-adapter overheads dominate there.

Usage: python benchmarks/generation.py [--vllm-python PY] [--model DIR] [--steps K] [--repeats R] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from vllm_cpu import CPU_ARGS, vllm_python


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _config(args: argparse.Namespace, model: str, python: str, gpu: bool):
    from azr.config import load_config

    overrides = [
        f"model.name_or_path={model}",
        "model.dtype=auto",
        "model.adapter.r=8",
        "model.adapter.alpha=16",
        "model.adapter.dropout=0",
        "model.gradient_checkpointing=false",
        "vllm.mode=adapter",
        f"vllm.python={python}",
        "vllm.max_model_len=1024",
        f"vllm.extra_args={json.dumps([] if gpu else CPU_ARGS)}",
        f"vllm.env={json.dumps({} if gpu else {'VLLM_CPU_KVCACHE_SPACE': '2'})}",
    ]
    return load_config(None, overrides)


def _length_reward(completions, **kwargs):
    return [len(str(c)) / 1000 for c in completions]


def _run(arm: str, cfg, args, server, folder: Path) -> dict:
    """One arm's K steps on a fresh copy of the policy: tokens/s, s/step, and the vLLM arm's own timings."""
    from transformers import set_seed
    from trl import GRPOConfig, GRPOTrainer

    from azr.data import load_tasks
    from azr.models import build_model_and_tokenizer, build_peft_config
    from azr.serving import Sidecar
    from azr.training import grpo_dataset
    from azr.training.trl.generation import use_generation_backend

    set_seed(0)
    model, tokenizer = build_model_and_tokenizer(cfg.model)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[_length_reward],
        args=GRPOConfig(
            output_dir=str(folder / "checkpoints"),
            num_generations=args.group,
            per_device_train_batch_size=args.group * args.prompts,
            max_completion_length=args.tokens,
            temperature=1.0,
            max_steps=args.steps,
            learning_rate=1e-4,
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
            seed=0,
            **({} if args.gpu else {"use_cpu": True, "bf16": False}),
        ),
        train_dataset=grpo_dataset(load_tasks("train")[: args.prompts * args.steps]),
        processing_class=tokenizer,
        peft_config=build_peft_config(cfg.model.adapter, model),
    )
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # stdout holds the figures only
    backend = None
    generate_s = 0.0
    if arm == "vllm":
        sidecar = Sidecar(cfg)
        sidecar.server, sidecar.folder = server, folder
        backend = sidecar.generation(trainer)
        generate = backend.generate

        def timed(*a, **k):
            nonlocal generate_s
            started = time.perf_counter()
            try:
                return generate(*a, **k)
            finally:
                generate_s += time.perf_counter() - started

        backend.generate = timed
        use_generation_backend(trainer, backend)
    started = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - started
    if backend is not None:
        backend.close()  # the next vLLM run's versions take the same names on this server
    result = {
        "arm": arm,
        "tokens_per_s": trainer.state.num_input_tokens_seen / seconds,
        "step_s": seconds / args.steps,
    }
    if backend is not None:
        result |= {
            "sync_s": backend.sync_seconds / backend.syncs,
            "save_s": backend.save_seconds / backend.syncs,
            "load_s": (backend.sync_seconds - backend.save_seconds) / backend.syncs,
            "generate_s": generate_s / args.steps,
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm-python", help="interpreter of the vLLM venv [$AZR_VLLM_PYTHON, else the CPU venv]")
    parser.add_argument("--model", help="a model directory (default: the tiny model, built in a temp dir)")
    parser.add_argument("--steps", type=int, default=4, help="GRPO steps per run")
    parser.add_argument("--repeats", type=int, default=2, help="runs per arm (order A B B A ...)")
    parser.add_argument("--prompts", type=int, default=2, help="prompts per step")
    parser.add_argument("--group", type=int, default=8, help="completions per prompt (num_generations)")
    parser.add_argument("--tokens", type=int, default=64, help="max_completion_length")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")

    import torch

    from azr.models import build_tiny_model, quiet_third_party
    from azr.serving import adapter_server

    quiet_third_party()
    args.gpu = torch.cuda.is_available()
    tmp = Path(tempfile.mkdtemp(prefix="azr-generation-"))
    server = None
    try:
        model = args.model or str(build_tiny_model(tmp / "tiny", seed=0))
        cfg = _config(args, model, vllm_python(args.vllm_python), args.gpu)
        server = adapter_server(cfg, None, log_path=tmp / "server.log")
        started = time.perf_counter()
        server.start()
        startup = time.perf_counter() - started
        _say(f"vLLM server up in {startup:.1f} s")
        runs = []
        order = [("hf", "vllm")[(i + i // 2) % 2] for i in range(2 * args.repeats)]  # hf vllm vllm hf ...
        for i, arm in enumerate(order):
            runs.append(_run(arm, cfg, args, server, tmp / f"run-{i}"))
            _say(f"{arm}: {runs[-1]['tokens_per_s']:.1f} tokens/s, {runs[-1]['step_s']:.2f} s/step")
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    def mean(arm: str, key: str) -> float:
        return statistics.mean(r[key] for r in runs if r["arm"] == arm)

    figures = {
        "device": "cuda" if args.gpu else "cpu",
        "model": args.model or "tiny (1 M parameters)",
        "batch": f"{args.prompts} prompts x {args.group} completions x {args.tokens} tokens, {args.steps} steps",
        "server_startup_s": round(startup, 1),
        "hf_tokens_per_s": round(mean("hf", "tokens_per_s"), 1),
        "vllm_tokens_per_s": round(mean("vllm", "tokens_per_s"), 1),
        "speedup": round(mean("vllm", "tokens_per_s") / mean("hf", "tokens_per_s"), 2),
        "hf_step_s": round(mean("hf", "step_s"), 2),
        "vllm_step_s": round(mean("vllm", "step_s"), 2),
        "vllm_generate_s_per_step": round(mean("vllm", "generate_s"), 3),
        "sync_s_per_step": round(mean("vllm", "sync_s"), 3),
        "save_s_per_step": round(mean("vllm", "save_s"), 3),
        "load_s_per_step": round(mean("vllm", "load_s"), 3),
        "runs": runs,
    }
    if args.json:
        print(json.dumps(figures))
        return
    for key, value in figures.items():
        if key != "runs":
            print(f"{key:>26}: {value}")


if __name__ == "__main__":
    main()
