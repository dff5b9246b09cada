"""Sample records: an answer read as the program it holds (`program_for`: a chat reply, a continuation of HumanEval's
stub, or a whole program) and graded in the sandbox into the record `samples.jsonl` keeps (`graded`). `azr eval`,
its feedback turns and the held-out evaluation during a run all grade here.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from azr.config import SandboxConfig
from azr.data import Problem, program_from_answer
from azr.evaluation.prediction import grade_predictions
from azr.prompts import AnswerFormat, parse_answer
from azr.rewards import grade_stream, limits_from_config, pool_from_config
from azr.sandbox import ExecutionProvider


def program_for(problem: Problem, text: str, mode: str, answer_format: AnswerFormat) -> str | None:
    """The program to grade (None: the text holds no code). `solution`: the text is the program. `continuation`:
    the text continues the HumanEval stub, or, for a task prompted through /completions, is the code up to the
    closing fence. `answer`: a chat reply, read with the answer format (HumanEval: see `program_from_answer`)."""
    if mode == "solution":
        return text
    if mode == "continuation":
        return problem.stub + text if problem.stub is not None else text.split("```")[0]
    if problem.stub is not None:
        return program_from_answer(problem, text, answer_format)
    return parse_answer(text, answer_format).code


def graded(
    items: list[tuple],
    sandbox: SandboxConfig,
    answer_format: AnswerFormat,
    timings: dict[str, float],
    pool: ExecutionProvider | None = None,
) -> Iterator[dict[str, Any]]:
    """Records for (problem, index, text or None, mode, request error) items, in order, each as soon as it is
    graded; programs run in parallel in `pool` (default: the shared pool of `sandbox`). `azr eval` and the held-out
    evaluation during a run (`azr.evaluation.heldout`) both grade here."""
    t0 = time.monotonic()
    answered = [item for item in items if item[0].triplet is not None and item[2] is not None]
    verdicts = iter(grade_predictions(answered, sandbox, answer_format) if answered else [])
    programs = [
        None if text is None or p.triplet is not None else program_for(p, text, mode, answer_format)
        for p, _, text, mode, _ in items
    ]
    jobs = [(item[0].task, code) for item, code in zip(items, programs, strict=True) if code is not None]
    if jobs and pool is None:  # only request failures: no sandbox needed
        pool = pool_from_config(sandbox)
    grades = grade_stream(jobs, pool, limits_from_config(sandbox)) if jobs else iter([])
    for (problem, index, text, _, error), code in zip(items, programs, strict=True):
        record = {"task_id": problem.id, "index": index, "passed": False, "status": "no_code", "tests_passed": 0}
        record |= {"tests_total": len(problem.task.tests), "duration_s": 0.0, "completion": text, "reason": ""}
        if text is None:
            record |= {"status": "request_failed", "reason": (error or "no reply")[:300]}
        elif problem.triplet is not None:  # output prediction: the answer's literal, judged in the sandbox
            passed, status, reason = next(verdicts)
            record |= {"passed": passed, "status": status, "tests_passed": int(passed), "reason": reason[:300]}
        elif code is not None:
            g = next(grades)
            record |= {"passed": g.passed, "status": g.status, "tests_passed": g.tests_passed}
            record |= {"tests_total": g.tests_total, "duration_s": round(g.duration_s, 4)}
            record["reason"] = "; ".join(g.failures)[:300]
        else:
            record["reason"] = "no code in the answer"
        yield record
    timings["grading_s"] += time.monotonic() - t0
