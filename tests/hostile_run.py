"""A run folder whose records are hostile to `azr report`: markup in every name a record carries (reward names,
`pass_at_k` keys, statuses, tags, rules), NaN and Infinity, and records of the wrong shape. The report tests read it
in Python (`tests/report/test_report.py`) and in Chromium (`tests/report/test_browser.py`)."""

from __future__ import annotations

import json
from pathlib import Path

# plotly draws this as markup in a trace name or a title, and the style's url() is fetched
MARKUP = '<span style="background:url({url}/x.png)">m</span><a href="{url}/a">a</a><img src="{url}/i.png">'
REWARD = '<span style="background:url(reward.png)">r'  # a reward's name ends at its first "/": a relative URL
NAN, INF = float("nan"), float("inf")

GOOD_STEPS = 12
SHAPES = {  # records the report cannot use, by file: each is skipped and counted
    "metrics.jsonl": [
        {"phase": "grpo", "reward": 0.5},  # a step log without `step`
        {"phase": "grpo", "step": "3", "reward": 0.5},
        {"phase": "grpo", "step": True, "reward": 0.5},
        {"phase": "grpo", "step": 4, "reward": [1, 2]},  # a list where a number belongs
        {"phase": "grpo", "step": 5, "reward": "high"},  # a string where a number belongs
        {"phase": "grpo", "step": 6, "completion_length": {"mean": 3}},
        {"phase": "grpo", "kind": "eval", "step": 6, "pass_at_k": {"²": {"value": 0.5}}},  # not a whole number
        {"phase": "grpo", "kind": "eval", "step": 7, "pass_at_k": [0.5]},
        {"phase": "grpo", "kind": "eval", "step": 8, "pass_at_k": {"1": {"value": "0.5"}}},
        {"phase": "grpo", "kind": "eval", "step": 8, "pass_at_k": {"1": {"value": 0.5}}, "by_tag": ["easy"]},
        {"phase": "grpo", "kind": "alarm", "step": 9, "rule": ["x"], "message": "m"},
        {"phase": "eval_before", "step": 0, "pass_rate": "most"},
    ],
    "generations": [
        {"completion": "no step"},
        {"step": -1, "completion": "x"},
        {"step": 2, "status": ["passed"]},
        {"step": 2, "rewards": [1.0]},
        {"step": 2, "rewards": {"tests_reward": "high"}},
        {"step": 2, "per_test": "✓✗"},
        {"step": 2, "failures": "one"},
        {"step": 2, "tests_passed": "1", "tests_total": 2},
    ],
}
TORN = 2  # lines that are not JSON objects: one of each kind, per file
SKIPPED = len(SHAPES["metrics.jsonl"]) + len(SHAPES["generations"]) + 2 * TORN + 3  # + state, scoreboard, frontier


def write_hostile_run(folder: Path, url: str = "http://127.0.0.1:9") -> Path:
    """The run in `folder`; its markup points at `url` (default: a closed port), where a page that reads it as
    markup would fetch."""
    folder.mkdir(parents=True, exist_ok=True)
    markup = MARKUP.format(url=url)
    (folder / "config.yaml").write_text(
        "model: {name_or_path: m}\nrewards: [1, {name: '" + markup.replace("'", "''") + "', weight: .nan}]\n"
        "sampling: {max_staleness: '" + markup.replace("'", "''") + "'}\n"
    )
    (folder / "state.json").write_text(json.dumps({"phases": ["grpo"]}))  # phases are a mapping
    (folder / "summary.json").write_text(json.dumps({"seconds": NAN, "phases": {}}))
    (folder / "scoreboard.json").write_text(json.dumps({"win_rate": {"problem": {"rate": "most"}}}))
    (folder / "frontier.json").write_text(json.dumps({"entries": {"t": {"count": [1]}}}))
    reward = f"rewards/{REWARD}/mean"
    lines = []
    for step in range(1, GOOD_STEPS + 1):
        lines.append(
            {
                "phase": "grpo",
                "step": step,
                "time": 1_790_000_000.0 + step,
                "reward": [0.1, NAN, INF, -INF][step % 4],
                reward: 0.1 * step,
                "completion_length": NAN,
                "completions/clipped_ratio": 0.9,  # the length_at_cap alarm, once ten logs are in
                # no sandbox/<status> shares: the verdict plot counts the generation log's statuses, markup among them
                f"absolute_zero/{markup}/solve/reward": NAN,
                # asynchronous GRPO's figures: NaN and the infinities left out, a staleness key that is no number
                # never read, a plot whose values are all NaN (overlap) left out
                "async/staleness_0": NAN if step == 1 else 0.5,
                "async/staleness_1": 0.5,
                f"async/staleness_{markup}": 0.5,
                "async/staleness_mean": INF if step == 2 else 0.5,
                "async/overlap_share": NAN,
                "async/dropped_samples_total": NAN,
                "sampling/importance_sampling_ratio/mean": -INF if step == 3 else 1.0,
            }
        )
        if step % 4 == 0:
            lines.append(
                {
                    "phase": "grpo",
                    "kind": "eval",
                    "step": step,
                    "pass_at_k": {"1": {"value": 0.5, "low": NAN, "high": INF}, "10": {"value": NAN}},
                    "by_tag": {markup: {"problems": 3, "pass@1": NAN}},
                    "eval_wall_s": INF,
                    "eval_share": NAN,
                }
            )
    lines.append({"phase": "grpo", "kind": "alarm", "step": 3, "rule": markup, "message": markup})
    lines += SHAPES["metrics.jsonl"]
    text = "".join(json.dumps(r) + "\n" for r in lines)
    deep = "[" * 100_000 + "]" * 100_000
    (folder / "metrics.jsonl").write_text(text + deep + "\n" + "9" * 5000 + "\n")
    generations = folder / "generations"
    generations.mkdir(exist_ok=True)
    rows = []
    for step in range(1, GOOD_STEPS + 1):
        for status in ("passed", markup, "timeout"):
            rows.append(
                {
                    "step": step,
                    "task_id": markup,
                    "status": status,
                    "prompt": markup,
                    "completion": "</script>" + markup,
                    "rewards": {markup: NAN, "tests_reward": INF},
                    "duration_s": NAN,
                    "messages": [{"role": "tool", "name": markup, "content": "[error] x"}],
                }
            )
    rows += SHAPES["generations"]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    (generations / "generations-00000.jsonl").write_text(text + "[" * 50_000 + "\n" + "-" + "7" * 6000 + "\n")
    return folder
