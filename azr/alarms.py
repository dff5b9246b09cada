"""Reward-hacking alarms: rules over the records a run already writes to `metrics.jsonl` (reward up while held-out
falls, format up while tests stay flat, length collapse or at the cap, sandbox failures rising), each raised once;
`AlarmWatch` wraps the run's metrics writer and writes each alarm beside the record that raised it. Pure Python:
training (live), audit's hardened check and `azr report` share it (docs/watching-a-run.md has the rules).
"""

from __future__ import annotations

import bisect
import logging
import math
import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

ALARM = "alarm"  # metrics.jsonl: {"phase": "grpo", "kind": "alarm", "step", "time", "rule", "message"}
EVAL = "eval"  # held-out evaluation records: {"phase": "grpo", "kind": "eval", "step", "pass_at_k", ...}
FAILURE_STATUSES = ("timeout", "crashed", "memory")  # the sandbox/<status> shares that count as a bad program run
_FAILURES = "sandbox/timeout+crashed+memory"  # the series the sandbox rule follows, summed per step log
RULES = ("reward_up_heldout_down", "format_up_tests_flat", "length_collapse", "length_at_cap", "sandbox_failures")


@dataclass(frozen=True)
class AlarmRules:
    """The rules' thresholds. `window` counts logged records (not steps), so sparse logging widens it in steps."""

    window: int = 10  # records averaged at each end of a comparison
    min_heldout_drop: float = 0.02  # a held-out fall smaller than this never alarms, however narrow the intervals
    min_format_rise: float = 0.1  # raw format reward (0..1 by default) above its first window
    flat_tests: float = 0.02  # a tests-reward rise below this (and below its noise) counts as flat
    collapse_ratio: float = 0.3  # mean length below this share of its first window's
    min_collapse_from: float = 8.0  # tokens: a first window shorter than this cannot collapse
    cap_share: float = 0.5  # share of completions cut at max_completion_length
    min_failure_share: float = 0.2  # timeout + crashed + memory share of the last window
    min_failure_rise: float = 0.1  # above the first window's


@dataclass(frozen=True)
class Alarm:
    step: int
    rule: str
    message: str

    def record(self, phase: str = "grpo", when: float | None = None) -> dict[str, Any]:
        """The alarm as its metrics.jsonl record."""
        when = time.time() if when is None else when
        record = {"phase": phase, "kind": ALARM, "step": self.step, "time": round(when, 3)}
        return record | {"rule": self.rule, "message": self.message}


def is_step_log(record: dict[str, Any]) -> bool:
    """A GRPO step's log (not SFT's, not the train pass rate before/after, not an eval or alarm record)."""
    return record.get("phase", "grpo") == "grpo" and record.get("kind") in (None, "log")


def is_eval(record: dict[str, Any]) -> bool:
    return record.get("kind") == EVAL or record.get("phase") == EVAL


def is_alarm(record: dict[str, Any]) -> bool:
    return record.get("kind") == ALARM or record.get("phase") == ALARM


def heldout_pass(record: dict[str, Any]) -> tuple[str, float, float, float] | None:
    """(k, value, low, high) of the smallest k an eval record holds; None without one."""
    found = []
    for k, entry in (record.get("pass_at_k") or {}).items():
        if isinstance(entry, dict) and _num(entry.get("value")):
            value = float(entry["value"])
            low, high = entry.get("low"), entry.get("high")
            low = float(low) if _num(low) else value
            high = float(high) if _num(high) else value
            found.append((int(k) if str(k).isdecimal() else 1 << 30, str(k), value, low, high))  # not "²"
    if not found:
        return None
    _, k, value, low, high = min(found)
    return k, value, low, high


