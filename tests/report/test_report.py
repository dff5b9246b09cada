"""`azr report` on run folders written the way `azr train` writes them: a 1,000-step run within the size budget,
self-contained, unfinished and torn logs read, absent data left out, several runs overlaid, and the CLI's errors;
and on hostile records: each one of the wrong shape skipped and counted, NaN and Infinity written as valid JSON,
every name from a record escaped for plotly; and an asynchronous run's figures (staleness, drops, overlap, importance
ratio) plotted and tabled."""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest
from hostile_run import GOOD_STEPS, SHAPES, SKIPPED, write_hostile_run

from azr.report import read_run, run_report
from azr.report.figures import build_plots

REPO = Path(__file__).resolve().parents[2]


def _benchmark():
    spec = importlib.util.spec_from_file_location("report_size", REPO / "benchmarks" / "report_size.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    return _benchmark().write_synthetic_run


def _data(page: Path) -> dict:
    text = page.read_text()
    return json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', text, re.S).group(1))


def test_a_thousand_step_run_fits_the_budget_and_fetches_nothing(tmp_path, synthetic):
    run = synthetic(tmp_path / "big", steps=1000)
    assert not read_run(run).skipped  # records as a run writes them: every one read
    page = run_report([run])
    assert page == run / "report.html"
    size = page.stat().st_size
    assert size < 8 * 2**20, f"{size / 2**20:.2f} MB"
    text = page.read_text()
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", text)  # scripts, styles and data inline
    assert text.count("<script") == 4  # the error hook, plotly.js, the data, the page's script
    data = _data(page)
    ids = [p["id"] for p in data["plots"]]
    for wanted in ("reward", "heldout", "verdicts-0", "pass_rate", "dynamic", "length", "clipped", "kl", "entropy"):
        assert wanted in ids
    assert {"grad_norm", "learning_rate", "throughput", "time"} <= set(ids)
    reward = next(p for p in data["plots"] if p["id"] == "reward")
    assert [t["name"] for t in reward["traces"]] == ["total (weighted)", "format_reward", "tests_reward"]
    assert len(reward["traces"][0]["x"]) == 1000
    heldout = next(p for p in data["plots"] if p["id"] == "heldout")
    assert [t["name"] for t in heldout["traces"]] == ["pass@1 (95% interval)", "pass@4 (95% interval)"]
    assert heldout["traces"][0]["error_y"]["array"][0] == pytest.approx(0.05)
    # the generations shown are a sample, spread over the run, every verdict of a step before a second of any
    steps = sorted({g["step"] for g in data["generations"]})
    assert len(steps) == 40 and steps[0] == 1 and steps[-1] == 1000
    assert len(data["generations"]) == 40 * 6
    assert f"{len(data['generations'])} of 16000 completions shown" in text
    assert [a["rule"] for a in data["alarms"]] == ["reward_up_heldout_down"]  # the synthetic held-out curve falls
    assert "found by the report" in text
    assert "21, last at step 1000: pass@1 " in text and "25% of GRPO&#x27;s wall time" in text  # the held-out cost


def test_an_unfinished_run_with_a_torn_last_line(tmp_path, synthetic):
    run = synthetic(tmp_path / "cut", steps=30, finished=False)
    metrics = run / "metrics.jsonl"
    metrics.write_bytes(metrics.read_bytes() + b'{"phase": "grpo", "step": 31, "rew')  # SIGKILL mid-write
    generations = next((run / "generations").iterdir())
    generations.write_bytes(generations.read_bytes() + b'{"step": 31, "comp')
    read = read_run(run)
    assert read.logs[-1]["step"] == 30 and read.generations_total == 30 * 16
    assert read.status().startswith("unfinished")
    page = run_report([run], tmp_path / "out" / "r.html")
    assert page == tmp_path / "out" / "r.html"
    assert "unfinished" in page.read_text()


def test_plots_without_data_are_left_out(tmp_path):
    run = tmp_path / "sft-only"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"phase": "sft", "step": 10, "loss": 1.0}) + "\n")
    assert build_plots([read_run(run)]) == []
    text = run_report([run]).read_text()
    assert "No data to plot yet" in text and "No generations to show" in text
    empty = tmp_path / "empty"
    empty.mkdir()  # a run that wrote nothing yet
    assert read_run(empty).status() == "not started"
    assert run_report([empty]).exists()


