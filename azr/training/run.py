"""`azr train`: the linear recipe. Config, data, rewards and sandbox check, model; then the phases in order:
an optional SFT warm start, the train pass rate sampled before GRPO, GRPO, and the same measurement after.

Each finished phase is recorded in `output_dir/state.json`, so `--resume-from` skips it; a phase cut short resumes
from its latest checkpoint (step, optimizer, scheduler and RNG state restored by the HF Trainer) after the logs
are pruned back to that checkpoint. Outputs: config.yaml, metrics.jsonl, generations/, checkpoints/, sft/, final/
(adapter or model, tokenizer, model card) and summary.json.

Under a launcher (torchrun, `accelerate launch`), every rank runs this recipe and only the main one writes those
files (`azr.training.ranks`); ranks wait for each other where one reads what the main process wrote.
"""

from __future__ import annotations

import functools
import logging
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from azr.config import AzrConfig, save_config
from azr.data import Task, load_tasks, select_tasks
from azr.errors import ConfigError
from azr.logs import GenerationLog, JsonlWriter, generation_files, prune_jsonl
from azr.prompts import chat_messages, reference_answer
from azr.rewards import CodeGrader, build_rewards, pool_from_config, validate_references
from azr.sandbox import SandboxUnhealthy
from azr.serving import Sidecar
from azr.training.absolute_zero import absolute_zero_phase, warm_start_dataset
from azr.training.args import TrainerArgs, set_fields
from azr.training.passrate import grpo_sampling, pass_rate_measurer
from azr.training.preflight import check_recipe
from azr.training.ranks import MainRounds, Ranks, replica_digests, sandbox_share, start_ranks
from azr.training.state import Resume, RunState, resolve_resume, write_summary

log = logging.getLogger(__name__)


def run_train(cfg: AzrConfig, resume_from: str | None = None, args: TrainerArgs | None = None) -> int:
    """Train as `cfg` says, with the trainer arguments `check_recipe(cfg)` returns (or `args`, built by it before);
    returns the process exit code."""
    args = check_recipe(cfg) if args is None else args  # every user error, before anything is written or loaded
    sidecar = Sidecar(cfg, max_model_len=args.max_seq_length)
    sidecar.check()  # a vllm.mode this machine cannot run is refused before anything is written
    with sidecar:  # its server starts just before the policy loads, and stops however the run ends
        return _train(cfg, resume_from, args, sidecar)