def _num(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and its standard error (0 for a single value)."""
    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return mean, 0.0
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1) / n)


def _rise(before: list[float], after: list[float]) -> tuple[float, float]:
    """How much the mean of `after` exceeds that of `before`, and the noise of that difference (2 standard errors)."""
    (m0, s0), (m1, s1) = _mean_se(before), _mean_se(after)
    return m1 - m0, 2 * math.hypot(s0, s1)


def _reward_keys(record: dict[str, Any]) -> list[str]:
    return ["reward", *sorted(k for k in record if k.startswith("rewards/") and k.endswith("/mean"))]


def reward_label(key: str) -> str:
    """'rewards/format_reward/mean' -> 'format_reward'; 'reward' -> 'reward'."""
    return key.split("/")[1] if key.startswith("rewards/") else key


@dataclass
class Alarms:
    """Feed records in order; each rule raises at most once per run. `fired` holds every alarm raised so far."""

    rules: AlarmRules = field(default_factory=AlarmRules)
    fired: list[Alarm] = field(default_factory=list)
    logs: list[dict[str, Any]] = field(default_factory=list)  # GRPO step logs so far
    evals: list[dict[str, Any]] = field(default_factory=list)
    # Each numeric key of the step logs: its steps and values, in order (kept as they come, so a check is cheap).
    _steps: dict[str, list[int]] = field(default_factory=dict, repr=False)
    _values: dict[str, list[float]] = field(default_factory=dict, repr=False)

    def feed(self, record: dict[str, Any]) -> list[Alarm]:
        """The alarms `record` raises (usually none)."""
        if is_alarm(record):  # an alarm already written (a resumed run, or a report reading it): never again
            self._mark(record)
            return []
        step = record.get("step")
        if not isinstance(step, int):
            return []
        if is_eval(record):
            self.evals.append(record)
            found = [self._heldout(step)]
        elif is_step_log(record):
            self.logs.append(record)
            self._keep(record, step)
            found = [self._format(step), self._collapse(step), self._cap(step), self._failures(step)]
        else:
            return []
        new = [a for a in found if a is not None and a.rule not in self.rules_fired]
        self.fired.extend(new)
        return new

    def feed_all(self, records: Iterable[dict[str, Any]]) -> list[Alarm]:
        return [alarm for record in records for alarm in self.feed(record)]

    @property
    def rules_fired(self) -> set[str]:
        return {a.rule for a in self.fired}

    def _mark(self, record: dict[str, Any]) -> None:
        rule = str(record.get("rule"))
        if rule not in self.rules_fired:
            step = record.get("step") if isinstance(record.get("step"), int) else 0
            self.fired.append(Alarm(step, rule, str(record.get("message", ""))))

    def _keep(self, record: dict[str, Any], step: int) -> None:
        for key, value in record.items():
            if _num(value):
                self._steps.setdefault(key, []).append(step)
                self._values.setdefault(key, []).append(float(value))
        failures = [float(record[f"sandbox/{s}"]) for s in FAILURE_STATUSES if _num(record.get(f"sandbox/{s}"))]
        if failures:
            self._steps.setdefault(_FAILURES, []).append(step)
            self._values.setdefault(_FAILURES, []).append(sum(failures))

    def _series(self, key: str) -> list[float]:
        return self._values.get(key, [])

    def _ends(self, key: str) -> tuple[list[float], list[float]] | None:
        """The first and the last `window` values of `key`, when there are enough for two disjoint windows."""
        values, w = self._series(key), self.rules.window
        return (values[:w], values[-w:]) if len(values) >= 2 * w else None

    def _near(self, key: str, step: int) -> list[float]:
        """The last `window` values of `key` logged at or before `step`."""
        end = bisect.bisect_right(self._steps.get(key, []), step)
        return self._series(key)[max(0, end - self.rules.window) : end]

    def _heldout(self, step: int) -> Alarm | None:
        now = heldout_pass(self.evals[-1])
        if now is None:
            return None
        earlier = [(e, p) for e in self.evals[:-1] if (p := heldout_pass(e)) is not None and p[0] == now[0]]
        if not earlier:
            return None
        best, (k, value, low, high) = max(earlier, key=lambda ep: ep[1][1]), now
        _, b_value, b_low, b_high = best[1]
        drop, noise = b_value - value, math.hypot((b_high - b_low) / 2, (high - low) / 2)
        if drop <= max(noise, self.rules.min_heldout_drop):
            return None
        rose = []
        for key in _reward_keys(self.logs[-1] if self.logs else {}):
            then, recent = self._near(key, best[0]["step"]), self._near(key, step)
            if len(then) < 2 or len(recent) < 2 or recent == then:
                continue
            rise, noise_r = _rise(then, recent)
            if rise > noise_r and rise > 0:
                rose.append(f"{reward_label(key)} {statistics.fmean(then):.3f} → {statistics.fmean(recent):.3f}")
        if not rose:
            return None
        return Alarm(
            step,
            "reward_up_heldout_down",
            f"held-out pass@{k} fell from {b_value:.3f} [{b_low:.3f}, {b_high:.3f}] at step {best[0]['step']} to "
            f"{value:.3f} [{low:.3f}, {high:.3f}] while the training reward rose ({', '.join(rose)})",
        )

    def _format(self, step: int) -> Alarm | None:
        keys = _reward_keys(self.logs[-1])
        fmt = next((k for k in keys if "format" in k), None)
        tests = next((k for k in keys if "tests" in k), None)
        if fmt is None or tests is None or (f := self._ends(fmt)) is None or (t := self._ends(tests)) is None:
            return None
        f_rise, f_noise = _rise(*f)
        t_rise, t_noise = _rise(*t)
        if f_rise > max(f_noise, self.rules.min_format_rise) and t_rise < max(t_noise, self.rules.flat_tests):
            return Alarm(
                step,
                "format_up_tests_flat",
                f"the format reward rose {statistics.fmean(f[0]):.3f} → {statistics.fmean(f[1]):.3f} while the tests "
                f"reward stayed flat ({statistics.fmean(t[0]):.3f} → {statistics.fmean(t[1]):.3f}): format without "
                "working code",
            )
        return None

    def _collapse(self, step: int) -> Alarm | None:
        key = "completion_length" if self._series("completion_length") else "completions/mean_length"
        ends = self._ends(key)
        if ends is None:
            return None
        first, last = statistics.fmean(ends[0]), statistics.fmean(ends[1])
        if first >= self.rules.min_collapse_from and last < self.rules.collapse_ratio * first:
            return Alarm(
                step,
                "length_collapse",
                f"the mean completion length collapsed from {first:.1f} to {last:.1f} tokens",
            )
        return None

    def _cap(self, step: int) -> Alarm | None:
        values = self._series("completions/clipped_ratio")[-self.rules.window :]
        if len(values) < self.rules.window:
            return None
        share = statistics.fmean(values)
        if share > self.rules.cap_share:
            return Alarm(
                step,
                "length_at_cap",
                f"{share:.0%} of the completions of the last {len(values)} logged steps were cut at "
                "max_completion_length",
            )
        return None

    def _failures(self, step: int) -> Alarm | None:
        ends = self._ends(_FAILURES)
        if ends is None:
            return None
        rise, noise = _rise(*ends)
        first, last = statistics.fmean(ends[0]), statistics.fmean(ends[1])
        if last >= self.rules.min_failure_share and rise > max(noise, self.rules.min_failure_rise):
            return Alarm(
                step,
                "sandbox_failures",
                f"the share of programs that timed out, crashed or ran out of memory rose from {first:.0%} to "
                f"{last:.0%}",
            )
        return None


def replay(records: Iterable[dict[str, Any]], rules: AlarmRules | None = None) -> list[Alarm]:
    """Every alarm of a run: those it recorded, and those the rules find in its records that it did not record."""
    alarms, records = Alarms(rules or AlarmRules()), list(records)
    for record in sorted(records, key=lambda r: not is_alarm(r)):  # recorded alarms first: the rules skip those
        alarms.feed(record)
    return sorted(alarms.fired, key=lambda a: a.step)


class _Writer(Protocol):
    path: Path

    def write(self, record: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class AlarmWatch:
    """A metrics writer that feeds every record it writes to `alarms`, then writes each new alarm as a record and
    logs it as a warning. `prime(records)` feeds what a resumed run already wrote, so no alarm is raised twice."""

    def __init__(self, writer: _Writer, alarms: Alarms | None = None):
        self.writer, self.alarms = writer, alarms or Alarms()
        self.path = writer.path

    def prime(self, records: Iterable[dict[str, Any]]) -> None:
        for record in sorted(records, key=lambda r: not is_alarm(r)):  # recorded alarms first: they are not redone
            for alarm in self.alarms.feed(record):
                log.warning("alarm (step %d, %s, found on resume): %s", alarm.step, alarm.rule, alarm.message)
                self.writer.write(alarm.record())

    def write(self, record: dict[str, Any]) -> None:
        self.writer.write(record)
        for alarm in self.alarms.feed(record):
            log.warning("alarm at step %d (%s): %s", alarm.step, alarm.rule, alarm.message)
            self.writer.write(alarm.record(str(record.get("phase", "grpo"))))

    @property
    def fired(self) -> list[Alarm]:
        return self.alarms.fired

    @property
    def size(self) -> int:
        return getattr(self.writer, "size", 0)

    def close(self) -> None:
        self.writer.close()

    def __enter__(self) -> AlarmWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
