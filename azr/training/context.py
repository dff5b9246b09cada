"""The run context of `azr train`: what every phase of one run shares, built once, in the order each part needs the ones
before it: the sidecar, the ranks, the run folder (its `.azr-run` marker first), its state and resume point, the tasks,
the rubrics (`azr.training.rubrics`), the sandbox checked on reference solutions, the tokenizer, the vLLM server, the
trainer arguments (after the server's address is known), the policy, the logs. Owns that order and the callbacks every
phase's trainer gets (`RunContext.callbacks`); it runs no phase (`azr.training.run` does).
"""

from __future__ import annotations

import logging
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from azr import __version__
from azr.alarms import AlarmWatch
from azr.config import RUN_MARKER, AzrConfig, check_output_dir, save_config, sequence_lengths
from azr.data import Task, load_tasks, select_tasks
from azr.errors import ConfigError
from azr.logs import GenerationLog, JsonlWriter, atomic_write_text, read_jsonl_records
from azr.prompts import reference_answer
from azr.rewards import CodeGrader, pool_from_config, sandbox_oracle, validate_references
from azr.sandbox import SandboxUnhealthy
from azr.serving import Sidecar
from azr.training.ranks import Ranks, sandbox_share, start_ranks
from azr.training.rubrics import RunRewards, run_rewards
from azr.training.state import Resume, RunState, prune_logs, resolve_resume
from azr.training.trl import TrainerArgs, build_trainer_args, grpo_fields, trl_server

if TYPE_CHECKING:
    from transformers import Trainer

log = logging.getLogger(__name__)


@dataclass
class RunContext:
    """One run, as its phases see it. `model`/`tokenizer`/`policy_dir` are the policy the next phase starts from
    (the SFT warm start replaces them); `metrics` and `generations` are None on every rank but the main one."""

    cfg: AzrConfig
    out: Path
    ranks: Ranks
    state: RunState
    resume: Resume
    tasks: list[Task]
    rewards: RunRewards
    sidecar: Sidecar
    args: TrainerArgs
    model: Any
    tokenizer: Any
    policy_dir: str
    metrics: AlarmWatch | None
    generations: GenerationLog | None
    console: Any  # azr.training.callbacks.RunConsole (imported lazily: it needs transformers)

    def checkpoint(self, phase: str) -> str | None:
        """The checkpoint `phase` resumes from, if the run resumes inside it."""
        return self.resume.checkpoint if self.resume.phase == phase else None

    def callbacks(self, phase: str, *extra: Any) -> list[Any]:
        """Every TrainerCallback a phase's trainer gets, in one place: metrics.jsonl, the console, then `extra`
        (the phase's own: state saved beside checkpoints). The held-out evaluation every `eval.every_steps`
        (azr.evaluation) needs the built trainer: `grpo.grpo_phase` attaches it right after `bind`."""
        from azr.training.callbacks import MetricsCallback

        return [MetricsCallback(self.metrics, phase), self.console.callback(phase), *extra]

    def rebase(self, folder: Path) -> None:
        """sft.full_weights: the warm-started weights in `folder` become the base model of what follows (GRPO's
        fresh adapter, the final adapter's base, what `load_saved_policy` loads); adapter mode's server, held back until
        now, starts on them. The warm start's copy of the model is dropped first (on one GPU, vLLM's share)."""
        import dataclasses
        import gc

        base = str(folder.resolve())
        self.cfg = dataclasses.replace(self.cfg, model=dataclasses.replace(self.cfg.model, name_or_path=base))
        self.model = None
        gc.collect()
        if deferred_server(self.cfg):
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            self.sidecar.start(self.out / "vllm", base=base)

    def grpo_peft_config(self) -> Any:
        """The adapter GRPO wraps the policy in: the recipe's, unless the policy comes out of a warm start that
        trained that adapter already (then None, as for kind none)."""
        from azr.models import build_peft_config

        carried = self.cfg.sft.enabled and not self.cfg.sft.full_weights
        return None if carried else build_peft_config(self.cfg.model.adapter, self.model)

    def bind(self, trainer: Trainer) -> None:
        """After the trainer is built: its own console printer removed (the console callback replaces it), and the
        metrics callback told whose reward-stage time to read."""
        from transformers import PrinterCallback

        from azr.training.callbacks import MetricsCallback

        trainer.remove_callback(PrinterCallback)
        for callback in trainer.callback_handler.callbacks:
            if isinstance(callback, MetricsCallback):
                callback.trainer = trainer


