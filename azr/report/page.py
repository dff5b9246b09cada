"""The report page: one self-contained HTML file (plotly.js, styles, script and data inline; nothing is fetched).
Owns the layout and the tables; the plots are `azr.report.figures`', the runs `azr.report.runs`'. Every text from a
run is escaped, the data is valid JSON whatever the run logged, and the page writes script errors and what it drew
into its DOM for a headless check (docs/watching-a-run.md).
"""

from __future__ import annotations

import html
import json
import math
import os
import secrets
import statistics
from importlib import resources
from pathlib import Path
from typing import Any

from azr import __version__
from azr.alarms import is_alarm, is_step_log
from azr.report.figures import STALENESS, alarm_marks, build_plots
from azr.report.runs import Run


def plotly_js() -> str:
    """plotly.js as the `plotly` Python package ships it (minified, every trace type)."""
    try:
        return resources.files("plotly").joinpath("package_data", "plotly.min.js").read_text(encoding="utf-8")
    except ModuleNotFoundError:
        from azr.errors import NotAvailableError

        raise NotAvailableError("azr report needs plotly: pip install plotly") from None


def _asset(name: str) -> str:
    """The page's own script or style sheet, shipped beside this module."""
    return resources.files("azr.report").joinpath(name).read_text(encoding="utf-8")


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _fmt(value: object, digits: int = 3) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "–" if value is None else _e(value)
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _table(headers: list[str], rows: list[list[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _duration(seconds: object) -> str:
    if not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        return "–"
    seconds = int(seconds)
    return (
        f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"
    )


def _get(config: dict[str, Any], dotted: str) -> Any:
    value: Any = config
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _run_facts(run: Run) -> str:
    cfg, logs = run.config, run.logs
    rewards = (
        [r for r in cfg.get("rewards") or [] if isinstance(r, dict)] if isinstance(cfg.get("rewards"), list) else []
    )
    last = logs[-1]["step"] if logs else None
    max_steps = _get(cfg, "grpo.max_steps")
    times = [r["time"] for r in run.records if isinstance(r.get("time"), (int, float))]
    wall = run.summary.get("seconds") or (max(times) - min(times) if len(times) > 1 else None)
    before = next((r for r in run.records if r.get("phase") == "eval_before"), None)
    after = next((r for r in run.records if r.get("phase") == "eval_after"), None)
    rows = [
        ("folder", _e(run.path)),
        ("status", f'<span class="status">{_e(run.status())}</span>'),
        ("mode", _e(cfg.get("mode", "grpo"))),
        ("model", _e(_get(cfg, "model.name_or_path"))),
        ("adapter", _e(_get(cfg, "model.adapter.kind"))),
        ("vLLM", _e(_get(cfg, "vllm.mode") or "off")),
        ("rewards", _e(", ".join(f"{r.get('weight', 1)} × {r.get('name')}" for r in rewards))),
        ("GRPO steps", f"{_fmt(last)} of {_fmt(max_steps)}"),
        ("phases finished", _e(", ".join(run.phases) or "none")),
        ("wall time", _duration(wall)),
        (
            "train pass rate before → after",
            f"{_fmt((before or {}).get('pass_rate'))} → {_fmt((after or {}).get('pass_rate'))}",
        ),
        ("held-out evaluations", _heldout_cost(run.evals)),
        ("test strength (data.audit)", _audit_fact(run.audit)),
        ("reward hacking (data.hardened)", _hacking_fact(run)),
        ("versions", _e(", ".join(f"{k} {v}" for k, v in run.versions.items()) or "not recorded in the run folder")),
    ]
    if run.skipped:  # records the report could not read (see azr.report.runs): said, never silently dropped
        where = ", ".join(f"{name} {n}" for name, n in sorted(run.skipped.items()))
        n = sum(run.skipped.values())
        rows.append(("skipped", f'<span class="warn">{n} record{"s" * (n != 1)} skipped ({_e(where)})</span>'))
    table = _table(["", ""], [[f"<b>{_e(k)}</b>", v] for k, v in rows], "facts")
    recipe = f"<details><summary>recipe (resolved config.yaml)</summary><pre>{_e(run.config_text)}</pre></details>"
    return f'<div class="card"><h3>{_e(run.name)}</h3>{table}{recipe if run.config_text else ""}</div>'


def _audit_fact(audit: dict[str, Any] | None) -> str:
    if not isinstance(audit, dict):
        return "no audit given (data.audit)"
    return _e(
        f"kill rate {_fmt(audit.get('kill_rate'), 2)} over {audit.get('tasks_with_record')} of {audit.get('tasks')} "
        f"training tasks; {audit.get('dropped')} dropped by data.min_kill_rate; {audit.get('probes_passed')} with a "
        f"probe passed ({audit.get('file')})"
    )


def _hacking_fact(run: Run) -> str:
    """How many completions passed a weak task's tests and failed its hardened cases, of how many answers checked."""
    alarms = [r for r in run.records if is_alarm(r) and r.get("rule") == "reward_hacking"]
    checked = sum(r.get("hardened/checked") or 0 for r in run.records if is_step_log(r))
    if not alarms and not any("hardened/checked" in r for r in run.records):
        return "not checked (no data.hardened)"
    tasks = len({str(r.get("task_id")) for r in alarms})
    first = f", first at step {alarms[0]['step']}" if alarms else ""
    text = f"{len(alarms)} alarms on {tasks} tasks{first}; {checked} answers checked on hardened cases"
    return f'<span class="warn">{_e(text)}</span>' if alarms else _e(text)


def _heldout_cost(evals: list[dict[str, Any]]) -> str:
    """How many held-out evaluations ran, the last one's pass@k, and their share of the GRPO phase's wall time."""
    if not evals:
        return "none (eval.every_steps: 0)"
    last = evals[-1]
    rates = ", ".join(
        f"pass@{k} {v['value']:.3f}"
        for k, v in (last.get("pass_at_k") or {}).items()
        if isinstance(v, dict) and isinstance(v.get("value"), (int, float))
    )
    seconds = last.get("eval_wall_s")
    share = last.get("eval_share")
    cost = f"; {_duration(seconds)}" if isinstance(seconds, (int, float)) else ""
    cost += f", {share:.0%} of GRPO's wall time" if isinstance(share, (int, float)) else ""
    return _e(f"{len(evals)}, last at step {last.get('step')}: {rates or '–'}{cost}")


def _tags_table(run: Run) -> str:
    evals = [e for e in run.evals if isinstance(e.get("by_tag"), dict) and e["by_tag"]]
    if not evals:
        return ""
    first, last = evals[0], evals[-1]
    keys = sorted(
        {
            k
            for e in (first, last)
            for t in e["by_tag"].values()
            if isinstance(t, dict)
            for k in t
            if k.startswith("pass@")
        }
    )
    rows = []
    for tag in sorted(set(first["by_tag"]) | set(last["by_tag"])):
        a, b = first["by_tag"].get(tag) or {}, last["by_tag"].get(tag) or {}
        row = [_e(tag), _fmt(b.get("problems", a.get("problems")))]
        row += [f"{_fmt(a.get(k))} → {_fmt(b.get(k))}" for k in keys]
        rows.append(row)
    headers = ["tag", "tasks", *[f"{k} (step {first['step']} → {last['step']})" for k in keys]]
    return f"<h3>{_e(run.name)}: held-out pass rate per tag</h3>" + _table(headers, rows)


def _interval(rate: dict[str, Any]) -> str:
    if rate.get("rate") is None:
        return "–"
    low, high = rate.get("low", 0.0), rate.get("high", 1.0)
    return f"{rate['rate']:.3f} [{low:.3f}, {high:.3f}] ({rate.get('wins')}/{rate.get('decisive')} decisive)"


def _selfplay(run: Run) -> str:
    board = run.scoreboard
    if not board:
        return ""
    win = board.get("win_rate") or {}
    rows = [
        ["win rate per problem (95% Wilson)", _interval(win.get("problem") or {})],
        ["win rate per completion (95% Wilson)", _interval(win.get("completion") or {})],
        ["problems", _e(", ".join(f"{k} {v}" for k, v in (board.get("problems") or {}).items()))],
        ["completions", _e(", ".join(f"{k} {v}" for k, v in (board.get("completions") or {}).items()))],
        ["hinted", _e(", ".join(f"{k} {v}" for k, v in (board.get("hinted") or {}).items()))],
        ["frontier tasks", _fmt(board.get("frontier_tasks"))],
    ]
    out = f"<h3>{_e(run.name)}: self-play scoreboard (step {_fmt(board.get('last_step'))})</h3>" + _table(
        ["", ""], rows
    )
    entries = (run.frontier or {}).get("entries") or {}
    if entries:
        top = sorted(entries.items(), key=lambda kv: -(kv[1].get("count") or 0))[:30]
        rows = [
            [
                _e(t),
                _fmt(e.get("count")),
                _fmt(e.get("first_step")),
                _fmt(e.get("last_step")),
                _fmt(e.get("last_solved_step")),
            ]
            for t, e in top
        ]
        heading = f"<h4>frontier: the {len(top)} most missed of {len(entries)} tasks</h4>"
        out += heading + _table(["task", "missed", "first step", "last step", "last solved"], rows)
    return out


def _absolute_zero(run: Run) -> str:
    by_type: dict[str, dict[str, list[float]]] = {}
    for r in run.logs:
        for key, value in r.items():
            parts = key.split("/")
            if parts[0] == "absolute_zero" and len(parts) >= 3 and isinstance(value, (int, float)):
                by_type.setdefault(parts[1], {}).setdefault("/".join(parts[2:]), []).append(float(value))
    out = ""
    if by_type:
        names = sorted({n for m in by_type.values() for n in m})
        rows = [
            [_e(kind), *[_fmt(statistics.fmean(m[n][-10:])) if n in m else "–" for n in names]]
            for kind, m in sorted(by_type.items())
        ]
        out += f"<h3>{_e(run.name)}: Absolute-Zero per task type (mean of the last 10 logs)</h3>"
        out += _table(["type", *names], rows)
    if run.az_reasons:
        total = sum(run.az_reasons.values())
        rows = [[_e(reason), str(n), f"{n / total:.1%}"] for reason, n in run.az_reasons.most_common()]
        out += f"<h4>proposal validity (all {total} logged proposals)</h4>" + _table(["reason", "count", "share"], rows)
    return out


def _finite_values(logs: list[dict[str, Any]], key: str) -> list[float]:
    return [
        float(r[key])
        for r in logs
        if isinstance(r.get(key), (int, float)) and not isinstance(r[key], bool) and math.isfinite(r[key])
    ]


def _async(run: Run) -> str:
    """Asynchronous GRPO over the whole run (`async/*`, and TRL's importance ratio where the run was asynchronous):
    the staleness of what was trained, what was dropped, how much generation overlapped training, and the
    correction's ratios. Nothing for a run without `async/*` records."""
    logs = [r for r in run.logs if any(k.startswith("async/") for k in r)]
    if not logs:
        return ""
    ks = sorted({int(m.group(1)) for r in logs for k in r if (m := STALENESS.fullmatch(k))})
    shares = {k: _finite_values(logs, f"async/staleness_{k}") for k in ks}
    histogram = ", ".join(f"{k}: {statistics.fmean(v):.3f}" for k, v in shares.items() if v)
    seen = max((k for k, v in shares.items() if any(x > 0 for x in v)), default=None)
    mean = _finite_values(logs, "async/staleness_mean")
    totals = _finite_values(logs, "async/dropped_samples_total")
    dropped = totals[-1] if totals else sum(_finite_values(logs, "async/dropped_samples"))
    generate, wait = (sum(_finite_values(logs, f"async/{k}_seconds")) for k in ("generate", "wait"))
    ratio = {k: _finite_values(logs, f"sampling/importance_sampling_ratio/{k}") for k in ("mean", "min", "max")}
    outside = _finite_values(logs, "async/importance_outside_band_share")

    def mean_of(values: list[float]) -> str:
        return _fmt(statistics.fmean(values)) if values else "–"

    rows = [
        ["bound (sampling.max_staleness)", _fmt(_get(run.config, "sampling.max_staleness"))],
        ["steps logged", str(len(logs))],
        ["trained samples by versions old (mean share per step)", _e(histogram or "–")],
        ["staleness: mean per step, largest seen", f"{mean_of(mean)}, {_fmt(seen)}"],
        ["samples dropped as too stale", _fmt(int(dropped))],
        [
            "sampling seconds, of them waited for (overlap)",
            f"{generate:.1f}, {wait:.1f}" + (f" ({max(0.0, 1 - wait / generate):.1%})" if generate > 0 else ""),
        ],
        [
            "importance ratio: mean, min, max",
            f"{mean_of(ratio['mean'])}, {_fmt(min(ratio['min'], default=None))}, "
            f"{_fmt(max(ratio['max'], default=None))}",
        ],
        ["ratios clipped or masked (mean share per step)", mean_of(outside)],
    ]
    return f"<h3>{_e(run.name)}: asynchronous GRPO</h3>" + _table(["", ""], rows)


def _tools(run: Run) -> str:
    if not run.tool_calls:
        return ""
    rows = [[_e(name), str(n), str(run.tool_errors[name])] for name, n in run.tool_calls.most_common()]
    return f"<h3>{_e(run.name)}: tool calls in the generation log</h3>" + _table(["tool", "calls", "errors"], rows)


def _alarm_list(marks: list[dict[str, Any]], several: bool) -> str:
    if not marks:
        return '<p class="ok">No reward-hacking alarm.</p>'
    items = "".join(
        f"<li><b>step {m['step']}</b> · <code>{_e(m['rule'])}</code>{' · ' + _e(m['run']) if several else ''}: "
        f"{_e(m['message'])}{'' if m['recorded'] else ' <i>(found by the report; the run did not record it)</i>'}</li>"
        for m in marks
    )
    return f'<ul class="alarms">{items}</ul>'


def _generation_note(runs: list[Run]) -> str:
    notes = []
    for run in runs:
        if run.generation_files:
            notes.append(
                f"{_e(run.name)}: {len(run.generations)} of {run.generations_total} completions shown; all in "
                f"<code>{_e(run.path / 'generations')}/</code> ({len(run.generation_files)} files)"
            )
        else:
            notes.append(f"{_e(run.name)}: no generation log (logging.generations off, or no GRPO step yet)")
    return "<br>".join(notes)


def render(runs: list[Run], generated: str) -> str:
    """The whole page for `runs`."""
    several = len(runs) > 1
    plots, marks = build_plots(runs), alarm_marks(runs)
    generations = [{"run": run.name, **g} for run in runs for g in run.generations]
    data = {"plots": plots, "alarms": marks, "generations": generations, "runs": [r.name for r in runs]}
    tables = "".join(_tags_table(r) + _selfplay(r) + _absolute_zero(r) + _async(r) + _tools(r) for r in runs)
    title = "azr report: " + ", ".join(r.name for r in runs)
    return _filled(
        TEMPLATE,
        data,
        title=_e(title),
        generated=_e(generated),
        version=_e(__version__),
        facts="".join(_run_facts(r) for r in runs),
        alarms=_alarm_list(marks, several),
        no_plots="" if plots else '<p class="empty">No data to plot yet (no GRPO step logged).</p>',
        tables=tables
        or '<p class="empty">No per-tag, self-play, Absolute-Zero, asynchronous or tool data in these runs.</p>',
        generation_note=_generation_note(runs),
    )


def _filled(template: str, data: dict[str, object], inlined: dict[str, str] | None = None, **fields: str) -> str:
    """`template` with `fields` (escaped by the caller) and, last, the inlined parts (plotly, the data as JSON with
    NaN made null, the script, the style, and `inlined`), put at markers no run's text can hold (a fresh nonce), so
    none of them is read as markup or as a format field."""
    nonce = secrets.token_hex(8)
    parts = {
        "plotly": plotly_js().replace("</script", "<\\/script"),
        "data": json.dumps(_finite(data), ensure_ascii=False, separators=(",", ":"), allow_nan=False).replace(
            "</", "<\\/"
        ),
        "script": _asset("page.js"),
        "style": _asset("page.css"),
        **(inlined or {}),
    }
    page = template.format(**fields, **{name: f"@@{nonce}:{name}@@" for name in parts})
    for name, text in parts.items():
        page = page.replace(f"@@{nonce}:{name}@@", text)
    return page


def _finite(value: object) -> Any:
    """`value` with every NaN and infinity replaced by None: JSON has no such numbers, and JSON.parse refuses the
    `NaN` json.dumps would write (a blank page)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def standalone_page(title: str, body: str, plots: list[dict[str, Any]], generated: str) -> str:
    """A page in the report's look for another command (`azr data audit`): `body` is HTML its caller built with every
    text escaped (`escape`), `plots` are plot dicts as `azr.report.figures` makes them (`xtitle` names the x axis)."""
    data = {"plots": plots, "alarms": [], "generations": [], "runs": []}
    return _filled(STANDALONE, data, {"body": body}, title=_e(title), generated=_e(generated), version=_e(__version__))


def escape(value: object) -> str:
    """Text for the page, escaped."""
    return _e(value)


def write_html(out: Path, page: str) -> Path:
    """Write a page atomically, readable as any file the user writes."""
    from azr.logs import atomic_write_text

    page_path = atomic_write_text(out, page)
    umask = os.umask(0)
    os.umask(umask)
    page_path.chmod(0o666 & ~umask)
    return page_path


def write_page(runs: list[Run], out: Path, generated: str) -> Path:
    from azr.logs import atomic_write_text

    page = atomic_write_text(out, render(runs, generated))
    umask = os.umask(0)
    os.umask(umask)
    page.chmod(0o666 & ~umask)  # readable as any file the user writes (the temp file it was renamed from is 0600)
    return page


TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{style}</style>
<script>
window.azrErrors = [];
window.onerror = function (message, source, line, column, error) {{
  window.azrErrors.push(String(message) + " (" + line + ":" + column + ")");
  var box = document.getElementById("errors");
  if (box) box.textContent = JSON.stringify(window.azrErrors);
}};
window.addEventListener("unhandledrejection", function (event) {{
  window.onerror("unhandled: " + event.reason, "", 0, 0);
}});
</script>
<script>{plotly}</script>
</head><body>
<header><h1>{title}</h1><div class="sub">written {generated} by azr {version} · zoom: drag on a plot; double-click
to reset · hover for values · click a legend entry to hide it</div></header>
<main>
<h2>Runs</h2><div class="cards">{facts}</div>
<h2>Alarms</h2>{alarms}
<h2>Over steps</h2>{no_plots}<div class="plots" id="plots"></div>
<h2>Tables</h2>{tables}
<h2>Generations</h2><p class="muted">{generation_note}</p>
<div class="controls" id="gen-controls"></div><div id="generations"></div>
<pre id="errors"></pre><pre id="rendered" hidden></pre><pre id="resources" hidden></pre>
</main>
<script type="application/json" id="data">{data}</script>
<script>{script}</script>
</body></html>
"""

STANDALONE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{style}</style>
<script>{plotly}</script>
</head><body>
<header><h1>{title}</h1><div class="sub">written {generated} by azr {version}</div></header>
<main>
<div class="plots" id="plots"></div>
{body}
<div hidden><div id="gen-controls"></div><div id="generations"></div></div>
<pre id="errors"></pre><pre id="rendered" hidden></pre><pre id="resources" hidden></pre>
</main>
<script type="application/json" id="data">{data}</script>
<script>{script}</script>
</body></html>
"""