def _train(cfg: AzrConfig, resume_from: str | None, args: TrainerArgs, sidecar: Sidecar) -> int:
    started = time.monotonic()
    ranks = start_ranks()
    out = Path(cfg.output_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"output_dir: cannot create {out}: {exc.strerror}") from None
    state = RunState.load(out, writes=ranks.main)
    resume = resolve_resume(out, state, resume_from, sft=cfg.sft.enabled)
    ranks.wait()  # every rank has read the run as it was before the main process writes to it
    if ranks.main:
        save_config(cfg, out / "config.yaml")

    tasks = select_tasks(
        load_tasks(cfg.data.train, cfg.data.column_map), shuffle=cfg.data.shuffle, seed=cfg.seed, max_tasks=None
    )
    sandbox = sandbox_share(cfg.sandbox, ranks)
    pool = pool_from_config(sandbox, label=f"rank{ranks.rank}") if ranks.world > 1 else None
    funcs, weights, grader = build_rewards(cfg.rewards, sandbox, pool, answer_format=cfg.answer_format)
    check_sandbox(tasks, grader)
    if cfg.sft.enabled and cfg.sft.rollouts and not state.done("sft"):
        from azr.tools import load_rollouts

        load_rollouts(cfg.sft.rollouts, cfg.sft.rollouts_filter)  # a bad file is refused before the model loads
    log.info("rewards: %s", ", ".join(f"{w:g} x {f.__name__}" for f, w in zip(funcs, weights, strict=True)))

    from azr.models import build_model_and_tokenizer, count_parameters, load_tokenizer, quiet_third_party

    quiet_third_party()
    tokenizer = load_tokenizer(cfg.model)
    tasks = fit_tasks(tasks, tokenizer, cfg)  # a recipe that leaves no task says so before the model loads
    sidecar.start(out / "vllm")  # before the policy: on one GPU, vLLM's memory share is taken first
    set_fields(args.grpo, sidecar.grpo_fields())  # TRL's server mode: the URL and port of the server just started
    model, tokenizer = build_model_and_tokenizer(cfg.model, max_seq_length=args.max_seq_length, tokenizer=tokenizer)
    log.info(
        "model: %s (%s, %.2f M parameters, dtype %s)",
        cfg.model.name_or_path,
        type(model).__name__,
        count_parameters(model) / 1e6,
        model.dtype,
    )
    log.info("data: %d training tasks from %s", len(tasks), cfg.data.train)

    if resume.pruned_to is not None and ranks.main:
        _prune_logs(cfg, out, state, resume)
    from azr.training.callbacks import RunConsole

    with ExitStack() as stack:
        generations = None
        if cfg.logging.generations and ranks.main:
            generations = GenerationLog(out / "generations", int(cfg.logging.generations_max_mb * 2**20))
            stack.callback(generations.close)
        run = _Run(
            cfg,
            out,
            state,
            resume,
            args,
            funcs,
            weights,
            grader,
            ranks,
            metrics=stack.enter_context(JsonlWriter(out / "metrics.jsonl")) if ranks.main else None,
            generations=generations,
            console=RunConsole(cfg.logging.console if ranks.main else "plain", stack),
            sidecar=sidecar,
        )
        policy_dir = cfg.model.name_or_path
        if cfg.sft.enabled:
            if not state.done("sft"):
                _sft_phase(run, model, tokenizer, tasks)
                ranks.wait()  # the main process saved sft/final, which every rank loads next
            model, tokenizer = _load_policy(cfg, out / "sft" / "final")
            policy_dir = str(out / "sft" / "final")
        sampled = tasks[: cfg.logging.pass_rate_tasks]
        measure = pass_rate_measurer(cfg, args, funcs, weights, grader, tokenizer, sampled, ranks)
        if not state.done("eval_before") and sampled:
            state.finish("eval_before", measure(model, "eval_before", run.metrics))
        if not state.done("grpo"):
            phase = absolute_zero_phase if cfg.mode == "absolute_zero" else _grpo_phase
            model = phase(run, model, tokenizer, tasks, policy_dir)
        else:
            model, tokenizer = _load_policy(cfg, out / "final")
        if not state.done("eval_after") and sampled:
            state.finish("eval_after", measure(model, "eval_after", run.metrics))
        if ranks.main:
            run.console.show_summary(write_summary(out, state, time.monotonic() - started))
    log.info("done: final %s in %s", "adapter" if cfg.model.adapter.enabled else "model", out / "final")
    return 0


def fit_tasks(tasks: list[Task], tokenizer, cfg: AzrConfig) -> list[Task]:
    limit = cfg.data.max_solution_tokens
    if limit is not None:
        fits = [
            t
            for t in tasks
            if t.solution and len(tokenizer(reference_answer(t.solution, t.entry_point))["input_ids"]) < limit
        ]
        log.info("data.max_solution_tokens=%d keeps %d of %d tasks", limit, len(fits), len(tasks))
        tasks = fits
    tasks = tasks[: cfg.data.max_tasks] if cfg.data.max_tasks else tasks
    if not tasks:
        raise ConfigError("data: no training tasks left after data.max_solution_tokens / data.max_tasks")
    return tasks


@dataclass
class _Run:
    """What every phase of one run shares: its config, folder, state, rewards and outputs."""

    cfg: AzrConfig
    out: Path
    state: RunState
    resume: Resume
    args: TrainerArgs  # built once, before any slow work
    funcs: list
    weights: list[float]
    grader: CodeGrader
    ranks: Ranks
    metrics: JsonlWriter | None  # None on every rank but the main one, as the generation log
    generations: GenerationLog | None
    console: Any  # azr.training.callbacks.RunConsole (imported lazily: it needs transformers)
    sidecar: Sidecar


def _sft_phase(run: _Run, model, tokenizer, tasks: list[Task]) -> None:
    from azr.models import build_peft_config
    from azr.training.callbacks import MetricsCallback
    from azr.training.sft import find_near_misses, near_misses_once, run_sft, sft_dataset

    cfg, out = run.cfg, run.out
    started = time.monotonic()
    episodes = bool(cfg.sft.rollouts)
    callbacks = [MetricsCallback(run.metrics, "sft"), run.console.callback("sft")]
    near_misses = {}
    if cfg.sft.near_misses:
        find = functools.partial(find_near_misses, tasks, run.grader, cfg.sft.near_misses, cfg.seed)
        if run.ranks.main:
            near_misses = near_misses_once(out / "sft" / "near_misses.json", find)
        near_misses = run.ranks.broadcast(near_misses)  # every rank trains on the same rows
        log.info("sft: %d near misses that fail the tests added", sum(map(len, near_misses.values())))
    if cfg.mode == "absolute_zero":  # the warm start teaches both roles on seed triplets
        dataset = warm_start_dataset(cfg, out, tasks, tokenizer, cfg.template_kwargs())
    elif episodes:
        from azr.tools import load_rollouts
        from azr.training.sft import rollout_dataset

        dataset = rollout_dataset(load_rollouts(cfg.sft.rollouts, cfg.sft.rollouts_filter))
    else:
        dataset = sft_dataset(tasks, tokenizer, cfg.template_kwargs(), near_misses)
    checkpoint = run.resume.checkpoint if run.resume.phase == "sft" else None
    peft_config = build_peft_config(cfg.model.adapter, model)
    run_sft(model, tokenizer, dataset, run.args.sft, peft_config, callbacks, checkpoint, out / "sft" / "final")
    run.state.finish("sft", {"seconds": round(time.monotonic() - started, 1), "examples": len(dataset)})


