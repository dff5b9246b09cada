"""Reading a run folder for the report: what `azr train` wrote (config.yaml, state.json, summary.json, metrics.jsonl,
generations/, heldout/, self-play and Absolute-Zero files), finished or not.

Every file is optional and every JSONL line that does not parse (a log cut mid-line by SIGKILL, a run still
writing) is skipped: the report shows what is there. Only a missing run folder is an error. It reads files and
imports no training code.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from azr.alarms import Alarm, is_alarm, is_eval, is_step_log, replay
from azr.errors import UserError
from azr.logs import generation_files, read_jsonl_records

QUIET_S = 15 * 60  # a run without summary.json whose last record is older than this is taken as stopped
TEXT_CHARS = 3000  # each prompt and completion shown is cut to this many characters


@dataclass
class Run:
    """One run folder, read."""

    path: Path
    name: str
    config: dict[str, Any] = field(default_factory=dict)
    config_text: str = ""
    phases: dict[str, Any] = field(default_factory=dict)  # state.json
    summary: dict[str, Any] = field(default_factory=dict)  # summary.json (a finished run)
    records: list[dict[str, Any]] = field(default_factory=list)  # metrics.jsonl
    alarms: list[Alarm] = field(default_factory=list)
    recorded_alarms: set[str] = field(default_factory=set)  # rules the run itself recorded
    generations: list[dict[str, Any]] = field(default_factory=list)  # a sample of the generation log
    generation_files: list[Path] = field(default_factory=list)
    generations_total: int = 0
    verdicts: dict[int, Counter] = field(default_factory=dict)  # step -> status counts, over every generation
    az_reasons: Counter = field(default_factory=Counter)  # Absolute-Zero proposal validity reasons
    tool_calls: Counter = field(default_factory=Counter)  # tool name -> calls, from the generation log
    tool_errors: Counter = field(default_factory=Counter)
    scoreboard: dict[str, Any] | None = None
    frontier: dict[str, Any] | None = None
    versions: dict[str, str] = field(default_factory=dict)
    last_write: float | None = None
    audit: dict[str, Any] | None = None  # audit.json: the training tasks' test strength (data.audit)

    @property
    def logs(self) -> list[dict[str, Any]]:
        return [r for r in self.records if is_step_log(r)]

    @property
    def evals(self) -> list[dict[str, Any]]:
        return [r for r in self.records if is_eval(r)]

    def status(self, now: float | None = None) -> str:
        if self.summary:
            return "finished"
        if self.last_write is None:
            return "not started"
        quiet = (now or time.time()) - self.last_write
        if quiet > QUIET_S:
            return f"stopped before the end (crashed or killed; nothing written for {quiet / 60:.0f} min)"
        return "unfinished (still running, or stopped in the last minutes)"


def read_run(path: Path, sample_steps: int = 40, per_step: int = 6, seed: int = 0) -> Run:
    """Read `path`; raises UserError when it is not a folder. `sample_steps` x `per_step` generations are kept."""
    path = Path(path)
    if not path.is_dir():
        raise UserError(f"RUN_DIR: {path}: no such run folder")
    run = Run(path=path, name=path.resolve().name)
    config_file = path / "config.yaml"
    if config_file.is_file():
        run.config_text = config_file.read_text(encoding="utf-8", errors="replace")
        try:
            loaded = yaml.safe_load(run.config_text)
        except yaml.YAMLError:
            loaded = None
        run.config = loaded if isinstance(loaded, dict) else {}
    run.phases = (_json(path / "state.json") or {}).get("phases") or {}
    run.summary = _json(path / "summary.json") or {}
    run.audit = _json(path / "audit.json")
    metrics = path / "metrics.jsonl"
    if metrics.is_file():
        run.records = read_jsonl_records(metrics)
        run.last_write = metrics.stat().st_mtime
    run.recorded_alarms = {str(r.get("rule")) for r in run.records if is_alarm(r)}
    run.alarms = replay(run.records)
    _read_generations(run, sample_steps, per_step, seed)
    run.scoreboard = _json(path / "scoreboard.json")
    run.frontier = _json(path / "frontier.json")
    run.versions = _versions(path)
    return run


def _json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _read_generations(run: Run, sample_steps: int, per_step: int, seed: int) -> None:
    """Counts over every generation record (verdicts per step, validity reasons, tool calls), and a sample of
    `per_step` records from each of `sample_steps` steps spread over the run, as many verdicts as possible in each."""
    run.generation_files = generation_files(run.path / "generations")
    by_step: dict[int, list[dict[str, Any]]] = {}
    for file in run.generation_files:
        for record in read_jsonl_records(file):
            step = record.get("step")
            if not isinstance(step, int):
                continue
            run.generations_total += 1
            status = str(record.get("status") or record.get("verdict") or "ungraded")
            run.verdicts.setdefault(step, Counter())[status] += 1
            if record.get("reason") and "valid" in record:
                run.az_reasons[str(record["reason"])] += 1
            elif record.get("valid") is True:
                run.az_reasons["valid"] += 1
            _count_tools(run, record.get("messages"))
            by_step.setdefault(step, []).append(record)
    steps = sorted(by_step)
    if len(steps) > sample_steps:
        steps = [steps[round(i * (len(steps) - 1) / (sample_steps - 1))] for i in range(sample_steps)]
    rng = random.Random(seed)
    for step in dict.fromkeys(steps):
        run.generations.extend(_shown(r) for r in _spread(by_step[step], per_step, rng))


def _spread(records: list[dict[str, Any]], n: int, rng: random.Random) -> list[dict[str, Any]]:
    """Up to `n` records, taking each verdict in turn so rare ones (a timeout among passes) are kept."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault(str(r.get("status") or r.get("verdict") or "ungraded"), []).append(r)
    for group in groups.values():
        rng.shuffle(group)
    chosen: list[dict[str, Any]] = []
    while len(chosen) < n and any(groups.values()):
        for group in groups.values():
            if group and len(chosen) < n:
                chosen.append(group.pop())
    return chosen


