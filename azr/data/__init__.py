"""Tasks: the `Task` record (assert tests, stdin/stdout and call cases, setup), loaders with `file:line` errors, column
maps and data sets' own formats, HumanEval, and the shipped splits
(train.jsonl, heldout.jsonl). The face of the data package; it runs no code.
"""

from azr.data.checks import (
    identical_solutions,
    kinds_of,
    near_duplicates,
    show_kinds,
    show_split,
    split_counts,
    without_checks,
    without_tests,
)
from azr.data.formats import FORMATS, Oracle, converter, read_checker
from azr.data.humaneval import STOP, Problem, load_humaneval, program_from_answer, stub_of
from azr.data.iotests import (
    COMPARES,
    KINDS,
    IOCase,
    call_source,
    decode_case,
    decode_test,
    module_tests,
    tagged,
    test_kind,
)
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
    "KINDS",
    "SPLITS",
    "STOP",
    "IOCase",
    "Oracle",
    "Problem",
    "Task",
    "call_source",
    "check_task_limits",
    "check_task_source",
    "converter",
    "decode_case",
    "decode_test",
    "identical_solutions",
    "json_lines",
    "kinds_of",
    "load_humaneval",
    "load_tasks",
    "module_tests",
    "near_duplicates",
    "program_from_answer",
    "read_checker",
    "read_jsonl",
    "select_tasks",
    "show_kinds",
    "show_split",
    "split_counts",
    "stub_of",
    "tagged",
    "task_from_row",
    "test_kind",
    "without_checks",
    "without_tests",
]
