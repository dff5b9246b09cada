"""Where a run stands: the phases it has finished (`output_dir/state.json`) and where `--resume-from` continues.

A phase is recorded only once it has finished, atomically, so a crash leaves the record of the phases before it.
Checkpoints count only when complete: the HF Trainer writes `trainer_state.json` last, so a folder without a
readable one was cut short while saving and is passed over. A resumed run's logs are pruned back to its checkpoint
(`prune_logs`), so that no record is written twice.
"""

from __future__ import annotations

import contextlib
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from azr.config import AzrConfig
from azr.errors import ConfigError
from azr.inputs import load_json
from azr.logs import atomic_write_json, generation_files, prune_jsonl, read_jsonl_records

log = logging.getLogger(__name__)

PHASES = ("sft", "eval_before", "grpo", "eval_after")
CHECKPOINT_DIRS = {"sft": Path("sft") / "checkpoints", "grpo": Path("checkpoints")}
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


@dataclass
class RunState:
    path: Path
    phases: dict[str, Any] = field(default_factory=dict)  # finished phase -> what it measured
    writes: bool = True  # False on every rank but the main one: they keep the same state without writing it

    @classmethod
    def load(cls, out: Path, writes: bool = True) -> RunState:
        path = Path(out) / "state.json"
        if not path.exists():
            return cls(path, writes=writes)
        try:
            phases = load_json(path.read_bytes())["phases"]  # a folder handed back may hold anything
        except (ValueError, KeyError, TypeError):
            raise ConfigError(f"{path}: not a run state file azr wrote; choose another output_dir") from None
        return cls(path, dict(phases), writes)

    def done(self, phase: str) -> bool:
        return phase in self.phases

    def info(self, phase: str) -> Any:
        return self.phases.get(phase)

    def finish(self, phase: str, info: object) -> None:
        self.phases[phase] = info
        self._write()

    def reset_from(self, phase: str) -> None:
        """Forget `phase` and every phase after it (they will run again)."""
        later = PHASES[PHASES.index(phase) :]
        self.phases = {p: v for p, v in self.phases.items() if p not in later}
        self._write()

    def _write(self) -> None:
        if self.writes:
            atomic_write_json(self.path, {"phases": self.phases})


@dataclass(frozen=True)
class Resume:
    phase: str | None = None  # the phase to continue; None: a fresh run
    checkpoint: str | None = None  # its checkpoint, or None to start that phase from its beginning
    pruned_to: int | None = None  # logs of `phase` past this step are dropped; None: nothing to prune


def checkpoints(out: Path, phase: str) -> list[tuple[int, Path]]:
    """Complete checkpoints of `phase`, oldest first."""
    folder = Path(out) / CHECKPOINT_DIRS[phase]
    found = []
    for path in folder.glob("checkpoint-*") if folder.is_dir() else []:
        match = _CHECKPOINT.match(path.name)
        if match and _complete(path):
            found.append((int(match.group(1)), path))
    return sorted(found)


def _complete(path: Path) -> bool:
    try:
        load_json((path / "trainer_state.json").read_bytes())
    except (OSError, ValueError):
        return False
    return True


def resolve_resume(out: Path, state: RunState, resume_from: str | None, sft: bool) -> Resume:
    """Turn `--resume-from` (None, 'latest' or a checkpoint folder) into a Resume; refuse to overwrite a run."""
    out = Path(out)
    # A run killed before its first checkpoint or finished phase has still logged records that must be pruned.
    logged = (out / "metrics.jsonl").exists() and (out / "metrics.jsonl").stat().st_size > 0
    started = bool(state.phases) or logged or any(checkpoints(out, p) for p in CHECKPOINT_DIRS)
    if resume_from is None:
        if started:
            raise ConfigError(
                f"output_dir: {out} already holds a run; pass --resume-from latest to continue it, or choose a new "
                "output_dir"
            )
        return Resume()
    if resume_from == "latest":
        if not started:
            log.info("resume: nothing to resume in %s; starting a new run", out)
            return Resume()
        todo = [p for p in PHASES if not state.done(p) and (sft or p != "sft")]
        if not todo:
            log.info("resume: every phase of %s has finished", out)
            return Resume()
        # A phase that never ran (eval_before with logging.pass_rate_tasks 0) is not finished either: the first
        # unfinished phase with checkpoints is where the run was.
        saved = [p for p in todo if p in CHECKPOINT_DIRS and checkpoints(out, p)]
        phase = saved[0] if saved else todo[0]
        found = checkpoints(out, phase) if phase in CHECKPOINT_DIRS else []
        step, path = found[-1] if found else (0, None)
        return Resume(phase, str(path) if path else None, step)
    path = Path(resume_from).expanduser().resolve()
    phase = next((p for p, d in CHECKPOINT_DIRS.items() if path.parent == (out / d).resolve()), None)
    match = _CHECKPOINT.match(path.name)
    if phase is None or match is None:
        raise ConfigError(f"--resume-from: {resume_from} is not a checkpoint-N folder of this run ({out})")
    if not _complete(path):
        raise ConfigError(f"--resume-from: {resume_from} is incomplete (no readable trainer_state.json)")
    state.reset_from(phase)
    return Resume(phase, str(path), int(match.group(1)))


