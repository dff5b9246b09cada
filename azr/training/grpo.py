"""The GRPO phase of `azr train`: the training rows, the batch composition (`azr.rollouts`: group sampler,
curriculum, dynamic sampling, self-play rounds), `AZRGRPOTrainer` over the run's rewards, and the final policy
saved with its model card. `finish_grpo` is shared with Absolute Zero's GRPO phase.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from azr.config import environment_of
from azr.data import Task, encode_all
from azr.prompts import chat_messages
from azr.rollouts import MainRounds
from azr.training.context import RunContext
from azr.training.ranks import replica_digests
from azr.training.trl.private import TrainerBatches

if TYPE_CHECKING:
    from azr.rollouts import AsyncRollouts, Playbook
    from azr.serving import LoraSync
    from azr.training.episodes import EpisodeRollouts, FeedbackRollout, ToolRollout
    from azr.training.trl.private import GRPOTrainer
    from azr.training.trl.trainer import AZRGRPOTrainer


def grpo_phase(ctx: RunContext):
    """GRPO on the run's tasks from `ctx`'s policy; returns the trained model."""
    from azr.audit import hardened_watch
    from azr.evaluation import attach_heldout
    from azr.rollouts import build_sampling
    from azr.training.callbacks import SaveBesideCheckpoints
    from azr.training.trl.generation import use_generation_backend
    from azr.training.trl.trainer import AZRGRPOTrainer

    cfg, generations, grader = ctx.cfg, ctx.generations, ctx.rewards.grader
    started = time.monotonic()
    # The same observers on every rank (the trainer gathers each batch for them), called on the main one only.
    observers = [lambda batch: generations.put(batch.records())] if cfg.logging.generations else []
    env = environment_of(cfg)
    rows, arena, sources = grpo_rows(ctx.tasks, hidden_only=env.hidden_tests), None, []
    checkpoint = ctx.checkpoint("grpo")
    if cfg.self_play.enabled:
        from azr.selfplay import Arena

        main_arena = Arena(cfg, grader, rows, checkpoint=checkpoint) if ctx.ranks.main else None
        arena, sources = MainRounds(main_arena, ctx.ranks), main_arena.sources if main_arena else []
    # One sampler decides which prompt groups enter each batch (data, curriculum, self-play's replay and hints); with
    # several processes it runs on the main one, where the arena and the curriculum's statistics are.
    sampling = build_sampling(cfg, rows, sources, checkpoint, ctx.ranks)
    observers.append(sampling.observe)
    # data.hardened: answers passing a weak task's tests are graded on its hardened cases too (alarms, not rewards)
    hardened = hardened_watch(cfg.data, ctx.tasks, grader, ctx.metrics)
    if hardened is not None:
        observers.append(hardened.observe)
    saved = [SaveBesideCheckpoints(sampling, every_rank=True)] + ([SaveBesideCheckpoints(arena)] if arena else [])
    metered: list[Any] = [hardened] if hardened is not None else []
    # each row an episode of the run's environment (feedback, tools); None: one answer, which TRL generates
    episodes: FeedbackRollout | ToolRollout | None = env.trainer_rollouts(ctx)
    if episodes is not None:
        observers.append(episodes.observe)
        metered.append(episodes)
    pipeline = None
    try:
        trainer = AZRGRPOTrainer(
            model=ctx.model,
            reward_funcs=list(ctx.rewards.trained.funcs) if ctx.rewards.trained is not None else [],
            args=ctx.args.grpo,
            train_dataset=grpo_dataset(ctx.tasks, hidden_only=env.hidden_tests),
            processing_class=ctx.tokenizer,
            # A policy that comes out of the SFT phase already carries its (trainable) adapter.
            peft_config=ctx.grpo_peft_config(),
            callbacks=ctx.callbacks("grpo", *saved),
            grader=grader,
            observers=observers,
            rounds=arena,
            sampling=sampling,
            metered=metered,
        )
        ctx.bind(trainer)
        # eval.every_steps: the held-out pass rate as it trains
        attach_heldout(trainer, heldout_evaluator(ctx), TrainerBatches(trainer))
        if cfg.eval.stop_on_alarm:  # the alarms are raised by ctx.metrics; this ends training cleanly once one has
            from azr.training.alarms import stop_on_alarm

            stop_on_alarm(trainer, ctx.metrics, ctx.ranks.world)
        if (backend := ctx.sidecar.generation(trainer)) is not None:
            use_generation_backend(trainer, backend)  # adapter mode: GRPO samples from the vLLM server
            if cfg.sampling.max_staleness:  # asynchronous GRPO: the server samples ahead, one LoRA per version
                playbook = ahead_playbook(ctx, trainer, episodes)
                pipeline = asynchronous(trainer, backend, cfg.sampling.max_staleness, playbook)
                sampling.pipeline = pipeline
        if pipeline is None:  # each round's rows are played as episodes of the run's environment
            TrainerBatches(trainer).use_rollouts(episodes or episode_rollouts(ctx, trainer))
        trainer.train(resume_from_checkpoint=checkpoint)
    finally:
        if pipeline is not None:
            pipeline.close()  # what it was sampling is discarded, never trained
        if arena is not None:
            arena.close()  # scoreboard.json and frontier.json written however training ended
    return finish_grpo(ctx, trainer, started)


def asynchronous(
    trainer: AZRGRPOTrainer, backend: LoraSync, max_staleness: int, playbook: Playbook | None = None
) -> AsyncRollouts:
    """Asynchronous GRPO over adapter mode's `backend` (`azr.serving.LoraSync`): it serves each policy version under
    its own name, the pipeline plays each row's episode ahead (`playbook`; default: the one-turn code task), and
    TRL's round takes the episodes through its `rollout_func`."""
    from azr.config import steps_per_generation
    from azr.envs import CodeEnvironment
    from azr.rollouts import AsyncRollouts
    from azr.training.episodes import ahead_playbook as play_rows

    view = TrainerBatches(trainer)
    backend.serve_versions()
    every = steps_per_generation(trainer.args)  # optimizer steps between two generations
    playbook = playbook or play_rows(CodeEnvironment(), view, {})
    pipeline = AsyncRollouts(
        backend, view.tokenize, max_staleness, view.group_size, every, seed=trainer.args.seed, playbook=playbook
    )
    view.use_rollouts(pipeline)
    return pipeline


