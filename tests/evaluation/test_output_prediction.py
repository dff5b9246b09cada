"""`azr eval --dataset output-prediction`: the shipped CRUXEval-style set from the held-out split (never trained on,
never a seed), asked exactly as a deduction solver is asked and judged by the mode's own judge; a triplet file of
one's own with `output-prediction:FILE`."""

from __future__ import annotations

import json
from pathlib import Path

from azr.absolute_zero import read_triplets, solver_messages, task_candidates
from azr.data import AssertTest, load_tasks
from azr.evaluation.run import load_problems
from azr.prompts import chat_messages

SHIPPED = Path(__file__).resolve().parents[2] / "azr" / "data" / "output_prediction.jsonl"


def test_the_shipped_set_comes_from_held_out_programs_only():
    triplets = read_triplets(SHIPPED)
    assert len(triplets) >= 300 and all(t.output is not None and not t.many for t in triplets)
    held_out = {t.id for t in load_tasks("held-out")}
    assert {t.origin.split(":", 1)[1] for t in triplets} <= held_out
    seeds, _ = task_candidates(load_tasks("train"), 1)
    assert not {t.program for t in triplets} & {t.program for t in seeds}


def test_a_problem_asks_what_the_deduction_solver_is_asked():
    problems = load_problems("output-prediction")
    first = read_triplets(SHIPPED)[0]
    assert len(problems) == len(read_triplets(SHIPPED))
    assert chat_messages(problems[0].task.prompt) == solver_messages("deduction", first, 0, "")
    assert problems[0].triplet == first.to_line() and problems[0].id == f"{first.origin}/1"


def test_samples_are_judged_by_value_in_the_sandbox(cli, write, tmp_path):
    triplets = read_triplets(SHIPPED)[:2]
    path = write("t.jsonl", "".join(json.dumps(t.to_line()) + "\n" for t in triplets))
    ids = [f"{t.origin}/{n}" for n, t in enumerate(triplets, 1)]
    rows = [
        {"task_id": ids[0], "completion": f"```python\n{triplets[0].output}\n```\nFinal answer: f"},
        {"task_id": ids[0], "completion": "```python\n'surely not'\n```"},
        {"task_id": ids[1], "completion": f"```python\nf({triplets[1].input})\n```"},  # not a literal: no code
        {"task_id": ids[1], "completion": f"The output is {triplets[1].output}."},
    ]
    samples = write("s.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    code, _, err = cli("eval", "--dataset", f"output-prediction:{path}", "--samples", samples, "--output-dir", out)
    assert code == 0, err
    statuses = [json.loads(line)["status"] for line in (out / "samples.jsonl").read_text().splitlines()]
    assert statuses == ["passed", "failed", "no_code", "no_code"]
    report = json.loads((out / "report.json").read_text())
    assert report["pass_at_k"]["pass@1"] == 0.25
    assert report["settings"]["dataset"] == f"output-prediction:{path}"


def test_the_tiny_model_is_evaluated_on_it(cli, tiny_model_dir, write, tmp_path):
    path = write("t.jsonl", "".join(json.dumps(t.to_line()) + "\n" for t in read_triplets(SHIPPED)[:3]))
    out = tmp_path / "out"
    code, _, err = cli(
        "eval", "--model", tiny_model_dir, "--dataset", f"output-prediction:{path}", "-n", "2",
        "--max-new-tokens", "8", "--output-dir", out,
    )  # fmt: skip
    assert code == 0, err
    report = json.loads((out / "report.json").read_text())
    assert report["counts"]["samples"] == 6 and report["counts"]["not_graded"] == 0


def test_cruxevals_own_file_loads_as_published(write):
    rows = [
        {"code": "def f(text):\n    return text[::-1]", "input": "'abc'", "output": "'cba'", "id": "sample_0"},
        {"code": "def f(n):\n    return n * 2", "input": "4", "output": "8", "id": "sample_1"},
    ]
    path = write("cruxeval.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    problems = load_problems(f"output-prediction:{path}")
    assert [p.id for p in problems] == ["sample_0/1", "sample_1/2"]
    assert "return text[::-1]" in problems[0].task.prompt and problems[0].task.tests == [
        AssertTest("assert f('abc') == 'cba'")
    ]
