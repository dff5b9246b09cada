"""Held-out evaluation during a run (`eval:`): the policy as it trains, sampled on held-out tasks every
`eval.every_steps` GRPO steps through `azr eval`'s own samplers, grading and report (plus bootstrap intervals and
the run's weighted reward); each rank takes its share and the main process writes one `kind: eval` record. When to
evaluate inside the trainer is `azr.evaluation.callback`'s (docs/watching-a-run.md).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from azr.config import AzrConfig
from azr.data import Problem, load_tasks, select_tasks
from azr.evaluation.measure import Sampling, score_completions
from azr.evaluation.passk import bootstrap_interval, pass_at_k
from azr.evaluation.records import graded
from azr.evaluation.report import build_report
from azr.evaluation.samplers import Draws, Generated
from azr.evaluation.turns import run_turns, scored_problems, turn_summary
from azr.logs import JsonlWriter, atomic_write_text, read_jsonl_records
from azr.rewards import Rubric, sandbox_oracle
from azr.rollouts import ChatTokens, Processes, trainer_sampler

if TYPE_CHECKING:
    from transformers import Trainer

    from azr.rollouts import TrainerView

log = logging.getLogger(__name__)

KIND = "eval"  # metrics.jsonl records of this evaluation: {"phase": "grpo", "kind": "eval", ...}


class Ranks(Processes, Protocol):
    """What the evaluation needs of the run's ranks (`azr.training.ranks.Ranks`): what the episode runner needs of
    the run's processes (feedback turns play in step on every rank), and how to share out the problems."""

    def split(self, items: list) -> tuple[list, int]: ...

    def broadcast(self, obj: object) -> Any: ...


