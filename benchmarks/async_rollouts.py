"""Asynchronous GRPO against synchronous adapter mode: wall time per optimizer step and tokens/s, side by side.

Every arm trains the same LoRA policy (the tiny model unless --model) with `AZRGRPOTrainer` in adapter mode (the
vLLM server, one LoRA per policy version), the same GRPOConfig, dataset and a trivial reward (completion length /
1000: no sandbox, constant cost), so the arms differ only in `sampling.max_staleness`: 0 (each step waits for its
own generation), 1 and 2 (the pipeline samples the next batches while the trainer trains). One server serves every
run (its start-up is reported apart); runs are interleaved (0 1 2 2 1 0 ...) so that drift in the machine's load
falls on every arm alike.

A second set of arms is a SIMULATION of a machine where generation dominates, as on a GPU with a large model: every
generation call is followed by a sleep of (factor - 1) x its own duration (`--slowdown`, declared in the output),
for max_staleness 0 and 1.

Usage: python benchmarks/async_rollouts.py [--vllm-python PY] [--model DIR] [--steps K] [--repeats R]
       [--slowdown F] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The vLLM CPU flags the tests use (tests/conftest.py): eager, float32, and a batch that holds every prompt whole.
CPU_ARGS = ["--enforce-eager", "--dtype", "float32", "--max-num-seqs", "8", "--max-num-batched-tokens", "8192"]


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _vllm_python(given: str | None) -> str:
    if given or os.environ.get("AZR_VLLM_PYTHON"):
        return given or os.environ["AZR_VLLM_PYTHON"]
    sys.path.insert(0, str(REPO / "scripts"))
    import vllm_cpu_env

    return str(vllm_cpu_env.default_dir() / "bin" / "python")


def _config(model: str, python: str, gpu: bool, max_staleness: int):
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
        f"sampling.max_staleness={max_staleness}",
    ]
    return load_config(None, overrides)


def _length_reward(completions, **kwargs):
    return [len(str(c)) / 1000 for c in completions]


def _slowed(fn, factor: float, seconds: list[float]):
    """`fn`, followed by a sleep of (factor - 1) x its own duration; the whole time is added to `seconds`."""

    def call(*a, **k):
        started = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            took = time.perf_counter() - started
            time.sleep((factor - 1) * took)
            seconds[0] += factor * took

    return call


def _run(staleness: int, slowdown: float, cfg, args, server, folder: Path) -> dict:
    """One arm's K steps on a fresh copy of the policy: tokens/s, s/step, generation seconds and staleness."""
    from transformers import PrinterCallback, TrainerCallback, set_seed
    from trl import GRPOConfig

    from azr.config import SamplingConfig
    from azr.data import load_tasks
    from azr.models import build_model_and_tokenizer, build_peft_config
    from azr.rollouts import GroupSampler, RolloutFilter
    from azr.serving import Sidecar
    from azr.training import grpo_dataset
    from azr.training.generation import use_generation_backend
    from azr.training.grpo import asynchronous, grpo_rows
    from azr.training.trainer import AZRGRPOTrainer

    set_seed(0)
    tasks = load_tasks("train")[: args.prompts * args.steps]
    model, tokenizer = build_model_and_tokenizer(cfg.model)
    sampling = RolloutFilter(
        SamplingConfig(max_staleness=staleness),
        GroupSampler({t.id: r for t, r in zip(tasks, grpo_rows(tasks), strict=True)}),
        composes=False,
    )
    logs: list[dict] = []

    class Keep(TrainerCallback):
        def on_log(self, _args, state, control, logs=None, **kwargs):
            kept.append(dict(logs or {}))

    kept = logs
    trainer = AZRGRPOTrainer(
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
        train_dataset=grpo_dataset(tasks),
        processing_class=tokenizer,
        peft_config=build_peft_config(cfg.model.adapter, model),
        sampling=sampling,
        callbacks=[Keep()],
    )
    trainer.remove_callback(PrinterCallback)  # stdout holds the figures only
    sidecar = Sidecar(cfg)
    sidecar.server, sidecar.folder = server, folder
    backend = sidecar.generation(trainer)
    generate_s = [0.0]
    backend.generate = _slowed(backend.generate, slowdown, generate_s)
    backend.sample_latest = _slowed(backend.sample_latest, slowdown, generate_s)
    use_generation_backend(trainer, backend)
    pipeline = None
    if staleness:
        sampling.pipeline = pipeline = asynchronous(trainer, backend, staleness)
    started = time.perf_counter()
    try:
        trainer.train()
    finally:
        if pipeline is not None:
            pipeline.close()
    seconds = time.perf_counter() - started
    backend.close()  # the next run's versions take the same names on this server
    steps = [entry for entry in logs if "loss" in entry]
    return {
        "max_staleness": staleness,
        "slowdown": slowdown,
        "tokens_per_s": trainer.state.num_input_tokens_seen / seconds,
        "step_s": seconds / args.steps,
        "generate_s": generate_s[0] / args.steps,
        "staleness_mean": statistics.mean(e.get("async/staleness_mean", 0.0) for e in steps),
        "importance_ratio_mean": statistics.mean(e["sampling/importance_sampling_ratio/mean"] for e in steps),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm-python", help="interpreter of the vLLM venv [$AZR_VLLM_PYTHON, else the CPU venv]")
    parser.add_argument("--model", help="a model directory (default: the tiny model, built in a temp dir)")
    parser.add_argument("--steps", type=int, default=6, help="GRPO steps per run")
    parser.add_argument("--repeats", type=int, default=1, help="runs per arm (interleaved: 0 1 2 2 1 0 ...)")
    parser.add_argument("--prompts", type=int, default=2, help="prompts per step")
    parser.add_argument("--group", type=int, default=8, help="completions per prompt (num_generations)")
    parser.add_argument("--tokens", type=int, default=64, help="max_completion_length")
    parser.add_argument("--slowdown", type=float, default=4.0, help="SIMULATED arms: generation this many times slower")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")

    import torch

    from azr.models import build_tiny_model, quiet_third_party
    from azr.serving import adapter_server

    quiet_third_party()
    args.gpu = torch.cuda.is_available()
    tmp = Path(tempfile.mkdtemp(prefix="azr-async-"))
    server, runs = None, []
    real = [0, 1, 2]
    simulated = [0, 1]
    try:
        model = args.model or str(build_tiny_model(tmp / "tiny", seed=0))
        python = _vllm_python(args.vllm_python)
        server = adapter_server(_config(model, python, args.gpu, max(real)), None, log_path=tmp / "server.log")
        started = time.perf_counter()
        server.start()
        startup = time.perf_counter() - started
        _say(f"vLLM server up in {startup:.1f} s")
        order = []
        for r in range(args.repeats):
            order += [(k, 1.0) for k in (real if r % 2 == 0 else real[::-1])]
            order += [(k, args.slowdown) for k in (simulated if r % 2 == 0 else simulated[::-1])]
        for i, (staleness, slowdown) in enumerate(order):
            cfg = _config(model, python, args.gpu, staleness)
            runs.append(_run(staleness, slowdown, cfg, args, server, tmp / f"run-{i}"))
            last = runs[-1]
            speed = f"{last['step_s']:.2f} s/step, {last['tokens_per_s']:.1f} tokens/s"
            _say(f"max_staleness {staleness}, slowdown {slowdown:g}: {speed}")
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    def mean(staleness: int, slowdown: float, key: str) -> float:
        return statistics.mean(r[key] for r in runs if r["max_staleness"] == staleness and r["slowdown"] == slowdown)

    figures = {
        "device": "cuda" if args.gpu else "cpu",
        "model": args.model or "tiny (1 M parameters)",
        "batch": f"{args.prompts} prompts x {args.group} completions x {args.tokens} tokens, {args.steps} steps",
        "server_startup_s": round(startup, 1),
    }
    for k in real:
        figures[f"staleness{k}_step_s"] = round(mean(k, 1.0, "step_s"), 2)
        figures[f"staleness{k}_tokens_per_s"] = round(mean(k, 1.0, "tokens_per_s"), 1)
        figures[f"staleness{k}_generate_s_per_step"] = round(mean(k, 1.0, "generate_s"), 2)
        figures[f"staleness{k}_importance_ratio_mean"] = round(mean(k, 1.0, "importance_ratio_mean"), 4)
    for k in real[1:]:
        figures[f"async{k}_over_sync_step_time"] = round(mean(k, 1.0, "step_s") / mean(0, 1.0, "step_s"), 2)
    figures["simulated_slowdown"] = args.slowdown
    for k in simulated:
        figures[f"simulated_staleness{k}_step_s"] = round(mean(k, args.slowdown, "step_s"), 2)
    figures["simulated_async1_over_sync_step_time"] = round(
        mean(1, args.slowdown, "step_s") / mean(0, args.slowdown, "step_s"), 2
    )
    figures["runs"] = runs
    if args.json:
        print(json.dumps(figures))
        return
    for key, value in figures.items():
        if key != "runs":
            print(f"{key:>40}: {value}")


if __name__ == "__main__":
    main()