def _grpo_phase(run: _Run, model, tokenizer, tasks: list[Task], policy_dir: str):
    from transformers import PrinterCallback

    from azr.evaluation import attach_heldout
    from azr.models import build_peft_config
    from azr.tools import build_toolbox
    from azr.training.callbacks import MetricsCallback, SaveBesideCheckpoints
    from azr.training.generation import use_generation_backend
    from azr.training.sampling import build_sampling
    from azr.training.trainer import AZRGRPOTrainer

    cfg, generations = run.cfg, run.generations
    tools = cfg.tools.enabled
    started = time.monotonic()
    record = MetricsCallback(run.metrics, "grpo")
    # The same observers on every rank (the trainer gathers each batch for them), called on the main one only.
    observers = [lambda batch: generations.put(batch.records())] if cfg.logging.generations else []
    rows, funcs, arena, sources = grpo_rows(tasks), run.funcs, None, []
    checkpoint = run.resume.checkpoint if run.resume.phase == "grpo" else None
    if cfg.self_play.enabled:
        from azr.selfplay import Arena, blend_rewards

        # The blended weights are already in run.args.grpo.reward_weights (`reward_weights`, at load).
        funcs, _ = blend_rewards(funcs, run.weights, run.grader, cfg.self_play.weight)
        main_arena = Arena(cfg, run.grader, rows, checkpoint=checkpoint) if run.ranks.main else None
        arena, sources = MainRounds(main_arena, run.ranks), main_arena.sources if main_arena else []
    # One sampler decides which prompt groups enter each batch (data, curriculum, self-play's replay and hints); with
    # several processes it runs on the main one, where the arena and the curriculum's statistics are.
    sampling = build_sampling(cfg, rows, sources, checkpoint, run.ranks)
    observers.append(sampling.observe)
    saved = [SaveBesideCheckpoints(sampling, every_rank=True)] + ([SaveBesideCheckpoints(arena)] if arena else [])
    try:
        trainer = AZRGRPOTrainer(
            model=model,
            reward_funcs=funcs,
            args=run.args.grpo,
            train_dataset=grpo_dataset(tasks),
            processing_class=tokenizer,
            # A policy that comes out of the SFT phase already carries its (trainable) adapter.
            peft_config=None if cfg.sft.enabled else build_peft_config(cfg.model.adapter, model),
            callbacks=[record, run.console.callback("grpo"), *saved],
            # TRL runs the policy's tool calls and masks their results out of the loss; python_run shares the pool.
            tools=build_toolbox(cfg, run.grader.pool, tokenizer.all_special_tokens).functions() if tools else None,
            grader=run.grader,
            observers=observers,
            rounds=arena,
            sampling=sampling,
        )
        trainer.remove_callback(PrinterCallback)
        attach_heldout(trainer, heldout_evaluator(run))  # eval.every_steps: the held-out pass rate as it trains
        if (backend := run.sidecar.generation(trainer)) is not None:
            use_generation_backend(trainer, backend)  # adapter mode: GRPO samples from the vLLM server
        record.trainer = trainer
        trainer.train(resume_from_checkpoint=checkpoint)
    finally:
        if arena is not None:
            arena.close()  # scoreboard.json and frontier.json written however training ended
    return finish_grpo(run, trainer, tokenizer, policy_dir, started)


def heldout_evaluator(run: _Run):
    """The run's held-out evaluation (`eval:`), sampled as GRPO samples unless the section says otherwise, graded
    in this rank's sandbox pool with the run's rewards; None when eval.every_steps is 0."""
    from azr.evaluation import build_heldout

    return build_heldout(
        run.cfg,
        sampling=grpo_sampling(run.args.grpo),
        max_completion_length=run.args.max_completion_length,
        ranks=run.ranks,
        metrics=run.metrics,
        rewards=(run.funcs, run.weights, run.grader),
        pool=run.grader.pool,
        folder=run.out / "heldout" if run.ranks.main else None,
    )


