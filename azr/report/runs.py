"""Reading run folders for the report (config, state, summary, metrics, generations, held-out, self-play and
Absolute-Zero files), finished or not. Every file is optional and every record is read defensively: what the report
cannot use is skipped and counted (`Run.skipped`), and only a missing folder is an error. Imports no training code.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from azr.alarms import Alarm, is_alarm, is_eval, is_step_log, replay
from azr.errors import UserError
from azr.inputs import load_json
from azr.logs import generation_files

QUIET_S = 15 * 60  # a run without summary.json whose last record is older than this is taken as stopped
TEXT_CHARS = 3000  # each prompt and completion shown is cut to this many characters
T = TypeVar("T")


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
    skipped: Counter = field(default_factory=Counter)  # file name -> records (or whole files) the report could not use
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
        except (yaml.YAMLError, ValueError, RecursionError):  # an integer too long; one recursion per level
            loaded = None
        run.config = loaded if isinstance(loaded, dict) else _skip(run, "config.yaml", {})
    phases = (_json(run, path / "state.json") or {}).get("phases") or {}
    run.phases = phases if isinstance(phases, dict) else _skip(run, "state.json", {})
    summary = _json(run, path / "summary.json") or {}
    if summary and not (_number(summary.get("seconds")) or summary.get("seconds") is None):
        summary = _skip(run, "summary.json", {"seconds": None, **{k: v for k, v in summary.items() if k != "seconds"}})
    run.summary = summary
    audit = _json(run, path / "audit.json")
    run.audit = audit if audit is None or isinstance(audit, dict) else _skip(run, "audit.json", None)
    metrics = path / "metrics.jsonl"
    if metrics.is_file():
        run.records = [r for r in _records(run, metrics) if _usable_metric(r) or _skip(run, metrics.name, False)]
        run.last_write = metrics.stat().st_mtime
    run.recorded_alarms = {str(r.get("rule")) for r in run.records if is_alarm(r)}
    run.alarms = replay(run.records)
    _read_generations(run, sample_steps, per_step, seed)
    board, frontier = _json(run, path / "scoreboard.json"), _json(run, path / "frontier.json")
    run.scoreboard = board if board is None or _usable_board(board) else _skip(run, "scoreboard.json", None)
    run.frontier = frontier if frontier is None or _usable_frontier(frontier) else _skip(run, "frontier.json", None)
    run.versions = _versions(run, path)
    return run


def _skip(run: Run, name: str, instead: T) -> T:
    """Count one record (or file) of `name` the report could not use; returns `instead`."""
    run.skipped[name] += 1
    return instead


def _json(run: Run, path: Path) -> dict[str, Any] | None:
    """A JSON file's object; None when absent, and None (counted as skipped) when it does not parse or is no object."""
    if not path.is_file():  # a FIFO would block the read for ever
        return None
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    try:
        data = load_json(text)
    except ValueError:
        data = None
    return data if isinstance(data, dict) else _skip(run, path.name, None)


def _records(run: Run, path: Path, label: str | None = None) -> list[dict[str, Any]]:
    """Every line of a JSONL file that parses (nesting and integer digits bounded) as an object; the others are
    counted as skipped, under `label` (default: the file's name)."""
    records: list[dict[str, Any]] = []
    if not path.is_file():  # a FIFO would block the read for ever
        return records
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                record = load_json(line)
            except ValueError:
                record = None
            if isinstance(record, dict):
                records.append(record)
            else:
                _skip(run, label or path.name, None)
    return records


