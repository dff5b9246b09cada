"""Trainer callbacks for a run's outputs: `metrics.jsonl`, the rich progress bar, the final summary table, and
extra state saved beside each checkpoint, and the stop on an unhealthy sandbox.

Owns the names of the metrics azr writes (one JSON object per logging step, TRL's own keys kept beside them) and
what the console shows. It computes nothing the trainers do not already measure, except rates over wall time.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console
from rich.logging import RichHandler
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from azr.logs import JsonlWriter

log = logging.getLogger(__name__)

# azr's metric name -> TRL's log key
RENAMED = {
    "reward": "reward",
    "reward_std": "reward_std",
    "frac_reward_zero_std": "frac_reward_zero_std",
    "pass_rate": "sandbox/passed",
    "completion_length": "completions/mean_length",
}


class MetricsCallback(TrainerCallback):
    """One `metrics.jsonl` record per logging step of `phase`; `trainer` (set after it is built) supplies the
    reward-stage time of an AZRGRPOTrainer. `writer` is None on every rank but the main one: TRL's logged values
    are already gathered over the ranks, and the file is written once."""

    def __init__(self, writer: JsonlWriter | None, phase: str):
        self.writer, self.phase = writer, phase
        self.trainer: Any = None

    def on_train_begin(self, args, state, control, **kwargs):
        self._mark(state)

    def _mark(self, state) -> None:
        self._time, self._step, self._tokens = time.monotonic(), state.global_step, state.num_input_tokens_seen or 0

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = dict(logs or {})
        if "train_runtime" in logs or state.global_step <= self._step:  # the end-of-training summary, or no step
            return
        if self.writer is None:
            return
        now = time.monotonic()
        steps, seconds = state.global_step - self._step, max(now - self._time, 1e-9)
        tokens = float(logs.get("num_tokens") or state.num_input_tokens_seen or 0)
        reward_s = getattr(self.trainer, "reward_seconds", None)
        generation_s = getattr(self.trainer, "generation_seconds", None)
        record: dict[str, Any] = {"phase": self.phase, "step": state.global_step, "time": round(time.time(), 3)}
        record["loss"] = logs.get("loss")
        record.update({name: logs.get(key) for name, key in RENAMED.items() if key in logs})
        record.update({k: v for k, v in logs.items() if k.startswith("rewards/") and k.endswith("/mean")})
        record["tokens_per_s"] = round((tokens - self._tokens) / seconds, 2) if tokens else None
        record["step_time_s"] = round(seconds / steps, 4)
        record.update(_gpu_memory())
        if reward_s is not None:
            record["reward_time_s"] = round(reward_s / steps, 4)
            record["reward_share"] = round(reward_s / seconds, 4)
            self.trainer.reward_seconds = 0.0
        if generation_s is not None:  # TRL's generation and scoring passes, rewards excluded
            record["generation_time_s"] = round(generation_s / steps, 4)
            self.trainer.generation_seconds = 0.0
        record.update({k: v for k, v in logs.items() if k not in record})
        self.writer.write(record)
        self._mark(state)
        self._tokens = tokens


def _gpu_memory() -> dict[str, float]:
    """Peak GPU memory of this process so far (tensors, and what the caching allocator holds), in GiB; {} on CPU."""
    import torch

    if not torch.cuda.is_available():
        return {}
    return {
        "gpu_peak_allocated_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
        "gpu_peak_reserved_gib": round(torch.cuda.max_memory_reserved() / 2**30, 2),
    }


class ConsoleCallback(TrainerCallback):
    """A rich progress bar per phase (step, loss, reward, pass rate, ETA), or one log line per logging step."""

    def __init__(self, progress: Progress | None, phase: str):
        self.progress, self.phase = progress, phase
        self._task = None

    def on_train_begin(self, args, state, control, **kwargs):
        if self.progress is not None:
            self._task = self.progress.add_task(self.phase, total=state.max_steps, completed=state.global_step, info="")

    def on_step_end(self, args, state, control, **kwargs):
        if self._task is not None:
            self.progress.update(self._task, completed=state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = logs or {}
        if "train_runtime" in logs:
            return
        shown = {"loss": logs.get("loss"), "reward": logs.get("reward"), "pass": logs.get("sandbox/passed")}
        info = "  ".join(f"{k} {v:.3f}" for k, v in shown.items() if isinstance(v, (int, float)))
        if self._task is not None:
            self.progress.update(self._task, info=info)
        else:
            log.info("%s step %d/%d  %s", self.phase, state.global_step, state.max_steps, info)

    def on_train_end(self, args, state, control, **kwargs):
        if self._task is not None:
            self.progress.update(self._task, completed=state.global_step)


class Saved(Protocol):
    """Run state kept beside each checkpoint (the self-play rounds, the rollout filter, Absolute Zero's buffers)."""

    def save(self, folder: Path) -> None: ...


class SaveBesideCheckpoints(TrainerCallback):
    """Calls `target.save(folder)` after the trainer saves each checkpoint folder, for run state the HF Trainer does
    not keep (the self-play scoreboard, waiting hints); a resume reads it back from the checkpoint it continues. On
    the main process only, as the trainer's own state; `every_rank` for a target that keeps a part per process (as
    the trainer's RNG states), which then decides what each process writes."""

    def __init__(self, target: Saved, every_rank: bool = False):
        self.target, self.every_rank = target, every_rank

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
        if (self.every_rank or state.is_world_process_zero) and folder.is_dir():
            self.target.save(folder)


class SandboxHealth(TrainerCallback):
    """Stop at the end of the step whose sandbox runs failed for infrastructure reasons past the limit: calls
    `check(total)` of each of `checked` (the rewards' code grader; Absolute Zero's validator and judge, each counting
    with `azr.rewards.InfraFailures`), which raises SandboxUnhealthy. `total` sums (errors, runs) over the
    processes first, so that every rank stops at the same step."""

    def __init__(self, checked: Sequence[Any], total: Callable[..., list[float]] | None = None):
        self.checked, self.total = list(checked), total

    def on_step_end(self, args, state, control, **kwargs):
        for item in self.checked:
            item.check(self.total)


def make_progress(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description:>5}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[info]}"),
        console=console,
    )