def write_summary(out: Path, state: RunState, seconds: float, logs: dict[str, Any] | None = None) -> dict[str, Any]:
    """`summary.json`: the run's wall time, each phase's steps, seconds and tokens/s, the pass rate measured before
    and after GRPO, the first and last GRPO records that logged rewards (the summary table's figures), and with
    eval.every_steps the first and last held-out pass@k and the evaluations' wall time and share of the run's; `logs`
    (the generation log's written / dropped / error) as given, and `status`: "failed" when a log's writer failed."""
    records = read_jsonl_records(out / "metrics.jsonl") if (out / "metrics.jsonl").exists() else []
    # With num_iterations > 1, TRL logs the rewards only on steps that generated: first/last are those steps.
    grpo = [r for r in records if r.get("phase") == "grpo" and "reward" in r]
    phases = {}
    for phase in ("sft", "grpo"):
        rows = [r for r in records if r.get("phase") == phase and "kind" not in r]  # not the held-out evaluations
        if rows:
            phases[phase] = {
                "steps": rows[-1]["step"],
                "seconds": (state.info(phase) or {}).get("seconds"),
                "tokens_per_s": mean_rate(rows),
            }
    summary = {
        "output_dir": str(out),
        "seconds": round(seconds, 1),
        "phases": phases,
        "eval_before": state.info("eval_before"),
        "eval_after": state.info("eval_after"),
        "first_log": grpo[0] if grpo else None,
        "last_log": grpo[-1] if grpo else None,
    }
    evals = [r for r in records if r.get("kind") == "eval"]
    if evals:  # eval.every_steps: the held-out pass@k at the first and last evaluation, and what they cost
        wall = sum(r.get("wall_s") or 0.0 for r in evals)
        summary["heldout"] = {
            "evaluations": len(evals),
            "first": {"step": evals[0]["step"], "pass_at_k": evals[0]["pass_at_k"]},
            "last": {"step": evals[-1]["step"], "pass_at_k": evals[-1]["pass_at_k"]},
            "wall_s": round(wall, 1),
            "share": round(wall / seconds, 4) if seconds > 0 else None,
        }
    for name, counts in (logs or {}).items():
        summary[name] = counts
    summary["status"] = "failed" if any(c.get("error") for c in (logs or {}).values()) else "ok"
    audit = out / "audit.json"
    if audit.is_file():  # data.audit: the training tasks' test strength (azr.audit)
        with contextlib.suppress(OSError, ValueError):
            summary["audit"] = load_json(audit.read_text(encoding="utf-8"))
    if hacking := reward_hacking(records):  # data.hardened
        summary["reward_hacking"] = hacking
    atomic_write_json(out / "summary.json", summary)
    return summary


def reward_hacking(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """data.hardened's figures: the `reward_hacking` alarms (completions that passed a weak task's tests and failed
    its hardened cases), on how many tasks, from which step, and the answers checked or skipped over the cap; None
    for a run that checked nothing."""
    alarms = [r for r in records if r.get("kind") == "alarm" and r.get("rule") == "reward_hacking"]
    logs = [r for r in records if "hardened/checked" in r]
    if not alarms and not logs:
        return None
    total = {k: sum(r.get(f"hardened/{k}") or 0 for r in logs) for k in ("checked", "skipped", "errors", "time_s")}
    return {
        "alarms": len(alarms),
        "tasks": len({r.get("task_id") for r in alarms}),
        "first_step": alarms[0].get("step") if alarms else None,
        **{k: round(v, 2) if k == "time_s" else v for k, v in total.items()},
    }


def mean_rate(rows: list[dict[str, Any]]) -> float | None:
    """Tokens per second over a phase's logged steps, each record weighted by the time it covers (steps that only
    re-use a generated batch, with num_iterations > 1, log 0 tokens/s and still count their time)."""
    spans, previous = [], 0
    for r in rows:
        if isinstance(r.get("tokens_per_s"), (int, float)) and isinstance(r.get("step_time_s"), (int, float)):
            spans.append((r["tokens_per_s"], r["step_time_s"] * (r["step"] - previous)))
        previous = r["step"]
    seconds = sum(dt for _, dt in spans)
    return sum(rate * dt for rate, dt in spans) / seconds if seconds > 0 else None


def prune_logs(cfg: AzrConfig, out: Path, state: RunState, resume: Resume) -> None:
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