def _number(value: object) -> bool:
    """A JSON number (NaN and the infinities included: the plots leave those out); not a boolean."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _numbers(mapping: object, keys: tuple[str, ...]) -> bool:
    """`mapping` is an object whose `keys`, where present, are numbers or null."""
    return isinstance(mapping, dict) and all(mapping.get(k) is None or _number(mapping[k]) for k in keys)


def _usable_metric(record: dict[str, Any]) -> bool:
    """A metrics.jsonl record the report can read: a whole-number `step` wherever one is expected, numbers where
    the plots and tables read numbers, and names (statuses, rules, `pass_at_k` keys) of the kinds they use."""
    if "step" in record and not _count(record["step"]):
        return False
    if "time" in record and not (record["time"] is None or _number(record["time"])):
        return False
    if is_alarm(record):
        return (
            _count(record.get("step"))
            and isinstance(record.get("rule"), str)
            and isinstance(record.get("message"), str)
        )
    if is_eval(record):
        return _count(record.get("step")) and _usable_eval(record)
    if is_step_log(record):
        plain = {k: v for k, v in record.items() if k not in ("phase", "kind")}
        return _count(record.get("step")) and all(v is None or isinstance(v, (int, float)) for v in plain.values())
    return _numbers(record, ("pass_rate", "loss", "seconds"))


def _usable_eval(record: dict[str, Any]) -> bool:
    """A held-out evaluation record: `pass_at_k` maps whole numbers (as text: "1", "10") to their value and interval,
    `by_tag` maps tags to their counts and pass@k values."""
    pass_at_k, by_tag = record.get("pass_at_k") or {}, record.get("by_tag") or {}
    if not isinstance(pass_at_k, dict) or not isinstance(by_tag, dict):
        return False
    if not all(
        re.fullmatch(r"[0-9]{1,6}", str(k)) and _numbers(v, ("value", "low", "high")) for k, v in pass_at_k.items()
    ):
        return False
    if not all(isinstance(t, dict) and all(v is None or _number(v) for v in t.values()) for t in by_tag.values()):
        return False
    return _numbers(record, ("eval_wall_s", "eval_share", "mean_reward", "wall_s"))


def _usable_generation(record: dict[str, Any]) -> bool:
    """A generation record the browser can show: an integer step, texts where texts go, numbers where numbers go."""
    if not _count(record.get("step")):
        return False
    texts = ("status", "verdict", "prompt", "completion", "reason", "source", "role", "type")
    if not all(record.get(k) is None or isinstance(record[k], str) for k in texts):
        return False
    if not (record.get("task_id") is None or isinstance(record["task_id"], (str, int))):
        return False
    rewards = record.get("rewards") or {}
    if not isinstance(rewards, dict) or not all(v is None or _number(v) for v in rewards.values()):
        return False
    if not _numbers(record, ("duration_s", "solve_rate")):
        return False
    if not all(record.get(k) is None or _count(record[k]) for k in ("tests_passed", "tests_total")):
        return False
    lists = {"per_test": bool, "failures": str, "messages": dict}
    return all(
        record.get(k) is None or (isinstance(record[k], list) and all(isinstance(x, kind) for x in record[k]))
        for k, kind in lists.items()
    )


def _usable_board(board: dict[str, Any]) -> bool:
    """scoreboard.json: win rates of numbers, counts per outcome, the last step."""
    win = board.get("win_rate") or {}
    rates = ("rate", "low", "high", "wins", "decisive")
    if not isinstance(win, dict) or not all(_numbers(win.get(k) or {}, rates) for k in ("problem", "completion")):
        return False
    counts = [board.get(k) or {} for k in ("problems", "completions", "hinted")]
    if not all(isinstance(c, dict) and all(_number(v) for v in c.values()) for c in counts):
        return False
    return _numbers(board, ("frontier_tasks", "last_step"))


def _usable_frontier(frontier: dict[str, Any]) -> bool:
    entries = frontier.get("entries") or {}
    steps = ("count", "first_step", "last_step", "last_solved_step")
    return isinstance(entries, dict) and all(
        _numbers(e, steps) and all(e.get(k) is None or math.isfinite(e[k]) for k in steps) for e in entries.values()
    )


def _read_generations(run: Run, sample_steps: int, per_step: int, seed: int) -> None:
    """Counts over every generation record (verdicts per step, validity reasons, tool calls), and a sample of
    `per_step` records from each of `sample_steps` steps spread over the run, as many verdicts as possible in each."""
    run.generation_files = generation_files(run.path / "generations")
    by_step: dict[int, list[dict[str, Any]]] = {}
    for file in run.generation_files:
        for record in _records(run, file, "generations"):
            if not _usable_generation(record):
                _skip(run, "generations", None)
                continue
            step = record["step"]
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


def _cut(text: object) -> str:
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


def _count_tools(run: Run, messages: object) -> None:
    if not isinstance(messages, list):
        return
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "tool":
            name = str(m.get("name") or "(unnamed)")
            run.tool_calls[name] += 1
            if str(m.get("content") or "").startswith("[error]"):
                run.tool_errors[name] += 1


def _versions(run: Run, path: Path) -> dict[str, str]:
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
            value = (_json(run, folder / name) or {}).get(key)
            if value and label not in found:
                found[label] = str(value)
    return found
