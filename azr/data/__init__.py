"""Tasks: the `Task` record (assert tests, stdin/stdout and call cases, setup), loaders with `file:line` errors, column
maps and data sets' own formats, HumanEval, and the shipped splits
(train.jsonl, heldout.jsonl). The face of the data package; it runs no code.
"""

from azr.data.checks import identical_solutions, near_duplicates, without_checks
from azr.data.formats import FORMATS
from azr.data.humaneval import STOP, Problem, load_humaneval, program_from_answer, stub_of
from azr.data.iotests import COMPARES, IOCase, decode_case
from azr.data.tasks import (
    SPLITS,
    Task,
    check_task_limits,
    check_task_source,
    json_lines,
    load_tasks,
    read_jsonl,
    select_tasks,
    task_from_row,
)

__all__ = [
    "COMPARES",
    "FORMATS",
    "SPLITS",
    "STOP",
    "IOCase",
    "Problem",
    "Task",
    "check_task_limits",
    "check_task_source",
    "decode_case",
    "identical_solutions",
    "json_lines",
    "load_humaneval",
    "load_tasks",
    "near_duplicates",
    "program_from_answer",
    "read_jsonl",
    "select_tasks",
    "stub_of",
    "task_from_row",
    "without_checks",
]