@dataclass
class HeldOutEvaluator:
    """Evaluates a policy on `problems` at a step; every rank calls `evaluate` together, the main one returns the
    record it wrote (the others None)."""

    problems: list[Problem]
    sampling: Sampling
    ks: list[int]
    every_steps: int
    cfg: AzrConfig
    ranks: Ranks
    metrics: JsonlWriter | None  # the run's metrics.jsonl; None on every rank but the main one
    rubric: Rubric  # the run's recipe rubric, built to score
    pool: Any = None  # the run's sandbox pool on this rank; None: the shared pool of cfg.sandbox
    folder: Path | None = None  # where each evaluation's samples go (heldout/step-N.jsonl); None: not kept
    done: set[int] = field(default_factory=set)  # steps already evaluated (read back on resume)
    seconds: float = 0.0  # evaluation wall time since the phase began (this process)
    began: float = field(default_factory=time.monotonic)

    def begin(self) -> None:
        """At the phase's start: which steps metrics.jsonl already holds an evaluation of (every rank learns it)."""
        done = sorted(logged_steps(self.metrics.path)) if self.metrics is not None else []
        self.done = set(self.ranks.broadcast(done))
        self.began, self.seconds = time.monotonic(), 0.0

    def due(self, step: int, max_steps: int) -> bool:
        """Every `every_steps` steps, the first (step 0, before any update) and the last; never twice a step."""
        wanted = step == 0 or step % self.every_steps == 0 or step == max_steps
        return wanted and step not in self.done

    def evaluate(self, draws: Draws, step: int) -> dict[str, Any] | None:
        started = time.monotonic()
        n = self.sampling.n
        mine, real = self.ranks.split(self.problems)  # padded: a sharded model needs every rank in every forward
        items = [(p, i) for p in mine for i in range(n)]
        timings = {"generation_s": 0.0, "grading_s": 0.0}
        versions: set[int] = set()
        turns = self.cfg.eval.turns
        if turns > 1:  # every rank plays its episodes in step with the others (padded items included)
            args = (turns, self.cfg.feedback, self.cfg.sandbox, self.cfg.answer_format, timings, self.pool)
            records = run_turns(items, draws, *args, processes=self.ranks, versions=versions)[: real * n]
            answers = [r["completion"] or "" for r in records]
        else:
            texts: list[Generated] = []
            for start in range(0, len(items), draws.chunk):
                t0 = time.monotonic()
                texts += draws.sample(items[start : start + draws.chunk])
                timings["generation_s"] += time.monotonic() - t0
            versions.update(g.version for g in texts if g.version is not None)
            items, texts = items[: real * n], texts[: real * n]
            rows = [(p, i, g.text, draws.mode, g.error) for (p, i), g in zip(items, texts, strict=True)]
            records = list(graded(rows, self.cfg.sandbox, self.cfg.answer_format, timings, self.pool)) if rows else []
            answers = [g.text or "" for g in texts]
        reward = self._reward(mine[:real], answers)  # the final answers
        parts = self.ranks.gather((records, reward, timings))
        wall_s = time.monotonic() - started
        self.seconds += wall_s  # every rank: the same steps, about the same time
        self.done.add(step)
        if not self.ranks.main:
            return None
        records = [r for part, _, _ in parts for r in part]
        totals = [(r, g) for _, (r, g), _ in parts if g]
        timings = {k: max(t[k] for _, _, t in parts) for k in timings}  # the ranks ran side by side
        record = self._record(step, records, totals, timings, wall_s)  # wall_s: the same figure as eval_wall_s adds
        if turns > 1:
            record["turns"] = turn_summary(records, turns)
        record["policy_version"] = max(versions) if versions else None  # every rank samples the same weights
        if self.folder is not None:
            atomic_write_text(self.folder / f"step-{step}.jsonl", "".join(_line(r) for r in records))
        if self.metrics is not None:
            self.metrics.write(record)
        first = record["pass_at_k"][str(self.ks[0])]
        log.info(
            "held-out eval at step %d: pass@%d %s [%s, %s], %d tasks x %d samples, %.1f s (%.1f%% of GRPO so far)",
            step,
            self.ks[0],
            _show(first["value"]),
            _show(first["low"]),
            _show(first["high"]),
            len(self.problems),
            n,
            record["wall_s"],
            100 * record["eval_share"],
        )
        return record

    def draws_for(self, view: TrainerView) -> Draws:
        """How the run generates, for its evaluations, through the rollout seam (`azr.rollouts.trainer_sampler`): the
        vLLM backend the trainer samples GRPO's batches from (adapter, server and colocate modes; one call for all
        of this rank's samples), else the policy's own `generate` (batches seeded as `azr eval` seeds them). Each
        sample carries the policy version that drew it. `view` is the trainer as an `azr.rollouts.TrainerView`
        shows it."""
        source, chat = trainer_sampler(view), ChatTokens(view.tokenizer, self.cfg.template_kwargs())
        return Draws(self.sampling, source, chat, served=view.backend is not None)

    @staticmethod
    def logger_keys(record: dict[str, Any]) -> dict[str, float]:
        """An evaluation record as flat `eval/` keys for the trainer's report_to loggers (wandb, tensorboard)."""
        return _logger_keys(record)

    def _reward(self, problems: list[Problem], texts: list[str]) -> tuple[float, int]:
        """(mean weighted reward, completions graded) of this rank's samples under the run's rewards."""
        if not problems:
            return 0.0, 0
        scored = score_completions(self.rubric, [p.task for p in problems], texts)
        return scored["reward"] or 0.0, scored["graded"]

    def _record(self, step: int, records: list, totals: list, timings: dict, wall_s: float) -> dict[str, Any]:
        report = build_report({"dataset": "held-out"}, self.ks, self.problems, records, timings, 0)
        per_problem = report["per_problem"]
        pass_at = {}
        for k in self.ks:
            scores = [pass_at_k(v["n"], v["c"], k) for v in per_problem.values() if v["n"] >= k]
            low, high = bootstrap_interval(scores, seed=step) if scores else (None, None)
            value = report["pass_at_k"][f"pass@{k}"]
            pass_at[str(k)] = {"value": _round(value), "low": _round(low), "high": _round(high)}
            pass_at[str(k)]["problems"] = len(scores)
        graded_n = sum(g for _, g in totals)
        counts = report["counts"]
        phase_s = max(time.monotonic() - self.began, 1e-9)
        return {
            "phase": "grpo",
            "kind": KIND,
            "step": step,
            "time": round(time.time(), 3),
            "tasks": len(self.problems),
            "samples": self.sampling.n,
            "pass_at_k": pass_at,
            "mean_reward": _round(sum(r * g for r, g in totals) / graded_n) if graded_n else None,
            "by_tag": report["by_tag"],
            "counts": {k: counts[k] for k in ("samples", "graded", "passed", "not_graded", "by_status")},
            "wall_s": round(wall_s, 3),
            "generation_s": round(timings["generation_s"], 3),
            "grading_s": round(timings["grading_s"], 3),
            "eval_wall_s": round(self.seconds, 3),
            "eval_share": round(self.seconds / phase_s, 4),
        }


