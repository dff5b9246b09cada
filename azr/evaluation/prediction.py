"""Output prediction (CRUXEval-style) for `azr eval --dataset output-prediction`: given a program and an input, give
the output. The shipped set `azr/data/output_prediction.jsonl` comes from the held-out split
(scripts/output_prediction_set.py), so it measures Absolute Zero mode's deduction on programs it never proposed or
trained on. A problem asks exactly what a deduction solver is asked in training, and its answer is judged by the
mode's own judge in the sandbox (the answer's literal against the output, exact types). `output-prediction:FILE`
scores a triplet file of one's own, or CRUXEval's own file (`code`, `input`, `output`, `id`).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from azr.config import SandboxConfig
from azr.data import Problem, Task, json_lines
from azr.errors import DataError
from azr.prompts import AnswerFormat
from azr.rewards import limits_from_config, pool_from_config

DATASET = "output-prediction"


def is_prediction_set(dataset: str) -> bool:
    return dataset == DATASET or dataset.startswith(f"{DATASET}:")


def load_prediction_problems(dataset: str) -> list[Problem]:
    """Problems from the shipped set, or from the triplet file after `output-prediction:`; every line needs an
    output."""
    from azr.absolute_zero import read_numbered, solver_messages, triplet_from_line  # the mode's, where asked for

    path_text = dataset.partition(":")[2]
    if path_text:
        rows = json_lines(Path(path_text))
        numbered = [(n, triplet_from_line(_cruxeval(row), f"{path_text}:{n}")) for n, row in rows]
        label = path_text
    else:
        with resources.as_file(resources.files("azr.data") / "output_prediction.jsonl") as path:
            numbered = read_numbered(path)
        label = "output_prediction.jsonl"
    problems = []
    for number, triplet in numbered:
        if triplet.many or triplet.output is None:
            raise DataError(f"{label}:{number}: an output-prediction line needs 'input' and 'output'")
        prompt = solver_messages("deduction", triplet, 0, "")[-1]["content"]
        task = Task(
            id=f"{triplet.origin or 'line'}/{number}",
            prompt=prompt,
            tests=[f"assert f({triplet.input}) == {triplet.output}"],
            solution=triplet.program,
            tags=["output-prediction"],
        )
        problems.append(Problem(task, triplet=triplet.to_line()))
    if not problems:
        raise DataError(f"{label}: no triplets")
    return problems


CRUXEVAL_FIELDS = frozenset({"code", "input", "output", "id"})


def _cruxeval(row: Any) -> Any:
    """A CRUXEval row (`code`, `input`, `output`, `id`) as a triplet line; any other row as it stands."""
    if isinstance(row, dict) and "code" in row and "program" not in row and set(row) <= CRUXEVAL_FIELDS:
        line = {"program": row["code"], "input": row.get("input"), "output": row.get("output")}
        return line | ({"origin": str(row["id"])} if row.get("id") is not None else {})
    return row


def grade_predictions(
    items: list[tuple], sandbox: SandboxConfig, answer_format: AnswerFormat
) -> list[tuple[bool, str, str]]:
    """(passed, status, reason) per (problem, index, text, mode, error) item whose text is not None: `passed` when
    the judge finds the answer's literal equal to the output; `no_code` when the answer is not a literal in the
    format; `error` when the sandbox failed (retried on the next run)."""
    from azr.absolute_zero import Judge, Rules, triplet_from_line

    judge = Judge(pool_from_config(sandbox), limits_from_config(sandbox), Rules(), 1, answer_format)
    jobs: list[Any] = [("deduction", triplet_from_line(p.triplet, p.id), text) for p, _, text, _, _ in items]
    statuses = {"correct": "passed", "wrong": "failed", "format": "no_code", "error": "error"}
    return [(o.verdict == "correct", statuses[o.verdict], o.detail) for o in judge.judge(jobs)]