def finish_grpo(run: _Run, trainer, tokenizer, policy_dir: str, started: float):
    """Save the trained policy to `final/` with its model card and record the phase; returns the model."""
    final = run.out / "final"
    trainer.save_model(str(final))  # on every rank: a sharded model is gathered to the main one, which writes
    info = {"seconds": round(time.monotonic() - started, 1), "steps": trainer.state.global_step}
    if digests := replica_digests(trainer, run.ranks):
        info["weights_sha256"] = digests  # one per rank: data-parallel replicas that must be equal
    run.state.finish("grpo", info)
    if run.ranks.main:
        from azr.training.modelcard import write_model_card

        tokenizer.save_pretrained(str(final))
        write_model_card(final, run.cfg, policy_dir, run.state)
    return trainer.model


def grpo_rows(tasks: list[Task]) -> list[dict[str, Any]]:
    """Conversational prompts plus the columns the rewards read. Hinted retries and replayed tasks enter the batch
    as rows with these same keys (`hint` holds the teacher's hint; `source` says where a row came from)."""
    return [
        {
            "prompt": chat_messages(t.prompt),
            "task_id": t.id,
            "tests": t.tests,
            "timeout_s": t.timeout_s,
            "memory_mb": t.memory_mb,
            "hint": "",
            "source": "data",
        }
        for t in tasks
    ]


def grpo_dataset(tasks: list[Task]):
    from datasets import Dataset

    return Dataset.from_list(grpo_rows(tasks))


def _load_policy(cfg: AzrConfig, folder: Path):
    """The policy saved by a finished phase: the base model with its trainable adapter, or the full model."""
    import dataclasses

    from azr.models import build_model_and_tokenizer

    if not cfg.model.adapter.enabled:
        return build_model_and_tokenizer(dataclasses.replace(cfg.model, name_or_path=str(folder)))
    from peft import PeftModel

    from azr.models import sharded_launch

    model, tokenizer = build_model_and_tokenizer(cfg.model)
    # In the model's dtype under ZeRO-3, as TRL creates adapters there (deploy/accelerate/zero3.yaml says why).
    fp32 = not (sharded_launch() == "zero3" and cfg.model.quantization == "none")
    return PeftModel.from_pretrained(model, str(folder), is_trainable=True, autocast_adapter_dtype=fp32), tokenizer


def _prune_logs(cfg: AzrConfig, out: Path, state: RunState, resume) -> None:
    """Drop records a resumed run will write again: those of unfinished phases past the checkpoint's step."""

    def keep(record: dict[str, Any]) -> bool:
        phase = record.get("phase")
        if state.done(phase):
            return True
        # A phase that restarts from scratch (no checkpoint) writes all its records again.
        resumed = phase == resume.phase and resume.checkpoint is not None
        return resumed and isinstance(record.get("step"), int) and record["step"] <= resume.pruned_to

    def kept_grpo(record: dict[str, Any]) -> bool:
        return state.done("grpo") or record.get("step", 0) <= (resume.pruned_to if resume.phase == "grpo" else 0)

    dropped = prune_jsonl(out / "metrics.jsonl", keep)
    # GRPO's per-batch logs: the generations, and with self-play the opponent's and the teacher's records.
    grpo_logs = [*generation_files(out / "generations"), out / "selfplay.jsonl"]
    grpo_logs += [out / "teacher.jsonl", out / cfg.teacher_assist.sft_buffer]
    for path in grpo_logs:
        dropped += prune_jsonl(path, kept_grpo)
    log.info("resume: %s from step %d; %d log records past it removed", resume.phase, resume.pruned_to, dropped)


def check_sandbox(tasks: list[Task], grader: CodeGrader, sample: int = 8) -> None:
    """Fail before the model loads if the sandbox cannot grade known-good reference solutions."""
    checked = [(t, g) for t, g in validate_references(tasks[:sample], grader.pool, grader.limits) if g is not None]
    errors = [g.failures[-1] for _, g in checked if g.status == "error"]
    if errors:
        raise SandboxUnhealthy(f"the sandbox failed on {len(errors)} of {len(checked)} reference runs: {errors[0]}")
    passed = sum(g.passed for _, g in checked)
    log.info(
        "sandbox: %s backend, %d workers; %d/%d reference solutions pass",
        grader.pool.backend.name,
        grader.pool.size,
        passed,
        len(checked),
    )
