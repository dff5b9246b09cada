"""Asynchronous GRPO against synchronous adapter mode: wall time per optimizer step and tokens/s, side by side.

Every arm trains the same LoRA policy (the tiny model unless --model) with `AZRGRPOTrainer` in adapter mode (the
vLLM server, one LoRA per policy version), the same GRPOConfig, dataset and a trivial reward (completion length /
1000: no sandbox, constant cost), so the arms differ only in `sampling.max_staleness`: 0 (each step waits for its
own generation), 1 and 2 (the pipeline samples the next batches while the trainer trains). One server serves every
run (its start-up is reported apart); runs are interleaved (0 1 2 s0 s1 s2, then s2 s1 s0 2 1 0, ...) so that drift in
the machine's load falls on every arm alike. Each step is timed: per arm the median step time, generation time, train
time (the step less the generation it waited for) and overlap share (1 - wait / generation) over every run's steps
but its first (the first fills the pipeline and warms the server up).

A second set of arms is a SIMULATION of a machine where generation dominates, as on a GPU box with a large model:
every generation call is made to take a declared time in all (`--simulated-gen-s`, or by default `--gen-over-train`
times the median train time of the first synchronous run), sleeping after the real call for what is left, for
max_staleness 0, 1 and 2. The sleep uses no CPU, so it overlaps with training as generation on its own device would; a
fixed time per call (rather than a factor on the measured call) keeps the CPU contention of the asynchronous arm's
real generation from being multiplied. With generation G and training T per step, overlap of one batch at a time
can at best bring a step from G + T down to max(G, T) (the bound printed); with max_staleness 2 two batches are
sampled side by side, and the floor is max(T, G / 2).

Usage: python benchmarks/async_rollouts.py [--vllm-python PY] [--model DIR] [--steps K] [--repeats R]
       [--gen-over-train X | --simulated-gen-s S] [--json]
"""

from __future__ import annotations

import argparse
import itertools
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


def _timed(fn, seconds: list[float], at_least: float = 0.0):
    """`fn`, its duration added to `seconds`; with `at_least`, a sleep after the call so that it takes that long."""

    def call(*a, **k):
        started = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            left = at_least - (time.perf_counter() - started)
            if left > 0:
                time.sleep(left)
            seconds[0] += time.perf_counter() - started

    return call


def _run(staleness: int, simulated_s: float, cfg, args, server, folder: Path) -> dict:
    """One arm's K steps on a fresh copy of the policy (`simulated_s` > 0: each generation call takes that long):
    tokens/s, and per step its wall time, generation time, the time the trainer waited for generation, staleness."""
    from transformers import PrinterCallback, TrainerCallback, set_seed
    from trl import GRPOConfig

    from azr.config import SamplingConfig
    from azr.data import load_tasks
    from azr.models import build_model_and_tokenizer, build_peft_config
    from azr.rollouts import GroupSampler, RolloutFilter
    from azr.serving import Sidecar
    from azr.training import grpo_dataset
    from azr.training.grpo import asynchronous, grpo_rows
    from azr.training.trl.generation import use_generation_backend
    from azr.training.trl.trainer import AZRGRPOTrainer

    set_seed(0)
    tasks = load_tasks("train")[: args.prompts * args.steps]
    model, tokenizer = build_model_and_tokenizer(cfg.model)
    sampling = RolloutFilter(
        SamplingConfig(max_staleness=staleness),
        GroupSampler({t.id: r for t, r in zip(tasks, grpo_rows(tasks), strict=True)}),
        composes=False,
    )
    logs: list[dict] = []

    generate_s = [0.0]
    ends: list[tuple[float, float]] = []  # (wall clock, generation seconds so far) at each step's end

    class Keep(TrainerCallback):
        def on_train_begin(self, _args, state, control, **kwargs):
            ends.append((time.perf_counter(), generate_s[0]))

        def on_step_end(self, _args, state, control, **kwargs):
            ends.append((time.perf_counter(), generate_s[0]))

        def on_log(self, _args, state, control, logs=None, **kwargs):
            logs_kept.append(dict(logs or {}))

    logs_kept = logs
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
            gradient_checkpointing=False,  # TRL's default recomputes activations; a tiny model's are small
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
    backend.generate = _timed(backend.generate, generate_s, simulated_s)
    backend.complete = _timed(backend.complete, generate_s, simulated_s)
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
    step_s = [b[0] - a[0] for a, b in itertools.pairwise(ends)]
    gen_s = [b[1] - a[1] for a, b in itertools.pairwise(ends)]
    # The trainer waits for its own generation in a synchronous step, for the pipeline's in an asynchronous one.
    wait_s = [e.get("async/wait_seconds", 0.0) for e in steps] if staleness else gen_s
    return {
        "max_staleness": staleness,
        "simulated_gen_s": simulated_s,
        "tokens_per_s": trainer.state.num_input_tokens_seen / seconds,
        "step_s": step_s,
        "gen_s": gen_s,
        "wait_s": wait_s[: len(step_s)],
        "staleness_mean": statistics.mean(e.get("async/staleness_mean", 0.0) for e in steps),
        "importance_ratio_mean": statistics.mean(e["sampling/importance_sampling_ratio/mean"] for e in steps),
    }


