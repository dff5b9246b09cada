"""Tasks: the `Task` record, loaders with `file:line` errors and column maps, HumanEval, and the shipped splits
(train.jsonl, heldout.jsonl). The face of the data package; it runs no code.
"""

from azr.data.humaneval import STOP, Problem, load_humaneval, program_from_answer
from azr.data.tasks import (
    SPLITS,
    Task,
    check_task_limits,
    check_task_source,
    json_lines,
    load_tasks,
    near_duplicates,
    read_jsonl,
    select_tasks,
    task_from_row,
)

__all__ = [
    "SPLITS",
    "STOP",
    "Problem",
    "Task",
    "check_task_limits",
    "check_task_source",
    "json_lines",
    "load_humaneval",
    "load_tasks",
    "near_duplicates",
    "program_from_answer",
    "read_jsonl",
    "select_tasks",
    "task_from_row",
]
