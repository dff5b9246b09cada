"""The report's plots as data for plotly: per plot over steps, its title and every run's traces (one colour per run
when runs are overlaid), alarms marked on the step axis; a plot no run has data for is left out. Draws nothing.
Every title, trace name and hover text is escaped (`plotly_text`): plotly reads markup in the texts it draws.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from azr.alarms import heldout_pass, reward_label
from azr.report.runs import Run

COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]
DASHES = ["solid", "dot", "dash", "longdash", "dashdot", "longdashdot"]
VERDICTS = {  # sandbox/<status> share -> label and colour; "failed" is what remains of each step
    "passed": ("passed", "#2ca02c"),
    "failed": ("failed", "#ff7f0e"),
    "no_code": ("no code", "#bcbd22"),
    "timeout": ("timeout", "#9467bd"),
    "crashed": ("crashed", "#d62728"),
    "memory": ("memory", "#8c564b"),
    "error": ("infrastructure", "#7f7f7f"),
}

# (id, title, y-axis title, [(metrics key or a function of the run's logs, label)])
Series = tuple[str, str]
LINE_PLOTS: list[tuple[str, str, str, list[Series]]] = [
    ("pass_rate", "Batch pass rate (training completions)", "share", [("pass_rate", "passed every test")]),
    (
        "feedback",
        "Execution feedback: pass rate by turn (hidden tests, training episodes)",
        "share",
        [
            ("feedback/pass_turn1", "after turn 1"),
            ("feedback/pass_turn2", "after turn 2"),
            ("feedback/pass_turn3", "after turn 3"),
            ("feedback/repaired_turn2", "turn-1 failures repaired by turn 2"),
        ],
    ),
    (
        "dynamic",
        "Zero-variance groups and dynamic sampling",
        "share",
        [
            ("frac_reward_zero_std", "groups with zero reward spread"),
            ("sampling/zero_variance_share", "trained groups without signal"),
            ("sampling/kept_share", "kept ratio (generated groups trained)"),
        ],
    ),
    (
        "length",
        "Completion length",
        "tokens",
        [
            ("completion_length", "mean"),
            ("completions/p95_length", "p95"),
            ("completions/max_length", "max"),
            ("completions/min_length", "min"),
        ],
    ),
    ("clipped", "Completions cut at the cap", "share", [("completions/clipped_ratio", "cut at max_completion_length")]),
    ("kl", "KL to the reference", "kl", [("kl", "kl")]),
    ("entropy", "Entropy", "nats/token", [("entropy", "entropy")]),
    ("grad_norm", "Gradient norm", "norm", [("grad_norm", "grad norm")]),
    ("learning_rate", "Learning rate", "lr", [("learning_rate", "learning rate")]),
    ("throughput", "Throughput", "tokens/s", [("tokens_per_s", "tokens/s")]),
    (
        "time",
        "Time per step: generation, rewards, training",
        "seconds",
        [
            ("step_time_s", "whole step"),
            ("generation_time_s", "generation"),
            ("reward_time_s", "rewards (sandbox)"),
            ("rest_time_s", "update and the rest (step − generation − rewards)"),
        ],
    ),
    (
        "tools",
        "Tool calls",
        "per completion",
        [("tools/call_frequency", "calls"), ("tools/failure_frequency", "failures")],
    ),
]


# Asynchronous GRPO (`sampling.max_staleness`, azr.rollouts.pipeline) and TRL's importance-sampling correction;
# the staleness histogram's keys (`async/staleness_<k>`) are found in the logs (`_staleness_plot`).
ASYNC_PLOTS: list[tuple[str, str, str, list[Series]]] = [
    (
        "async_seconds",
        "Asynchronous GRPO: sampling against the trainer's wait",
        "seconds",
        [("async/generate_seconds", "sampling (producer)"), ("async/wait_seconds", "trainer waited for samples")],
    ),
    (
        "async_shares",
        "Asynchronous GRPO: overlap and the correction's reach",
        "share",
        [
            ("async/overlap_share", "generation hidden behind training (1 − wait / sampling)"),
            ("async/importance_outside_band_share", "importance ratios clipped or masked"),
        ],
    ),
    (
        "async_dropped",
        "Asynchronous GRPO: samples dropped as too stale",
        "samples",
        [("async/dropped_samples", "this step"), ("async/dropped_samples_total", "since the start")],
    ),
    (
        "importance",
        "Importance ratio, policy / sampler (TRL's correction)",
        "ratio",
        [
            ("sampling/importance_sampling_ratio/mean", "mean"),
            ("sampling/importance_sampling_ratio/min", "min"),
            ("sampling/importance_sampling_ratio/max", "max"),
        ],
    ),
]
STALENESS = re.compile(r"async/staleness_([0-9]{1,4})")


def plotly_text(value: object) -> str:
    """`value` as text plotly draws literally: it decodes the entities back into characters but never reads them as
    tags."""
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _num(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _round(value: float) -> float:
    return float(f"{value:.5g}")


def series(logs: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """Steps and values of `key` over the step logs that have it (`rest_time_s` derived: the step minus rewards and
    generation, or minus rewards alone in a run that did not log its generation time)."""
    xs, ys = [], []
    for r in logs:
        if key == "rest_time_s":
            generation = r["generation_time_s"] if _num(r.get("generation_time_s")) else 0.0
            value = (
                r["step_time_s"] - r["reward_time_s"] - generation
                if _num(r.get("step_time_s")) and _num(r.get("reward_time_s"))
                else None
            )
        else:
            value = r.get(key)
        if key == "completion_length" and not _num(value):
            value = r.get("completions/mean_length")
        if _num(value) and isinstance(r.get("step"), int):
            xs.append(r["step"])
            ys.append(_round(float(value)))
    return xs, ys


def _style(runs: list[Run], run_i: int, series_i: int) -> dict[str, Any]:
    if len(runs) > 1:
        return {"color": COLOURS[run_i % len(COLOURS)], "dash": DASHES[series_i % len(DASHES)]}
    return {"color": COLOURS[series_i % len(COLOURS)], "dash": "solid"}


def _name(runs: list[Run], run: Run, label: str) -> str:
    return f"{run.name}: {label}" if len(runs) > 1 else label


def _line_plot(runs: list[Run], pid: str, title: str, ytitle: str, keys: list[Series]) -> dict[str, Any] | None:
    traces = []
    for i, run in enumerate(runs):
        logs = run.logs
        for j, (key, label) in enumerate(keys):
            xs, ys = series(logs, key)
            if xs:
                traces.append(_trace(xs, ys, _name(runs, run, label), _style(runs, i, j)))
    return {"id": pid, "title": title, "ytitle": ytitle, "traces": traces} if traces else None


def _trace(xs: list, ys: list, name: str, style: dict[str, Any], **extra: Any) -> dict[str, Any]:
    mode = "lines+markers" if len(xs) <= 30 else "lines"
    return {
        "type": "scatter",
        "mode": mode,
        "x": xs,
        "y": ys,
        "name": name,
        "line": {"color": style["color"], "dash": style["dash"], "width": 2},
        "marker": {"color": style["color"], "size": 5},
        **extra,
    }


def _reward_plot(runs: list[Run]) -> dict[str, Any] | None:
    keys: list[Series] = [("reward", "total (weighted)")]
    names = sorted({k for run in runs for r in run.logs for k in r if k.startswith("rewards/") and k.endswith("/mean")})
    keys += [(k, reward_label(k)) for k in names]
    return _line_plot(runs, "reward", "Reward: total and each reward function (unweighted)", "reward", keys)


def _staleness_plot(runs: list[Run]) -> dict[str, Any] | None:
    """The staleness histogram of the trained samples per step (`async/staleness_<k>`, a share each), and its mean
    in policy versions."""
    ks = sorted({int(m.group(1)) for run in runs for r in run.logs for k in r if (m := STALENESS.fullmatch(k))})
    keys: list[Series] = [(f"async/staleness_{k}", f"{k} version{'s' * (k != 1)} old") for k in ks]
    keys.append(("async/staleness_mean", "mean (versions)"))
    title = "Asynchronous GRPO: staleness of the trained samples"
    return _line_plot(runs, "async_staleness", title, "share of samples · mean in versions", keys)


def _heldout_plot(runs: list[Run]) -> dict[str, Any] | None:
    traces = []
    for i, run in enumerate(runs):
        by_k: dict[str, list[tuple[int, float, float, float]]] = {}
        for record in run.evals:
            for k, entry in (record.get("pass_at_k") or {}).items():
                one = heldout_pass({"pass_at_k": {k: entry}})
                if one is not None and isinstance(record.get("step"), int):
                    by_k.setdefault(k, []).append((record["step"], *one[1:]))
        for j, (k, points) in enumerate(sorted(by_k.items(), key=lambda kv: int(kv[0]) if kv[0].isdecimal() else 0)):
            xs = [p[0] for p in points]
            ys = [_round(p[1]) for p in points]
            plus = [_round(p[3] - p[1]) for p in points]
            minus = [_round(p[1] - p[2]) for p in points]
            style = _style(runs, i, j)
            error = {"type": "data", "array": plus, "arrayminus": minus, "visible": True, "color": style["color"]}
            traces.append(_trace(xs, ys, _name(runs, run, f"pass@{k} (95% interval)"), style, error_y=error))
    if not traces:
        return None
    return {"id": "heldout", "title": "Held-out pass@k during training", "ytitle": "pass@k", "traces": traces}


def _verdict_plots(runs: list[Run]) -> list[dict[str, Any]]:
    """The sandbox's verdict mix per step, stacked, one plot per run (from the sandbox/<status> shares it logged,
    else from the generation log's counts)."""
    plots = []
    for run in runs:
        shares: dict[str, tuple[list[int], list[float]]] = {}
        logged = [r for r in run.logs if any(k.startswith("sandbox/") for k in r)]
        if logged:
            for status in VERDICTS:
                if status != "failed":
                    shares[status] = series(logged, f"sandbox/{status}")
            steps = [r["step"] for r in logged]
            rest = [
                1.0 - sum(float(r[f"sandbox/{s}"]) for s in VERDICTS if _num(r.get(f"sandbox/{s}"))) for r in logged
            ]
            shares["failed"] = (steps, [_round(max(0.0, v)) for v in rest])
        elif run.verdicts:
            steps = sorted(run.verdicts)
            for status in {s for c in run.verdicts.values() for s in c}:
                totals = [sum(run.verdicts[s].values()) for s in steps]
                values = [_round(run.verdicts[s][status] / t) for s, t in zip(steps, totals, strict=True)]
                shares[status] = (steps, values)
        traces = []
        for status, (xs, ys) in shares.items():
            if xs and any(ys):
                label, colour = VERDICTS.get(status, (status, "#17becf"))
                traces.append({"type": "bar", "x": xs, "y": ys, "name": label, "marker": {"color": colour}})
        order = list(VERDICTS)
        traces.sort(key=lambda t: next((order.index(s) for s in order if VERDICTS[s][0] == t["name"]), len(order)))
        if traces:
            title = "Sandbox verdicts per step" + (f": {run.name}" if len(runs) > 1 else "")
            plots.append(
                {"id": f"verdicts-{len(plots)}", "title": title, "ytitle": "share", "traces": traces, "stack": True}
            )
    return plots


