"""The train pass rate `azr train` samples before and after GRPO: the policy sampled on training tasks at GRPO's own
sampling settings, graded with the run's rewards. With several ranks each samples its share of the tasks and the
main one grades them all. It does not decide when to measure (`run_train` does) nor train anything.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from azr.config import AzrConfig, environment_of
from azr.data import Task
from azr.logs import JsonlWriter
from azr.rewards import Rubric
from azr.training.ranks import Ranks
from azr.training.trl import TrainerArgs

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

log = logging.getLogger(__name__)


def grpo_sampling(grpo) -> dict[str, Any]:
    """The sampling settings GRPO generates with (its built trl.GRPOConfig `grpo`), so the measured pass rate is
    that of the distribution being trained. TRL samples with top_k=0 (no cut), where `generate` alone would use 50."""
    names = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")
    values = {name: getattr(grpo, name) for name in names}
    values |= {k: v for k, v in (grpo.generation_kwargs or {}).items() if k in values}
    return {
        "temperature": float(values["temperature"]),
        "top_p": float(values["top_p"]),
        "top_k": int(values["top_k"] or 0),
        "min_p": values["min_p"],
        "repetition_penalty": float(values["repetition_penalty"]),
    }


def pass_rate_measurer(
    cfg: AzrConfig,
    args: TrainerArgs,
    rubric: Rubric,
    tokenizer: PreTrainedTokenizerBase,
    tasks: list[Task],
    ranks: Ranks,
):
    """`measure(model, phase, metrics)`: the pass rate and mean reward of `logging.pass_rate_samples` completions per
    task, sampled as GRPO samples; logged to `metrics` (None on every rank but the main one) and returned."""
    from azr.evaluation import Sampling, generate_completions, score_completions

    sampling = Sampling(
        n=cfg.logging.pass_rate_samples,
        max_new_tokens=args.max_completion_length,
        seed=cfg.seed,
        **grpo_sampling(args.grpo),
    )
    template = cfg.template_kwargs()

    def measure(model, phase: str, metrics: JsonlWriter | None) -> dict[str, Any]:
        started = time.monotonic()
        if environment_of(cfg).feedback_turns:  # episodes as GRPO plays them: the pass rate after each turn
            return finish(feedback_rate(model), phase, metrics, started)
        # Each rank samples its share of the tasks; the main process grades them all and tells the others.
        mine, real = ranks.split(tasks)
        completions = generate_completions(model, tokenizer, mine, sampling, template)
        completions = [c for part in ranks.gather(completions[: real * sampling.n]) for c in part]
        result = score_completions(rubric, tasks, completions) if ranks.main else None
        return finish(ranks.broadcast(result), phase, metrics, started)

    def feedback_rate(model) -> dict[str, Any]:
        """Feedback episodes are measured on the main process alone (their turns depend on the sandbox's verdicts
        between samples); the others wait for its figures."""
        from azr.training.episodes import measure_episodes

        result = None
        if ranks.main:
            result = measure_episodes(model, tokenizer, tasks, sampling, rubric, cfg.feedback, template)
        return ranks.broadcast(result)

    def finish(result: dict[str, Any], phase: str, metrics: JsonlWriter | None, started: float) -> dict[str, Any]:
        result["seconds"] = round(time.monotonic() - started, 1)
        if metrics is not None:
            metrics.write({"phase": phase, "step": 0, "time": round(time.time(), 3), "tasks": len(tasks), **result})
        log.info(
            "%s: pass rate %.3f, mean reward %.3f over %d sampled completions of %d training tasks",
            phase,
            result["pass_rate"],
            result["reward"],
            result["graded"],
            len(tasks),
        )
        turns = sorted(k for k in result if k.startswith(("pass_rate_turn", "repaired_turn")))
        if turns:
            log.info("%s: %s", phase, ", ".join(f"{k} {_fmt(result[k])}" for k in turns))
        return result

    return measure


def _fmt(value: object) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)