def _cut(text: Any) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + f"\n… ({len(text) - TEXT_CHARS} more characters)"


def _shown(record: dict[str, Any]) -> dict[str, Any]:
    """What the browser shows of one generation record, texts cut to size."""
    shown = {
        "step": record.get("step"),
        "task_id": record.get("task_id"),
        "verdict": str(record.get("status") or record.get("verdict") or "ungraded"),
        "prompt": _cut(record.get("prompt")),
        "completion": _cut(record.get("completion")),
        "rewards": record.get("rewards") or {},
    }
    for key in ("tests_passed", "tests_total", "per_test", "duration_s", "reason", "source", "solve_rate"):
        if record.get(key) not in (None, "", []):
            shown[key] = record[key]
    failures = record.get("failures")
    if isinstance(failures, list) and failures:
        shown["failures"] = [_cut(f)[:500] for f in failures[:10]]
    if isinstance(record.get("messages"), list):
        shown["tool_messages"] = sum(isinstance(m, dict) and m.get("role") == "tool" for m in record["messages"])
    return shown


def _count_tools(run: Run, messages: Any) -> None:
    if not isinstance(messages, list):
        return
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "tool":
            name = str(m.get("name") or "(unnamed)")
            run.tool_calls[name] += 1
            if str(m.get("content") or "").startswith("[error]"):
                run.tool_errors[name] += 1


def _versions(path: Path) -> dict[str, str]:
    """What the saved model files say produced them: azr (the model card), transformers and peft."""
    found: dict[str, str] = {}
    for folder in (path / "final", path / "sft" / "final"):
        card = folder / "README.md"
        if "azr" not in found and card.is_file():
            match = re.search(r"trained with azr (\S+)", card.read_text(encoding="utf-8", errors="replace"))
            if match:
                found["azr"] = match.group(1)
        for name, key, label in (
            ("config.json", "transformers_version", "transformers"),
            ("adapter_config.json", "peft_version", "peft"),
        ):
            value = (_json(folder / name) or {}).get(key)
            if value and label not in found:
                found[label] = str(value)
    return found