def _asynchronous_run(folder: Path, steps: int = 6) -> Path:
    """A run folder as `sampling.max_staleness: 2` writes it: each GRPO record with the pipeline's `async/*` figures
    and TRL's importance ratio; one sample dropped at step 4."""
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text("sampling: {max_staleness: 2}\nvllm: {mode: adapter}\n")
    records = []
    for step in range(1, steps + 1):
        old = 0.0 if step == 1 else 0.25  # the first batch is sampled by the starting weights
        records.append(
            {
                "phase": "grpo",
                "step": step,
                "time": 1_790_000_000.0 + step,
                "reward": 0.5,
                "async/staleness_0": 1.0 - old,
                "async/staleness_1": old,
                "async/staleness_2": 0.0,
                "async/staleness_mean": old,
                "async/dropped_samples": 16 if step == 4 else 0,
                "async/dropped_samples_total": 16 if step >= 4 else 0,
                "async/generate_seconds": 3.0,
                "async/wait_seconds": 1.0,
                "async/overlap_share": 2 / 3,
                "async/importance_outside_band_share": 0.01,
                "sampling/importance_sampling_ratio/mean": 1.0,
                "sampling/importance_sampling_ratio/min": 0.5 + step / 100,
                "sampling/importance_sampling_ratio/max": 2.0 - step / 100,
            }
        )
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def test_an_asynchronous_run_shows_staleness_drops_overlap_and_importance_ratio(tmp_path, synthetic):
    run = _asynchronous_run(tmp_path / "async")
    assert not read_run(run).skipped
    page = run_report([run])
    plots = {p["id"]: p for p in _data(page)["plots"]}
    staleness = plots["async_staleness"]
    assert [t["name"] for t in staleness["traces"]] == [
        "0 versions old",
        "1 version old",
        "2 versions old",
        "mean (versions)",
    ]
    assert staleness["traces"][1]["x"] == [1, 2, 3, 4, 5, 6] and staleness["traces"][1]["y"] == [0.0] + [0.25] * 5
    assert [t["name"] for t in plots["async_seconds"]["traces"]] == [
        "sampling (producer)",
        "trainer waited for samples",
    ]
    assert plots["async_shares"]["traces"][0]["y"] == [0.66667] * 6
    assert plots["async_dropped"]["traces"][0]["y"] == [0, 0, 0, 16, 0, 0]
    importance = plots["importance"]
    assert [t["name"] for t in importance["traces"]] == ["mean", "min", "max"]
    assert importance["traces"][1]["y"][0] == 0.51 and importance["traces"][2]["y"][-1] == 1.94
    text = page.read_text()
    assert "async: asynchronous GRPO</h3>" in text
    assert "<td>0: 0.792, 1: 0.208, 2: 0.000</td>" in text  # the histogram's mean share per step
    assert "<td>0.208, 1</td>" in text  # mean staleness; the largest seen
    assert "<td>16</td>" in text and "<td>18.0, 6.0 (66.7%)</td>" in text  # dropped; seconds and overlap
    assert "<td>1.000, 0.510, 1.990</td>" in text  # the importance ratio over the run
    # a synchronous run has none of it
    sync = run_report([synthetic(tmp_path / "sync", steps=3)])
    assert not {"async_staleness", "async_seconds", "async_shares", "async_dropped", "importance"} & {
        p["id"] for p in _data(sync)["plots"]
    }
    assert "asynchronous GRPO</h3>" not in sync.read_text()


def test_several_runs_are_overlaid_one_colour_per_run(tmp_path, synthetic):
    a = synthetic(tmp_path / "a" / "run", steps=20)
    b = synthetic(tmp_path / "b" / "run", steps=25, seed=1)
    data = _data(run_report([a, b], tmp_path / "both.html"))
    reward = next(p for p in data["plots"] if p["id"] == "reward")
    colours = {t["name"].split(":")[0]: set() for t in reward["traces"]}
    for t in reward["traces"]:
        colours[t["name"].split(":")[0]].add(t["line"]["color"])
    assert set(colours) == {"a/run", "b/run"}  # two folders of the same name: named by their parents too
    assert all(len(c) == 1 for c in colours.values()) and colours["a/run"] != colours["b/run"]
    assert {g["run"] for g in data["generations"]} == {"a/run", "b/run"}
    assert [p["id"] for p in data["plots"]].count("verdicts-1") == 1  # the verdict mix: one plot per run