def _arm(runs: list[dict]) -> dict:
    """Medians over the arm's steps, each run's first step left out: step, generation, wait, train time
    (step - wait) and overlap (1 - wait / generation), and the mean tokens/s."""
    steps = [(s, g, w) for r in runs for s, g, w in list(zip(r["step_s"], r["gen_s"], r["wait_s"], strict=False))[1:]]
    step, gen, wait = (statistics.median(x[i] for x in steps) for i in range(3))
    return {
        "runs": len(runs),
        "steps": len(steps),
        "step_s": round(step, 2),
        "gen_s": round(gen, 2),
        "wait_s": round(wait, 2),
        "train_s": round(statistics.median(s - w for s, _, w in steps), 2),
        "overlap_share": round(max(0.0, 1 - sum(w for *_, w in steps) / max(sum(g for _, g, _ in steps), 1e-9)), 3),
        "tokens_per_s": round(statistics.mean(r["tokens_per_s"] for r in runs), 1),
        "importance_ratio_mean": round(statistics.mean(r["importance_ratio_mean"] for r in runs), 4),
        "staleness_mean": round(statistics.mean(r["staleness_mean"] for r in runs), 3),
    }


def _bound(sync: dict) -> float:
    """The best an overlap of generation and training can do against this synchronous arm: max(G, T) / (G + T)."""
    gen, train = sync["gen_s"], sync["train_s"]
    return round(max(gen, train) / max(gen + train, 1e-9), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm-python", help="interpreter of the vLLM venv [$AZR_VLLM_PYTHON, else the CPU venv]")
    parser.add_argument("--model", help="a model directory (default: the tiny model, built in a temp dir)")
    parser.add_argument("--steps", type=int, default=6, help="GRPO steps per run (the first of each is not counted)")
    parser.add_argument(
        "--repeats", type=int, default=2, help="runs per arm (interleaved: 0 1 2 s0 s1 s2 s2 s1 s0 2 1 0 ...)"
    )
    parser.add_argument("--prompts", type=int, default=2, help="prompts per step")
    parser.add_argument("--group", type=int, default=8, help="completions per prompt (num_generations)")
    parser.add_argument("--tokens", type=int, default=64, help="max_completion_length")
    parser.add_argument(
        "--gen-over-train",
        type=float,
        default=2.0,
        help="SIMULATED arms: each generation call takes this many times the first synchronous run's median train time",
    )
    parser.add_argument("--simulated-gen-s", type=float, help="SIMULATED arms: each generation call takes S seconds")
    parser.add_argument("--no-simulation", action="store_true", help="the real arms only")
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
    simulated = [] if args.no_simulation else [0, 1, 2]
    declared = args.simulated_gen_s
    try:
        model = args.model or str(build_tiny_model(tmp / "tiny", seed=0))
        python = vllm_python(args.vllm_python)
        server = adapter_server(_config(model, python, args.gpu, max(real)), None, log_path=tmp / "server.log")
        started = time.perf_counter()
        server.start()
        startup = time.perf_counter() - started
        _say(f"vLLM server up in {startup:.1f} s")
        order = []
        for r in range(args.repeats):
            one = [(k, False) for k in real] + [(k, True) for k in simulated]
            order += one if r % 2 == 0 else one[::-1]
        for i, (staleness, sim) in enumerate(order):
            if sim and declared is None:  # from the first synchronous run: its median train time per step
                declared = round(args.gen_over_train * _arm([runs[0]])["train_s"], 2)
                _say(f"SIMULATED generation: {declared:.2f} s per call ({args.gen_over_train:g} x the train time)")
            cfg = _config(model, python, args.gpu, staleness)
            runs.append(_run(staleness, declared if sim else 0.0, cfg, args, server, tmp / f"run-{i}"))
            last = runs[-1]
            last["sim"] = sim
            arm = _arm([last])
            _say(
                f"{'SIMULATED ' if sim else ''}max_staleness {staleness}: median {arm['step_s']:.2f} s/step, "
                f"gen {arm['gen_s']:.2f}, train {arm['train_s']:.2f}, overlap {arm['overlap_share']:.2f}"
            )
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    def arm_runs(staleness: int, sim: bool) -> list[dict]:
        return [r for r in runs if r["max_staleness"] == staleness and r["sim"] == sim]

    def per_repeat(staleness: int, sim: bool) -> list[float]:
        """Each repeat's ratio of medians: the asynchronous run against the synchronous run of the same repeat."""
        return [
            round(_arm([a])["step_s"] / _arm([b])["step_s"], 2)
            for a, b in zip(arm_runs(staleness, sim), arm_runs(0, sim), strict=True)
        ]

    figures: dict = {
        "device": "cuda" if args.gpu else "cpu",
        "model": args.model or "tiny (1 M parameters)",
        "batch": f"{args.prompts} prompts x {args.group} completions x {args.tokens} tokens",
        "steps": f"{args.steps} per run, {args.repeats} runs per arm, first step of each run not counted",
        "server_startup_s": round(startup, 1),
    }
    arms = {f"staleness{k}": _arm(arm_runs(k, False)) for k in real}
    if simulated:
        arms |= {f"SIMULATED_staleness{k}": _arm(arm_runs(k, True)) for k in simulated}
    figures["arms"] = arms
    sync = arms["staleness0"]
    for k in real[1:]:
        figures[f"async{k}_over_sync_step_time"] = round(arms[f"staleness{k}"]["step_s"] / sync["step_s"], 2)
        figures[f"async{k}_over_sync_per_repeat"] = per_repeat(k, False)
    figures["overlap_bound_if_no_contention"] = _bound(sync)
    if simulated:
        figures["SIMULATED_gen_s_per_call"] = declared
        sim_sync = arms["SIMULATED_staleness0"]
        for k in simulated[1:]:
            figures[f"SIMULATED_async{k}_over_sync_step_time"] = round(
                arms[f"SIMULATED_staleness{k}"]["step_s"] / sim_sync["step_s"], 2
            )
            figures[f"SIMULATED_async{k}_over_sync_per_repeat"] = per_repeat(k, True)
        figures["SIMULATED_overlap_bound_one_batch_at_a_time"] = _bound(sim_sync)
    figures["runs"] = runs
    if args.json:
        print(json.dumps(figures))
        return
    columns = ["step_s", "gen_s", "wait_s", "train_s", "overlap_share", "tokens_per_s", "importance_ratio_mean"]
    for key, value in figures.items():
        if key not in ("runs", "arms"):
            print(f"{key:>40}: {value}")
    print(f"{'arm (medians over steps)':>40}: " + " ".join(f"{c:>13}" for c in columns))
    for name, arm in arms.items():
        print(f"{name:>40}: " + " ".join(f"{arm[c]:>13}" for c in columns))


if __name__ == "__main__":
    main()