def rich_logging(console: Console) -> RichHandler:
    """Route log records through the progress bar's console so they print above the bar, not through it."""
    handler = RichHandler(console=console, show_path=False, markup=False, rich_tracebacks=False)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    return handler


def summary_table(summary: dict[str, Any]) -> Table:
    """The end-of-run table: steps, wall time, throughput, and reward and pass rate before and after GRPO."""
    table = Table(title=f"azr run: {summary.get('output_dir', '')}", show_header=True, header_style="bold")
    table.add_column("")
    table.add_column("start", justify="right")
    table.add_column("end", justify="right")
    before, after = summary.get("eval_before") or {}, summary.get("eval_after") or {}
    table.add_row("pass rate (train tasks, sampled)", _fmt(before.get("pass_rate")), _fmt(after.get("pass_rate")))
    table.add_row("mean reward (train tasks, sampled)", _fmt(before.get("reward")), _fmt(after.get("reward")))
    for key in sorted(k for k in before if k.startswith(("pass_rate_turn", "repaired_turn"))):  # feedback episodes
        what = (
            f"pass rate after turn {key[14:]}"
            if key.startswith("pass_")
            else f"turn-1 failures repaired by turn {key[13:]}"
        )
        table.add_row(f"{what} (train tasks, sampled)", _fmt(before.get(key)), _fmt(after.get(key)))
    first, last = summary.get("first_log") or {}, summary.get("last_log") or {}
    table.add_row("GRPO batch pass rate (first/last log)", _fmt(first.get("pass_rate")), _fmt(last.get("pass_rate")))
    table.add_row("GRPO batch reward (first/last log)", _fmt(first.get("reward")), _fmt(last.get("reward")))
    if heldout := summary.get("heldout"):
        first, last = heldout["first"]["pass_at_k"], heldout["last"]["pass_at_k"]
        for k in first:
            table.add_row(f"held-out pass@{k} (first/last eval)", _fmt(first[k]["value"]), _fmt(last[k]["value"]))
        table.add_row(
            "held-out eval: wall time / share of the run", _duration(heldout["wall_s"]), _fmt(heldout["share"])
        )
    for phase, info in (summary.get("phases") or {}).items():
        table.add_row(f"{phase}: steps / wall time", str(info.get("steps", "")), _duration(info.get("seconds")))
        table.add_row(f"{phase}: tokens/s", "", _fmt(info.get("tokens_per_s"), 1))
    table.add_row("total wall time", "", _duration(summary.get("seconds")))
    return table


def _fmt(value: object, digits: int = 3) -> str:
    if not isinstance(value, (int, float)) or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"


def _duration(seconds: object) -> str:
    if not isinstance(seconds, (int, float)):
        return "-"
    return f"{int(seconds) // 60}m{int(seconds) % 60:02d}s"


class RunConsole:
    """Rich progress bars and summary table, or plain log lines."""

    def __init__(self, mode: str, stack: ExitStack):
        self.progress = None
        if mode == "rich":
            self.console = Console(stderr=True)
            self.progress = stack.enter_context(make_progress(self.console))
            root = logging.getLogger()
            handler, previous = rich_logging(self.console), list(root.handlers)
            root.handlers = [handler]
            stack.callback(lambda: setattr(root, "handlers", previous))

    def callback(self, phase: str):
        return ConsoleCallback(self.progress, phase)

    def show_summary(self, summary: dict[str, Any]) -> None:
        if self.progress is not None:
            self.progress.stop()
        Console().print(summary_table(summary))