def test_text_from_a_run_is_escaped(tmp_path, synthetic):
    run = synthetic(tmp_path / "x", steps=3)
    with open(run / "generations" / "generations-00000.jsonl", "a") as fh:
        fh.write(json.dumps({"step": 3, "prompt": "</script><script>alert(1)</script>", "completion": "<b>x</b>"}))
        fh.write("\n")
    (run / "config.yaml").write_text("model: {name_or_path: '<img src=x onerror=alert(1)>'}\n")
    text = run_report([run]).read_text()
    assert "<img src=x" not in text and "</script><script>alert" not in text


def test_cli(cli, tmp_path, synthetic):
    run = synthetic(tmp_path / "run", steps=3)
    code, out, err = cli("report", str(run), "--out", str(tmp_path / "r.html"))
    assert code == 0 and out.strip() == str(tmp_path / "r.html") and not err
    code, out, err = cli("report", str(run), str(tmp_path / "missing"))
    assert code == 2 and err.strip().splitlines() == [
        f"azr: error: RUN_DIR: {tmp_path / 'missing'}: no such run folder"
    ]
    code, _, err = cli("report")
    assert code == 2 and "RUN_DIR" in err


def _one_more(run: Path, name: str, record: dict) -> None:
    path = run / "metrics.jsonl" if name == "metrics.jsonl" else run / "generations" / "generations-00000.jsonl"
    with open(path, "a") as fh:
        fh.write(json.dumps(record) + "\n")


@pytest.mark.parametrize(
    ("name", "record"), [(name, r) for name, records in SHAPES.items() for r in records], ids=lambda v: str(v)[:40]
)
def test_a_record_of_the_wrong_shape_is_skipped_and_counted(tmp_path, synthetic, name, record):
    run = synthetic(tmp_path / "run", steps=3)
    _one_more(run, name, record)
    read = read_run(run)
    assert read.skipped == {name: 1}
    assert [r["step"] for r in read.logs] == [1, 2, 3]
    text = run_report([run]).read_text()
    assert f"1 record skipped ({name} 1)" in text


@pytest.mark.parametrize("line", ["[" * 100_000 + "]" * 100_000, "9" * 5000, '{"step": 1, "x": ' + "1" * 5000 + "}"])
def test_a_line_too_deep_or_too_long_a_number_is_skipped_and_counted(tmp_path, synthetic, line):
    run = synthetic(tmp_path / "run", steps=3)
    with open(run / "metrics.jsonl", "a") as fh:
        fh.write(line + "\n")
    assert read_run(run).skipped == {"metrics.jsonl": 1}


def test_files_of_the_wrong_shape_are_skipped_and_counted(tmp_path, synthetic):
    run = synthetic(tmp_path / "run", steps=3)
    (run / "state.json").write_text('{"phases": ["grpo"]}')
    (run / "scoreboard.json").write_text('{"win_rate": {"problem": {"rate": "most"}}}')
    (run / "frontier.json").write_text('{"entries": {"t": {"count": null, "last_step": [1]}}}')
    (run / "summary.json").write_text('{"seconds": "long"}')
    (run / "config.yaml").write_text("rewards: oops\nmodel: " + "[" * 5000 + "\n")
    read = read_run(run)
    files = {"state.json": 1, "scoreboard.json": 1, "frontier.json": 1, "summary.json": 1, "config.yaml": 1}
    assert read.skipped == files
    assert read.phases == {} and read.scoreboard is None and read.frontier is None and read.config == {}
    assert "5 records skipped" in run_report([run]).read_text()
    (run / "config.yaml").write_text("seed: " + "9" * 5000 + "\n")  # PyYAML's int(): past Python's digit limit
    assert read_run(run).skipped["config.yaml"] == 1
    (run / "state.json").unlink()
    os.mkfifo(run / "state.json")  # never opened: a FIFO would block the report for ever
    assert read_run(run).phases == {}