def build_plots(runs: list[Run]) -> list[dict[str, Any]]:
    """Every plot some run has data for, in reading order."""
    makers: list[Callable[[], dict[str, Any] | None]] = [lambda: _reward_plot(runs), lambda: _heldout_plot(runs)]
    makers += [lambda spec=spec: _line_plot(runs, *spec) for spec in LINE_PLOTS]
    makers += [lambda: _staleness_plot(runs)]
    makers += [lambda spec=spec: _line_plot(runs, *spec) for spec in ASYNC_PLOTS]
    plots = [p for p in (make() for make in makers) if p is not None]
    plots[2:2] = _verdict_plots(runs)  # beside the pass rates
    for plot in plots:  # names from the runs' records and folders, shown as text
        plot["title"] = plotly_text(plot["title"])
        for trace in plot["traces"]:
            trace["name"] = plotly_text(trace["name"])
    return plots


def alarm_marks(runs: list[Run]) -> list[dict[str, Any]]:
    """Each alarm of each run, for the marks on the plots' step axes and the alarm list."""
    marks = []
    for i, run in enumerate(runs):
        for alarm in run.alarms:
            marks.append(
                {
                    "run": run.name,
                    "colour": COLOURS[i % len(COLOURS)] if len(runs) > 1 else "#d62728",
                    "step": alarm.step,
                    "rule": alarm.rule,
                    "message": alarm.message,
                    "hover": plotly_text(f"step {alarm.step} · {alarm.rule}: {alarm.message}"),
                    "recorded": alarm.rule in run.recorded_alarms,
                }
            )
    return marks
