"""Generation speed of a local model, side by side in one run: the trainer's `generate` (HF transformers, azr's
`GenerateSampler`, as `vllm.mode: off` and `azr eval --model` sample) against the vLLM CPU server (azr's sidecar, as
adapter mode and `azr eval --vllm` sample), on the same prompts at the same settings.

Both arms sample the first --prompts held-out tasks through azr's evaluation samplers (`model_draws`,
`sidecar_draws`), --samples completions each, at --temperature with --max-new-tokens, and count the tokens each
completion took; with --adapter, both sample the model with that LoRA adapter (peft's unmerged layers in `generate`,
vLLM's LoRA kernels in the server), as GRPO's adapter mode does after its first step. Times cover generation only:
the model load and the server's start-up are reported apart. Arms run A B A B ... (--repeats) so that drift in the
machine's load falls on both.

Usage: python benchmarks/sampling_speed.py [--model DIR] [--adapter DIR] [--vllm-python PY] [--prompts N]
           [--samples N] [--max-new-tokens N] [--temperature T] [--repeats R] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from vllm_cpu import REPO, vllm_python


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=REPO / "runs" / "smollm2-135m-instruct")
    parser.add_argument("--adapter", type=Path, default=None, help="a LoRA adapter on the model, in both arms")
    parser.add_argument("--vllm-python", default=None)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not (args.model / "config.json").is_file():
        parser.error(f"--model: {args.model} holds no model (make smollm2 writes the default)")
    python = vllm_python(args.vllm_python)

    from azr.config import ModelConfig, VllmConfig
    from azr.evaluation import samplers
    from azr.evaluation.measure import Sampling
    from azr.evaluation.run import load_problems
    from azr.evaluation.sidecar import sidecar_draws

    problems = load_problems("held-out")[: args.prompts]
    items = [(p, i) for p in problems for i in range(args.samples)]
    sampling = Sampling(
        n=args.samples,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_p=1.0,
        batch_size=len(items),
        seed=0,
    )
    model = ModelConfig(name_or_path=str(args.model), dtype="float32")
    vllm = VllmConfig(
        mode="adapter",
        python=python,
        max_model_len=1024,
        extra_args=["--enforce-eager", "--dtype", "float32", "--max-num-seqs", str(len(items))],
        env={"VLLM_CPU_KVCACHE_SPACE": "2"},
    )
    started = time.monotonic()
    adapter = str(args.adapter) if args.adapter else None
    local = samplers.model_draws(model, adapter, sampling, {})
    setup = {"generate: model load s": round(time.monotonic() - started, 1)}
    started = time.monotonic()
    served = sidecar_draws(vllm, model, adapter, sampling, {})
    setup["vLLM: server start s"] = round(time.monotonic() - started, 1)
    rates: dict[str, list[float]] = {"generate": [], "vLLM server": []}
    try:
        for repeat in range(args.repeats):
            for name, sampler in (("generate", local), ("vLLM server", served)):
                t0 = time.monotonic()
                out = sampler.sample(items)
                seconds = time.monotonic() - t0
                failed = [g.error for g in out if g.text is None]
                if failed:  # a rate over failed requests is no measurement
                    raise SystemExit(f"{name}: {len(failed)} of {len(out)} requests failed ({failed[0]}); no figure")
                tokens = sum(g.tokens or 0 for g in out)
                rates[name].append(tokens / seconds)
                rate = tokens / seconds
                _say(f"repeat {repeat + 1} {name}: {tokens} tokens in {seconds:.1f} s = {rate:.1f} tokens/s")
    finally:
        served.close()
    result = {
        "settings": {k: str(v) for k, v in vars(args).items()},
        "setup": setup,
        "tokens_per_s": {k: [round(v, 1) for v in vs] for k, vs in rates.items()},
        "median_tokens_per_s": {k: round(statistics.median(vs), 1) for k, vs in rates.items()},
    }
    medians = result["median_tokens_per_s"]
    result["vllm_over_generate"] = round(medians["vLLM server"] / medians["generate"], 2)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for name, median in medians.items():
            print(f"{name:12} {median:8.1f} tokens/s  (runs: {result['tokens_per_s'][name]})")
        print(f"vLLM server / generate: {result['vllm_over_generate']}x; {setup}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