def open_run(cfg: AzrConfig, resume_from: str | None, stack: ExitStack) -> RunContext:
    """Set up the run `cfg` describes (see the module docstring); what must be closed is entered into `stack`.
    The recipe is checked already (`azr.training.preflight`), so building TRL's arguments raises nothing new."""
    sidecar = Sidecar(cfg, max_model_len=sequence_lengths(cfg)["max_seq_length"], trl_server=trl_server)
    sidecar.check()  # a vllm.mode this machine cannot run is refused before anything is written
    stack.enter_context(sidecar)  # its server starts just before the policy loads, and stops however the run ends
    ranks = start_ranks()
    out = Path(cfg.output_dir)
    if ranks.main:
        check_output_dir(out)  # again, as it is now: new, empty or an azr run (preflight saw it a while ago)
    try:
        out.mkdir(parents=True, exist_ok=True)
        if ranks.main and not (out / RUN_MARKER).exists():  # first: from now on the folder is this run's
            atomic_write_text(out / RUN_MARKER, f"azr {__version__}\n")
    except OSError as exc:
        raise ConfigError(f"output_dir: cannot create {out}: {exc.strerror}") from None
    state = RunState.load(out, writes=ranks.main)
    resume = resolve_resume(out, state, resume_from, sft=cfg.sft.enabled)
    ranks.wait()  # every rank has read the run as it was before the main process writes to it
    if ranks.main:
        save_config(cfg, out / "config.yaml")

    sandbox = sandbox_share(cfg.sandbox, ranks)
    data = cfg.data
    oracle = sandbox_oracle(sandbox)  # a format's outputs its file lacks (MBPP+'s plus inputs), run in the sandbox
    tasks = select_tasks(
        load_tasks(
            data.train,
            data.column_map,
            data.format,
            data.compare,
            data.float_tol,
            oracle=oracle,
            public_tests=data.public_tests,
        ),
        shuffle=cfg.data.shuffle,
        seed=cfg.seed,
        max_tasks=None,
    )
    if cfg.data.audit:
        tasks = audited_tasks(tasks, cfg, out if ranks.main else None)
    pool = pool_from_config(sandbox, label=f"rank{ranks.rank}") if ranks.world > 1 else None
    rewards = run_rewards(cfg, sandbox, pool)
    check_sandbox(tasks, rewards.grader)
    if cfg.sft.enabled and cfg.sft.rollouts and not state.done("sft"):
        from azr.tools import load_rollouts

        # a bad file is refused before the model loads
        load_rollouts(cfg.sft.rollouts, cfg.sft.rollouts_filter, cfg.rollouts.env)
    shown = zip(rewards.rubric.names, rewards.rubric.weights, strict=True)
    log.info("rewards: %s", ", ".join(f"{w:g} x {name}" for name, w in shown))

    from azr.models import build_model_and_tokenizer, count_parameters, load_tokenizer, quiet_third_party

    quiet_third_party()
    tokenizer = load_tokenizer(cfg.model)
    tasks = fit_tasks(tasks, tokenizer, cfg)  # a recipe that leaves no task says so before the model loads
    if not deferred_server(cfg):
        sidecar.start(out / "vllm")  # before the policy: on one GPU, vLLM's memory share is taken first
    # Built once, now that everything they depend on is known (TRL's server mode: the URL of the server just started)
    vllm_fields = grpo_fields(cfg, sidecar.server, sidecar.group_port, sidecar.max_model_len)
    args = build_trainer_args(cfg, rewards.trained_weights, vllm_fields=vllm_fields, warn=False)
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
        prune_logs(cfg, out, state, resume)
    from azr.training.callbacks import RunConsole

    generations = None
    if cfg.logging.generations and ranks.main:
        generations = GenerationLog(out / "generations", int(cfg.logging.generations_max_mb * 2**20))
        stack.callback(generations.close)
    return RunContext(
        cfg,
        out,
        ranks,
        state,
        resume,
        tasks,
        rewards,
        sidecar,
        args,
        model,
        tokenizer,
        policy_dir=cfg.model.name_or_path,
        metrics=watched_metrics(out / "metrics.jsonl", stack) if ranks.main else None,
        generations=generations,
        console=RunConsole(cfg.logging.console if ranks.main else "plain", stack),
    )


def deferred_server(cfg: AzrConfig) -> bool:
    """Adapter mode's server serves the base GRPO's adapters apply to: under sft.full_weights that base is the warm
    start's output, so the server starts after it (`RunContext.rebase`)."""
    return cfg.vllm.mode == "adapter" and cfg.sft.enabled and cfg.sft.full_weights


def watched_metrics(path: Path, stack: ExitStack) -> AlarmWatch:
    """The run's metrics.jsonl writer, every record it writes checked by the reward-hacking alarms (`azr.alarms`);
    what a resumed run wrote before is fed to them first, so no alarm is raised twice."""
    before = read_jsonl_records(path) if path.exists() else []
    watch = AlarmWatch(stack.enter_context(JsonlWriter(path)))
    watch.prime(before)
    return watch


def audited_tasks(tasks: list[Task], cfg: AzrConfig, out: Path | None) -> list[Task]:
    """The training tasks less those data.min_kill_rate drops by data.audit's records (one log line says how many);
    the audit's figures go to `out/audit.json`, which summary.json and the report read."""
    from azr.audit import audit_figures, read_audit, weak_tasks
    from azr.logs import atomic_write_json

    assert cfg.data.audit is not None
    records = read_audit(Path(cfg.data.audit))
    dropped = 0
    if cfg.data.min_kill_rate is not None:
        weak = weak_tasks(tasks, records, cfg.data.min_kill_rate)
        kept = [t for t in tasks if t.id not in weak]
        dropped = len(tasks) - len(kept)
        missing = sum(t.id not in records for t in tasks)
        log.info(
            "data.min_kill_rate=%.2f drops %d of %d tasks with weak tests (%s; %d without a record, kept)",
            cfg.data.min_kill_rate,
            dropped,
            len(tasks),
            cfg.data.audit,
            missing,
        )
        tasks = kept
    if out is not None:
        atomic_write_json(out / "audit.json", audit_figures(tasks, records, cfg.data.audit, dropped))
    return tasks


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


def check_sandbox(tasks: list[Task], grader: CodeGrader, sample: int = 8) -> None:
    """Fail before the model loads if the sandbox cannot grade known-good reference solutions."""
    checked = [(t, g) for t, g in validate_references(tasks[:sample], grader.pool, grader.limits) if g is not None]
    errors = [g.failures[-1] for _, g in checked if g.status == "error"]
    if errors:
        raise SandboxUnhealthy(f"the sandbox failed on {len(errors)} of {len(checked)} reference runs: {errors[0]}")
    passed = sum(g.passed for _, g in checked)
    log.info(
        "sandbox: %s, %d workers; isolation %s; %d/%d reference solutions pass",
        checked[0][1].backend if checked else "no reference run",
        grader.pool.size,
        grader.pool.isolation,
        passed,
        len(checked),
    )
