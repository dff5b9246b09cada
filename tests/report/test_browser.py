"""`azr report`'s page in a real browser: Debian's chromium-headless-shell (installed by `make test`) loads it from a
file, runs its scripts, and the DOM after them says every plot drew (plotly's `.main-svg`), no script error was
caught by the page's window.onerror hook, and nothing was fetched; a screenshot is saved beside it. A page of hostile
records is served from a loopback server that records every request its markup could make: only the page is asked
for."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import lxml.html
import pytest
from hostile_run import GOOD_STEPS, REWARD, SKIPPED, write_hostile_run

from azr.alarms import Alarm
from azr.logs import JsonlWriter
from azr.report import run_report

REPO = Path(__file__).resolve().parents[2]
FLAGS = [
    "--headless",
    "--no-sandbox",  # the test may run as root, where Chromium's own sandbox refuses to start
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
]


def _chromium() -> str:
    found = shutil.which("chromium-headless-shell") or shutil.which("chromium")
    if found is None:  # `make test` installs it (apt-get install chromium-headless-shell); a hand-run pytest may not
        pytest.skip("chromium-headless-shell is not installed: apt-get install chromium-headless-shell (make test)")
    return found


def render(page: Path | str, profile: Path, screenshot: Path | None = None, width: int = 1400, height: int = 2200):
    """The page's DOM after its scripts ran (and a screenshot of its top when asked), from a fresh profile; `page` is
    a file or a URL."""
    common = [_chromium(), *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=30000"]
    url = page if isinstance(page, str) else page.resolve().as_uri()
    done = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    if screenshot is not None:
        shot = [*common, f"--window-size={width},{height}", f"--screenshot={screenshot}", url]
        subprocess.run(shot, capture_output=True, text=True, timeout=300, check=True)
        assert screenshot.stat().st_size > 10_000
    return lxml.html.fromstring(done.stdout)


def assert_rendered(dom, plots: int) -> None:
    """Every plot drew, the page caught no script error and fetched nothing."""
    assert dom.get_element_by_id("errors").text_content() == ""
    assert json.loads(dom.get_element_by_id("resources").text_content()) == []
    divs = dom.cssselect("div.plot")
    assert dom.get_element_by_id("rendered").text_content() == str(plots) == str(len(divs))
    blank = [d.get("id") for d in divs if not d.cssselect(".main-svg")]
    assert not blank, blank


def test_a_synthetic_run_renders_every_plot_table_and_generation(tmp_path):
    spec = importlib.util.spec_from_file_location("report_size", REPO / "benchmarks" / "report_size.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    run = bench.write_synthetic_run(tmp_path / "run", steps=60)
    with JsonlWriter(run / "metrics.jsonl") as metrics:  # an alarm the run recorded: a mark on every plot
        metrics.write(Alarm(30, "length_at_cap", "90% of the completions were cut").record())
    page = run_report([run])
    data = json.loads(lxml.html.parse(str(page)).getroot().get_element_by_id("data").text_content())
    dom = render(page, tmp_path / "profile")
    assert_rendered(dom, len(data["plots"]))
    assert len(dom.cssselect("#generations .gen")) == min(60, len(data["generations"]))
    assert dom.cssselect("#gen-controls select")  # the step and verdict pickers were built
    assert "step 30" in dom.cssselect("ul.alarms li")[0].text_content()
    assert len(dom.cssselect("#plot-reward .annotation")) == 1  # the alarm's mark, drawn on the plot


@pytest.fixture(scope="module")
def real_run(tiny_model_dir, tmp_path_factory) -> Path:
    """Ten GRPO steps of the untrained tiny model on CPU, graded in the bwrap sandbox: its completions run to the
    16-token cap, which trips the `length_at_cap` alarm once the rule's window (10 logs) is full."""
    from recipes import tiny_recipe, write_recipe

    from azr.config import load_config
    from azr.training.run import run_train

    root = tmp_path_factory.mktemp("report-run")
    recipe = tiny_recipe(
        tiny_model_dir,
        root / "tiny",
        model={"adapter": {"kind": "none"}},
        grpo={"max_steps": 10, "save_steps": 10},
        rewards=[{"name": "tests", "weight": 1.0}, {"name": "format", "weight": 0.1}],
        logging={"pass_rate_tasks": 2, "pass_rate_samples": 2},
    )
    assert run_train(load_config(write_recipe(root / "recipe.yaml", recipe))) == 0
    return root / "tiny"


@pytest.mark.slow
def test_the_report_of_a_real_run_draws_in_chromium(real_run, tmp_path):
    from azr.report import read_run

    assert not read_run(real_run).skipped  # every record a real run writes is one the report reads
    page = run_report([real_run])
    shot = tmp_path / "report.png"
    dom = render(page, tmp_path / "profile", screenshot=shot)
    ids = [d.get("id") for d in dom.cssselect("div.plot")]
    assert {"plot-reward", "plot-pass_rate", "plot-verdicts-0", "plot-length", "plot-time"} <= set(ids)
    assert_rendered(dom, len(ids))
    assert dom.cssselect("#generations .gen")
    assert "finished" in dom.cssselect(".status")[0].text_content()
    alarms = [li.text_content() for li in dom.cssselect("ul.alarms li")]  # found by the report: the run has no watch
    assert len(alarms) == 1 and "length_at_cap" in alarms[0] and "step 10" in alarms[0]
    assert len(dom.cssselect("#plot-reward .annotation")) == 1
    shutil.copy(shot, real_run / "report.png")  # kept beside the run for a person to look at


class _Recorder(BaseHTTPRequestHandler):
    """Serves the page at /report.html and 404 to anything else; every path asked for is recorded."""

    page = b""
    asked: ClassVar[list[str]] = []

    def do_GET(self):
        self.asked.append(self.path)
        found = self.path == "/report.html"
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.page) if found else 0))
        self.end_headers()
        if found:
            self.wfile.write(self.page)

    def log_message(self, *args):
        pass


def test_a_page_of_hostile_records_fetches_nothing_and_raises_nothing(tmp_path):
    """Markup in reward names, statuses, tags, rules and task ids, NaN and Infinity, records of the wrong shape: the
    page draws every plot, shows each name as the text it is, counts what it skipped, and asks for nothing but
    itself (the markup points at the server that served it)."""
    handler = type("Recorder", (_Recorder,), {"asked": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    page = run_report([write_hostile_run(tmp_path / "run", url=base)])
    handler.page = page.read_bytes()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        dom = render(f"{base}/report.html", tmp_path / "profile")
    finally:
        server.shutdown()
        server.server_close()
    assert handler.asked == ["/report.html"]
    data = json.loads(lxml.html.fromstring(handler.page).get_element_by_id("data").text_content())
    assert_rendered(dom, len(data["plots"]))
    ids = {p["id"] for p in data["plots"]}
    assert {"reward", "heldout", "verdicts-0", "clipped"} <= ids and "length" not in ids  # its values are all NaN
    legends = " ".join(t.text_content() for t in dom.cssselect(".legendtext"))
    assert REWARD in legends and '<span style="background:url(' + base in legends  # names drawn as text
    assert len(dom.cssselect("#generations .gen")) == 3 * GOOD_STEPS
    assert f"{SKIPPED} records skipped" in dom.cssselect(".card")[0].text_content()