def ahead_playbook(
    ctx: RunContext, trainer: AZRGRPOTrainer, episodes: FeedbackRollout | ToolRollout | None
) -> Playbook:
    """What asynchronous GRPO plays ahead for each row: the run's episodes as the synchronous round plays them (the
    same environment, limits and columns: `episode_rollouts`, or a `ToolRollout`'s or `FeedbackRollout`'s), each
    batch's programs run in the sandbox as soon as it is played where a trained reward grades them."""
    from azr.training.episodes import ahead_playbook as play_rows

    rollouts = episode_rollouts(ctx, trainer) if episodes is None else episodes.rollouts
    graded = ctx.rewards.trained is not None and ctx.rewards.trained.graded
    return play_rows(
        rollouts.env,
        TrainerBatches(trainer),
        rollouts.tasks,
        rollouts.limits,
        rollouts.columns,
        grader=ctx.rewards.grader if graded else None,
    )


def episode_rollouts(ctx: RunContext, trainer: AZRGRPOTrainer) -> EpisodeRollouts:
    """TRL's `rollout_func` for `trainer`: every row one episode of the code task (one turn, scored by TRL's reward
    functions, the run's rubric)."""
    from azr.envs import CodeEnvironment
    from azr.training.episodes import EpisodeRollouts

    return EpisodeRollouts(CodeEnvironment(), TrainerBatches(trainer), {t.id: t for t in ctx.tasks})


def heldout_evaluator(ctx: RunContext):
    """The run's held-out evaluation (`eval:`), sampled as GRPO samples unless the section says otherwise, graded
    in this rank's sandbox pool with the recipe's rewards; None when eval.every_steps is 0."""
    from azr.evaluation import build_heldout
    from azr.training.passrate import grpo_sampling

    rewards = ctx.rewards
    return build_heldout(
        ctx.cfg,
        sampling=grpo_sampling(ctx.args.grpo),
        max_completion_length=ctx.args.max_completion_length,
        ranks=ctx.ranks,
        metrics=ctx.metrics,
        rubric=rewards.rubric,
        pool=rewards.grader.pool,
        folder=ctx.out / "heldout" if ctx.ranks.main else None,
    )


def finish_grpo(ctx: RunContext, trainer: GRPOTrainer, started: float):
    """Save the trained policy to `final/` with its model card and record the phase; returns the model."""
    final = ctx.out / "final"
    trainer.save_model(str(final))  # on every rank: a sharded model is gathered to the main one, which writes
    info = {"seconds": round(time.monotonic() - started, 1), "steps": trainer.state.global_step}
    if digests := replica_digests(trainer, ctx.ranks):
        info["weights_sha256"] = digests  # one per rank: data-parallel replicas that must be equal
    ctx.state.finish("grpo", info)
    if ctx.ranks.main:
        from azr.training.modelcard import write_model_card

        ctx.tokenizer.save_pretrained(str(final))
        write_model_card(final, ctx.cfg, ctx.policy_dir, ctx.state)
    return trainer.model


def grpo_rows(tasks: list[Task], hidden_only: bool = False) -> list[dict[str, Any]]:
    """Conversational prompts plus the columns the rewards read. Hinted retries and replayed tasks enter the batch
    as rows with these same keys (`hint` holds the teacher's hint; `source` says where a row came from). With
    `hidden_only` (execution feedback), `tests` holds only the hidden tests the rewards score (`Task.split_tests`:
    the environment shows the public ones); tasks with no hidden test are left out (nothing could score their final
    answer unseen)."""
    rows = []
    for t in tasks:
        row = {
            "prompt": chat_messages(t.prompt),
            "task_id": t.id,
            **t.grading_columns(),
            "setup": t.setup or "",
            "hint": "",
            "source": "data",
        }
        if hidden_only:
            hidden = t.split_tests()[1]
            if not hidden:
                continue
            row["tests"] = encode_all(hidden)
        rows.append(row)
    return rows


def grpo_dataset(tasks: list[Task], hidden_only: bool = False):
    from datasets import Dataset

    return Dataset.from_list(grpo_rows(tasks, hidden_only))