def test_hostile_records_make_a_page_of_valid_json_with_every_name_as_text(tmp_path):
    run = write_hostile_run(tmp_path / "run")
    read = read_run(run)
    assert sum(read.skipped.values()) == SKIPPED
    assert len(read.logs) == GOOD_STEPS and len(read.evals) == GOOD_STEPS // 4
    page = run_report([run])
    text = page.read_text()
    block = re.search(r'<script type="application/json" id="data">(.*?)</script>', text, re.S).group(1)

    def refuse(constant):
        raise AssertionError(f"{constant} is not JSON")

    data = json.loads(block, parse_constant=refuse)  # NaN and Infinity written as null
    assert f"{SKIPPED} records skipped" in text
    texts = [p["title"] for p in data["plots"]] + [t["name"] for p in data["plots"] for t in p["traces"]]
    texts += [a["hover"] for a in data["alarms"]]
    assert all("<" not in t and ">" not in t for t in texts), [t for t in texts if "<" in t]
    reward = next(p for p in data["plots"] if p["id"] == "reward")
    escaped = '&lt;span style="background:url(reward.png)"&gt;r'
    assert [t["name"] for t in reward["traces"]] == ["total (weighted)", escaped]
    assert reward["traces"][0]["y"] == [0.1] * 3  # NaN and the infinities are left out of the plot
    verdicts = next(p for p in data["plots"] if p["id"] == "verdicts-0")
    assert "&lt;span style=" in " ".join(t["name"] for t in verdicts["traces"])  # an unknown status, as text
    heldout = next(p for p in data["plots"] if p["id"] == "heldout")
    assert [t["name"] for t in heldout["traces"]] == ["pass@1 (95% interval)"]  # pass@10's value is NaN
    assert {a["rule"] for a in data["alarms"]} >= {"length_at_cap"}
    assert data["generations"][0]["rewards"]["tests_reward"] is None and data["generations"][0]["duration_s"] is None
    staleness = next(p for p in data["plots"] if p["id"] == "async_staleness")  # no key of markup read as a level
    assert [t["name"] for t in staleness["traces"]] == ["0 versions old", "1 version old", "mean (versions)"]
    assert len(staleness["traces"][0]["x"]) == GOOD_STEPS - 1 and len(staleness["traces"][2]["x"]) == GOOD_STEPS - 1
    ids = {p["id"] for p in data["plots"]}
    assert "importance" in ids and "async_shares" not in ids  # the overlap's values are all NaN
    bound = "<td>bound (sampling.max_staleness)</td><td>&lt;span style=&quot;background:url("
    assert "run: asynchronous GRPO</h3>" in text and bound in text.replace("<b>", "").replace("</b>", "")


def test_cli_echoes_the_page_without_the_folders_escape_codes(cli, tmp_path, synthetic):
    run = synthetic(tmp_path / "run\x1b[2J\x1b[31mred\r", steps=3)
    code, out, err = cli("report", str(run))
    assert code == 0 and not err
    assert "\x1b" not in out and "\r" not in out and out.strip().endswith("run\\x1b[2J\\x1b[31mred\\r/report.html")


def test_a_feedback_run_plots_its_pass_rate_by_turn(tmp_path):
    """`rollouts.env: feedback` logs `feedback/pass_turn{k}` and `feedback/repaired_turn{k}` every step: one plot
    with a line per turn."""
    run = tmp_path / "feedback"
    run.mkdir()
    records = [
        {"phase": "grpo", "step": s, "feedback/pass_turn1": 0.2 + s / 100, "feedback/pass_turn2": 0.3 + s / 50}
        | {"feedback/repaired_turn2": 0.1 + s / 100}
        for s in range(1, 5)
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (plot,) = [p for p in build_plots([read_run(run)]) if p["id"] == "feedback"]
    assert [t["name"] for t in plot["traces"]] == ["after turn 1", "after turn 2", "turn-1 failures repaired by turn 2"]
    assert plot["traces"][1]["y"] == [0.32, 0.34, 0.36, 0.38]
