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
                  font: {color: a.colour, size: 13}, hovertext: a.hover});
    });
    return {shapes: shapes, annotations: notes};
  }
  data.plots.forEach(function (plot) {
    var div = document.createElement("div");
    div.className = "plot"; div.id = "plot-" + plot.id;
    box.appendChild(div);
    var m = marks(plot), last = 0;
    plot.traces.forEach(function (t) { t.x.forEach(function (x) { if (x > last) last = x; }); });
    var layout = {
      title: {text: plot.title, font: {size: 14}, x: 0.02, xanchor: "left"},
      margin: {l: 60, r: 16, t: 40, b: 76}, hovermode: "x unified", barmode: plot.stack ? "stack" : undefined,
      bargap: 0.05, yaxis: {title: {text: plot.ytitle}, rangemode: "tozero"},
      xaxis: {title: {text: plot.xtitle || "step", standoff: 4}, zeroline: false, dtick: last <= 12 ? 1 : undefined},
      legend: {orientation: "h", y: -0.3, yanchor: "top", font: {size: 11}},
      shapes: m.shapes, annotations: m.annotations, showlegend: plot.traces.length > 1 || !!plot.stack,
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
