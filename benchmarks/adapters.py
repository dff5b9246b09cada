"""Adapter kinds side by side in one run: trainable parameters, GRPO step time, peak memory, and whether the trained
tensors moved (IA³ scales and norms on a quantized base move only in float32; see azr.models.keep_vectors_fp32).

    python benchmarks/adapters.py                          # the tiny model (built in a temp dir), CPU
    python benchmarks/adapters.py --model DIR --quantization 4bit --kinds lora,ia3 --steps 3 --batch 8
    python benchmarks/adapters.py --trl-cast-only          # skip azr's float32 vectors: TRL's bf16 cast alone

Each kind gets a fresh model and AZRGRPOTrainer with the same data, seed and a reward that varies within every
group (so every step has a gradient). Step time is the mean over the steps after the first (the first one warms
up kernels and allocators). Peak memory is torch.cuda.max_memory_allocated on a GPU, the process's peak RSS growth
on a CPU (coarser: RSS never shrinks, so kinds run in a fresh subprocess each).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

KINDS = {
    "lora": {"kind": "lora"},
    "lora+dora": {"kind": "lora", "dora": True},
    "lora+rslora": {"kind": "lora", "rslora": True},
    "lora+bias": {"kind": "lora", "bias": "all"},
    "lora+norms": {"kind": "lora", "train_norms": True},
    "ia3": {"kind": "ia3"},
    "ln_tuning": {"kind": "ln_tuning"},
    "none": {"kind": "none"},
}


def distinct_chars(completions, **columns):
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [float(len(set(text))) for text in texts]


def measure(args: argparse.Namespace, name: str) -> dict:
    """One kind in this process: build, train `args.steps` GRPO steps, report."""
    import torch
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from azr.config import AdapterConfig, ModelConfig
    from azr.data import load_tasks
    from azr.models import build_model_and_tokenizer, build_peft_config, quiet_third_party, trainable_parameters
    from azr.training import grpo_dataset
    from azr.training.trl.trainer import AZRGRPOTrainer

    quiet_third_party()
    gpu = torch.cuda.is_available()
    adapter = AdapterConfig(**KINDS[name], r=args.r)
    cfg = ModelConfig(name_or_path=args.model, quantization=args.quantization, dtype=args.dtype, adapter=adapter)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    model, tokenizer = build_model_and_tokenizer(cfg)
    if gpu:
        torch.cuda.reset_peak_memory_stats()  # the trainer moves an unquantized model onto the GPU: counted

    class Steps(TrainerCallback):
        def __init__(self):
            self.times: list[float] = []

        def on_step_begin(self, *a, **k):
            self.t0 = time.perf_counter()

        def on_step_end(self, *a, **k):
            if gpu:
                torch.cuda.synchronize()
            self.times.append(time.perf_counter() - self.t0)

    trainer_class = GRPOTrainer if args.trl_cast_only else AZRGRPOTrainer
    trainer = trainer_class(
        model=model,
        reward_funcs=[distinct_chars],
        args=GRPOConfig(
            output_dir=tempfile.mkdtemp(prefix="azr-bench-"),
            use_cpu=not gpu,
            bf16=gpu and torch.cuda.is_bf16_supported(),
            num_generations=args.generations,
            per_device_train_batch_size=args.batch,
            max_completion_length=args.max_completion_length,
            max_steps=args.steps,
            learning_rate=args.learning_rate,
            gradient_checkpointing=args.gradient_checkpointing,
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
            logging_steps=1,
            seed=0,
        ),
        train_dataset=grpo_dataset(load_tasks("train")[: max(8, args.batch)]),
        processing_class=tokenizer,
        peft_config=build_peft_config(adapter, model),
        callbacks=[steps := Steps()],
    )
    counts = trainable_parameters(trainer.model)
    trained = {n: p for n, p in trainer.model.named_parameters() if p.requires_grad}
    start = {n: p.detach().float().cpu().clone() for n, p in trained.items()} if name != "none" else {}
    trainer.train()
    moved = sum(not torch.equal(p.detach().float().cpu(), start[n]) for n, p in trained.items() if n in start)
    times = steps.times[1:] or steps.times
    peak = (
        torch.cuda.max_memory_allocated() / 2**20
        if gpu
        else (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    )
    return {
        "kind": name,
        "trainable": counts["trainable"],
        "total": counts["total"],
        "step_s": sum(times) / len(times),
        "peak_mib": peak,
        "moved": f"{moved}/{len(start)}" if start else "all",
        "dtypes": sorted({str(p.dtype).removeprefix("torch.") for p in trained.values()}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="Model folder or hub id [a tiny model built in a temp dir].")
    parser.add_argument("--quantization", choices=["none", "4bit", "8bit"], default="none")
    parser.add_argument("--dtype", default="auto", help="Model dtype (auto: bf16 on a GPU, float32 on a CPU).")
    parser.add_argument("--kinds", default="lora,lora+dora,lora+rslora,lora+bias,lora+norms,ia3,ln_tuning,none")
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps per kind (the first is not timed).")
    parser.add_argument("--batch", type=int, default=8, help="Completions per step (per_device_train_batch_size).")
    parser.add_argument("--generations", type=int, default=4, help="Completions per prompt (num_generations).")
    parser.add_argument("--max-completion-length", type=int, default=32)
    parser.add_argument("--r", type=int, default=16, help="LoRA rank.")
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument("--trl-cast-only", action="store_true", help="Plain TRL GRPOTrainer: no float32 vectors.")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure one kind, print JSON
    args = parser.parse_args()
    if args.one:
        print("RESULT " + json.dumps(measure(args, args.one)), flush=True)
        return
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        sys.exit(f"adapters: unknown kinds {unknown}; known: {', '.join(KINDS)}")
    if args.quantization != "none" and "none" in kinds:
        kinds.remove("none")  # a quantized base cannot train all weights
    if args.model is None:
        from azr.models import build_tiny_model

        args.model = str(build_tiny_model(os.path.join(tempfile.mkdtemp(), "tiny"), seed=0))
    print(
        f"model {args.model}, quantization {args.quantization}, {args.steps} GRPO steps of {args.batch} completions "
        f"x {args.max_completion_length} tokens, lr {args.learning_rate:g}"
        + (", TRL's cast only" if args.trl_cast_only else ""),
        flush=True,
    )
    print(f"{'kind':<12} {'trainable':>12} {'% of model':>10} {'step s':>8} {'peak MiB':>9} {'moved':>8}  dtypes")
    for kind in kinds:  # a fresh process per kind: peak memory and allocator state are its own
        argv = [sys.executable, __file__, *sys.argv[1:], "--model", args.model, "--one", kind]
        done = subprocess.run(argv, capture_output=True, text=True)
        line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            sys.exit(f"adapters: {kind} failed:\n{done.stderr[-3000:]}")
        r = json.loads(line[7:])
        share = 100 * r["trainable"] / r["total"]
        print(
            f"{r['kind']:<12} {r['trainable']:>12,} {share:>10.3f} {r['step_s']:>8.2f} {r['peak_mib']:>9.0f} "
            f"{r['moved']:>8}  {','.join(r['dtypes'])}",
            flush=True,
        )


if __name__ == "__main__":
    main()
