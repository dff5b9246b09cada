"""Tasks: the `Task` record and its tests as typed values (`Test`: assert, stdin/stdout and call cases, module
tests; their one string encoding in `codec`), loaders with `file:line` errors, column
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
from azr.data.codec import decode, decode_all, encode, encode_all
from azr.data.formats import FORMATS, Oracle, converter, read_checker
from azr.data.humaneval import STOP, Problem, load_humaneval, program_from_answer, stub_of
from azr.data.iotests import module_tests
from azr.data.tasks import (
    GRADING_COLUMNS,
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
from azr.data.tests_model import (
    COMPARES,
    KINDS,
    TEST_TYPES,
    AssertTest,
    CallCase,
    Compare,
    ModuleTest,
    StdioCase,
    Test,
    test_kind,
)

__all__ = [
    "COMPARES",
    "FORMATS",
    "GRADING_COLUMNS",
    "KINDS",
    "SPLITS",
    "STOP",
    "TEST_TYPES",
    "AssertTest",
    "CallCase",
    "Compare",
    "ModuleTest",
    "Oracle",
    "Problem",
    "StdioCase",
    "Task",
    "Test",
    "check_task_limits",
    "check_task_source",
    "converter",
    "decode",
    "decode_all",
    "encode",
    "encode_all",
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
    "task_from_row",
    "test_kind",
    "without_checks",
    "without_tests",
]