def build_heldout(
    cfg: AzrConfig,
    *,
    sampling: dict[str, Any],
    max_completion_length: int,
    ranks: Ranks,
    metrics: JsonlWriter | None,
    rubric: Rubric,
    pool: Any = None,
    folder: Path | None = None,
) -> HeldOutEvaluator | None:
    """The run's held-out evaluator from its `eval:` section (None when `eval.every_steps` is 0); `sampling` is
    GRPO's own (temperature, top_p, top_k, min_p, repetition_penalty), the defaults of eval.temperature and
    eval.max_new_tokens."""
    ev = cfg.eval
    if not ev.every_steps:
        return None
    source = ev.tasks or cfg.data.eval
    assert source is not None  # refused at load (azr.config.heldout)
    data = cfg.data
    oracle = sandbox_oracle(cfg.sandbox)  # a format's outputs its file lacks, run in the sandbox
    split = {"oracle": oracle, "public_tests": data.public_tests}
    tasks = load_tasks(source, data.eval_column_map, data.eval_format, data.compare, data.float_tol, **split)
    problems = [Problem(t) for t in tasks]
    if ev.turns > 1:  # scored on hidden tests: a task without any cannot be (there is one at least: checked at load)
        problems, skipped = scored_problems(problems)
        if skipped:
            log.warning("held-out eval: %d tasks without hidden tests left out of eval.turns", len(skipped))
    if ev.max_tasks is not None and ev.max_tasks < len(problems):  # a seeded subset; all of them in the file's order
        chosen = select_tasks([p.task for p in problems], shuffle=True, seed=cfg.seed, max_tasks=ev.max_tasks)
        problems = [Problem(t) for t in chosen]
    values = {**sampling, **({"temperature": ev.temperature} if ev.temperature is not None else {})}
    chosen = Sampling(n=ev.samples, max_new_tokens=ev.max_new_tokens or max_completion_length, seed=cfg.seed, **values)
    log.info(
        "held-out eval: %d tasks from %s x %d samples every %d steps", len(problems), source, ev.samples, ev.every_steps
    )
    return HeldOutEvaluator(problems, chosen, sorted(ev.k), ev.every_steps, cfg, ranks, metrics, rubric, pool, folder)


def attach_heldout(trainer: Trainer, evaluator: HeldOutEvaluator | None, view: TrainerView) -> None:
    """Add the held-out evaluation to `trainer`, a GRPO trainer seen through `view` (an
    `azr.rollouts.TrainerView`) for sampling; nothing when `evaluator` is None."""
    if evaluator is not None:
        from azr.evaluation.callback import HeldOutCallback  # transformers: imported once a trainer exists

        trainer.add_callback(HeldOutCallback(evaluator, trainer, view))


def logged_steps(path: Path) -> set[int]:
    """Steps of the evaluations a run's metrics.jsonl already holds."""
    if not Path(path).exists():
        return set()
    return {r["step"] for r in read_jsonl_records(path) if r.get("kind") == KIND and isinstance(r.get("step"), int)}


def _logger_keys(record: dict[str, Any]) -> dict[str, float]:
    """An evaluation record as flat `eval/` keys for the trainer's report_to loggers (wandb, tensorboard, ...)."""
    logs: dict[str, float] = {}
    for k, v in record["pass_at_k"].items():
        for part, suffix in (("value", ""), ("low", "_low"), ("high", "_high")):
            if v[part] is not None:
                logs[f"eval/pass@{k}{suffix}"] = v[part]
    if record["mean_reward"] is not None:
        logs["eval/mean_reward"] = record["mean_reward"]
    for tag, row in record["by_tag"].items():
        first = next((key for key in row if key.startswith("pass@")), None)
        if first is not None and row[first] is not None:
            logs[f"eval/{first}/{tag}"] = row[first]
    for row in record.get("turns", {}).get("by_turn", []):  # execution feedback: pass@1 after each turn
        if row["pass@1"] is not None:
            logs[f"eval/turn_{row['turn']}/pass@1"] = row["pass@1"]
        if row["repaired"] is not None:
            logs[f"eval/turn_{row['turn']}/repaired"] = row["repaired"]
    logs["eval/wall_s"] = record["wall_s"]
    logs["eval/share"] = record["eval_share"]
    return logs


def _line(record: dict[str, Any]) -> str:
    import json

    return json.dumps(record, ensure_ascii=False) + "\n"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _show(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
