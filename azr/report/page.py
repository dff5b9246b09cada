"""The report page: one self-contained HTML file (plotly.js, styles, script and data inline; nothing is fetched).

Owns the layout and the tables (run facts, per-tag pass rates, self-play scoreboard, Absolute-Zero, tools); the
plots come from `azr.report.figures`, the runs from `azr.report.runs`. Every text from a run is escaped; the data
is one JSON block the page's script reads. A window.onerror hook writes script errors into the page (`#errors`),
and the script writes the number of plots drawn and the resources the page loaded into it, so a headless browser's
DOM dump can tell whether it rendered.
"""

from __future__ import annotations

import html
import json
import statistics
from importlib import resources
from pathlib import Path
from typing import Any

from azr import __version__
from azr.report.figures import alarm_marks, build_plots
from azr.report.runs import Run


def plotly_js() -> str:
    """plotly.js as the `plotly` Python package ships it (minified, every trace type)."""
    try:
        return resources.files("plotly").joinpath("package_data", "plotly.min.js").read_text(encoding="utf-8")
    except ModuleNotFoundError:
        from azr.errors import NotAvailableError

        raise NotAvailableError("azr report needs plotly: pip install plotly") from None


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _fmt(value: Any, digits: int = 3) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "–" if value is None else _e(value)
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _table(headers: list[str], rows: list[list[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _duration(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)):
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
        ("rewards", _e(", ".join(f"{r.get('weight', 1)} × {r.get('name')}" for r in cfg.get("rewards") or []))),
        ("GRPO steps", f"{_fmt(last)} of {_fmt(max_steps)}"),
        ("phases finished", _e(", ".join(run.phases) or "none")),
        ("wall time", _duration(wall)),
        (
            "train pass rate before → after",
            f"{_fmt((before or {}).get('pass_rate'))} → {_fmt((after or {}).get('pass_rate'))}",
        ),
        ("versions", _e(", ".join(f"{k} {v}" for k, v in run.versions.items()) or "not recorded in the run folder")),
    ]
    table = _table(["", ""], [[f"<b>{_e(k)}</b>", v] for k, v in rows], "facts")
    recipe = f"<details><summary>recipe (resolved config.yaml)</summary><pre>{_e(run.config_text)}</pre></details>"
    return f'<div class="card"><h3>{_e(run.name)}</h3>{table}{recipe if run.config_text else ""}</div>'


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
        top = sorted(entries.items(), key=lambda kv: -int(kv[1].get("count", 0)))[:30]
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
    tables = "".join(_tags_table(r) + _selfplay(r) + _absolute_zero(r) + _tools(r) for r in runs)
    title = "azr report: " + ", ".join(r.name for r in runs)
    body = TEMPLATE.format(
        title=_e(title),
        generated=_e(generated),
        version=_e(__version__),
        facts="".join(_run_facts(r) for r in runs),
        alarms=_alarm_list(marks, several),
        no_plots="" if plots else '<p class="empty">No data to plot yet (no GRPO step logged).</p>',
        tables=tables or '<p class="empty">No per-tag, self-play, Absolute-Zero or tool data in these runs.</p>',
        generation_note=_generation_note(runs),
    )
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    return (
        body.replace("/*PLOTLY*/", plotly_js().replace("</script", "<\\/script"))
        .replace("/*DATA*/", payload)
        .replace("/*SCRIPT*/", SCRIPT)
    )


def write_page(runs: list[Run], out: Path, generated: str) -> Path:
    from azr.logs import atomic_write_text

    return atomic_write_text(out, render(runs, generated))


STYLE = """
:root { --fg: #1d2330; --muted: #5c6677; --line: #dde1e8; --bg: #f6f7f9; --accent: #1f77b4; --bad: #d62728; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       background: var(--bg); }
header { background: #1d2330; color: #fff; padding: 14px 24px; }
header h1 { margin: 0; font-size: 19px; font-weight: 600; }
header .sub { color: #b8c0cc; font-size: 12px; margin-top: 2px; }
main { max-width: 1480px; margin: 0 auto; padding: 12px 24px 40px; }
h2 { font-size: 16px; margin: 26px 0 10px; padding-bottom: 4px; border-bottom: 2px solid var(--line); }
h3 { font-size: 14px; margin: 14px 0 6px; } h4 { font-size: 13px; margin: 10px 0 4px; color: var(--muted); }
.cards { display: flex; flex-wrap: wrap; gap: 12px; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px; flex: 1 1 420px; }
.card h3 { margin-top: 2px; }
table { border-collapse: collapse; background: #fff; font-size: 13px; margin-bottom: 8px; }
th, td { border-bottom: 1px solid var(--line); padding: 3px 10px; text-align: left; vertical-align: top; }
th { background: #eef1f5; font-weight: 600; }
table.facts th { display: none; } table.facts td:first-child { color: var(--muted); white-space: nowrap; }
details pre, .gen pre { background: #f3f4f7; border: 1px solid var(--line); border-radius: 6px; padding: 8px;
       max-height: 340px; overflow: auto; font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace;
       white-space: pre-wrap; word-break: break-word; margin: 4px 0; }
summary { cursor: pointer; color: var(--accent); margin-top: 6px; }
.plots { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 12px; }
.plot { background: #fff; border: 1px solid var(--line); border-radius: 8px; height: 330px; }
ul.alarms { background: #fff3f2; border: 1px solid #f3c2bf; border-radius: 8px; padding: 8px 12px 8px 30px; }
ul.alarms li { margin: 3px 0; } .ok { color: #2b7a2b; } .empty { color: var(--muted); font-style: italic; }
.controls { display: flex; gap: 14px; align-items: center; flex-wrap: wrap; margin: 6px 0 10px; }
.controls select { font: inherit; padding: 2px 6px; }
.gen { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 8px 12px; margin-bottom: 10px; }
.gen .head { display: flex; gap: 12px; flex-wrap: wrap; align-items: center; font-size: 13px; }
.badge { border-radius: 10px; padding: 0 8px; color: #fff; font-size: 12px; background: #7f7f7f; }
.badge.passed { background: #2ca02c; } .badge.failed { background: #ff7f0e; } .badge.timeout { background: #9467bd; }
.badge.crashed { background: #d62728; } .badge.memory { background: #8c564b; } .badge.no_code { background: #bcbd22; }
.tests span { display: inline-block; width: 16px; text-align: center; border-radius: 3px; margin-right: 2px;
       color: #fff; font-size: 11px; }
.tests .p { background: #2ca02c; } .tests .f { background: #d62728; }
.muted { color: var(--muted); } #errors { display: none; }
.status { font-weight: 600; }
"""

TEMPLATE = (
    """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>"""
    + STYLE.replace("{", "{{").replace("}", "}}")
    + """</style>
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
<script>/*PLOTLY*/</script>
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
<script type="application/json" id="data">/*DATA*/</script>
<script>/*SCRIPT*/</script>
</body></html>
"""
)

SCRIPT = r"""
(function () {
  var data = JSON.parse(document.getElementById("data").textContent);
  var box = document.getElementById("plots");
  var drawn = 0;
  function marks(plot) {
    var shapes = [], notes = [];
    data.alarms.forEach(function (a) {
      shapes.push({type: "line", xref: "x", yref: "paper", x0: a.step, x1: a.step, y0: 0, y1: 1,
                   line: {color: a.colour, width: 1.5, dash: "dash"}});
      notes.push({x: a.step, xref: "x", yref: "paper", y: 1, yanchor: "bottom", text: "⚠", showarrow: false,
                  font: {color: a.colour, size: 13}, hovertext: "step " + a.step + " · " + a.rule + ": " + a.message});
    });
    return {shapes: shapes, annotations: notes};
  }
  data.plots.forEach(function (plot) {
    var div = document.createElement("div");
    div.className = "plot"; div.id = "plot-" + plot.id;
    box.appendChild(div);
    var m = marks(plot);
    var layout = {
      title: {text: plot.title, font: {size: 14}, x: 0.02, xanchor: "left"},
      margin: {l: 56, r: 14, t: 40, b: 40}, hovermode: "x unified", barmode: plot.stack ? "stack" : undefined,
      bargap: 0.05, xaxis: {title: {text: "step"}, zeroline: false}, yaxis: {title: {text: plot.ytitle}},
      legend: {orientation: "h", y: -0.22, font: {size: 11}}, shapes: m.shapes, annotations: m.annotations,
      paper_bgcolor: "#fff", plot_bgcolor: "#fff", font: {family: "system-ui, sans-serif", size: 12}
    };
    Plotly.newPlot(div, plot.traces, layout, {responsive: true, displaylogo: false});
    drawn += 1;
  });
  document.getElementById("rendered").textContent = String(drawn);

  var gens = data.generations, controls = document.getElementById("gen-controls");
  var list = document.getElementById("generations");
  function select(label, values) {
    var span = document.createElement("label"); span.textContent = label + " ";
    var s = document.createElement("select");
    ["all"].concat(values).forEach(function (v) { var o = document.createElement("option"); o.value = v;
      o.textContent = v; s.appendChild(o); });
    span.appendChild(s); controls.appendChild(span); s.addEventListener("change", show); return s;
  }
  function uniq(key) { var seen = {}; gens.forEach(function (g) { seen[g[key]] = 1; });
    return Object.keys(seen).sort(function (a, b) { return isNaN(a) ? a.localeCompare(b) : a - b; }); }
  function el(tag, cls, text) { var e = document.createElement(tag); if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text; return e; }
  if (!gens.length) { list.appendChild(el("p", "empty", "No generations to show.")); return; }
  var runSel = data.runs.length > 1 ? select("run", data.runs) : null;
  var stepSel = select("step", uniq("step")), verdictSel = select("verdict", uniq("verdict"));
  var count = el("span", "muted"); controls.appendChild(count);
  function show() {
    list.textContent = "";
    var shown = gens.filter(function (g) {
      return (!runSel || runSel.value === "all" || g.run === runSel.value) &&
        (stepSel.value === "all" || String(g.step) === stepSel.value) &&
        (verdictSel.value === "all" || g.verdict === verdictSel.value);
    });
    count.textContent = shown.length + " completions" + (shown.length > 60 ? " (first 60 shown; pick a step)" : "");
    shown.slice(0, 60).forEach(function (g) {
      var card = el("div", "gen"), head = el("div", "head");
      head.appendChild(el("b", "", "step " + g.step));
      if (data.runs.length > 1) head.appendChild(el("span", "muted", g.run));
      head.appendChild(el("span", "", g.task_id || ""));
      head.appendChild(el("span", "badge " + g.verdict, g.verdict));
      var rewards = Object.keys(g.rewards).map(function (k) { var v = g.rewards[k];
        return k.replace(/_reward$/, "") + " " + (v === null ? "–" : Number(v).toFixed(3)); }).join(" · ");
      head.appendChild(el("span", "muted", "reward: " + rewards));
      if (g.tests_total !== undefined) {
        head.appendChild(el("span", "", "tests " + g.tests_passed + "/" + g.tests_total));
      }
      if (g.per_test) { var t = el("span", "tests"); g.per_test.forEach(function (ok, i) {
        var s = el("span", ok ? "p" : "f", ok ? "✓" : "✗"); s.title = "test " + (i + 1); t.appendChild(s); });
        head.appendChild(t); }
      if (g.duration_s !== undefined) head.appendChild(el("span", "muted", Number(g.duration_s).toFixed(2) + " s"));
      if (g.source && g.source !== "data") head.appendChild(el("span", "muted", "source: " + g.source));
      card.appendChild(head);
      var prompt = el("details"); prompt.appendChild(el("summary", "", "prompt"));
      prompt.appendChild(el("pre", "", g.prompt)); card.appendChild(prompt);
      card.appendChild(el("pre", "", g.completion));
      if (g.reason) card.appendChild(el("div", "muted", "reason: " + g.reason));
      if (g.failures) card.appendChild(el("pre", "", g.failures.join("\n")));
      list.appendChild(card);
    });
  }
  show();
})();
window.addEventListener("load", function () {
  var names = performance.getEntriesByType("resource").map(function (e) { return e.name; });
  document.getElementById("resources").textContent = JSON.stringify(names);
});
"""
