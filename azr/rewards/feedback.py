"""Execution feedback: a program graded on a task's public tests alone, and the message that shows it its failures.

The message is rendered from the typed outcomes of the public tests (`Grade.outcomes`): at most `max_failures`
failing tests, each with its input, expected output, the program's output and its error (the exception's line, or
"timeout"), each cut to `max_chars`. Only the public tests ever run here (`public_task`), and a public test of a
test module carries that module without its hidden test functions: nothing of a hidden test enters the program, so
nothing of one can reach a message, whatever the program returns or prints. (A module's shared data, a constant its
tests read, stays: it is the public tests' too.) Scoring on the hidden tests is `hidden_task` graded as any task.
Knows nothing of models, Click or TRL.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

from azr.config import FeedbackConfig
from azr.data import ModuleTest, Task, Test
from azr.rewards.grading import Grade, grade_many
from azr.rewards.verdicts import TestOutcome
from azr.sandbox import ExecutionProvider, Limits

CUT = "... (cut)"
NO_CODE = (
    "Your answer held no Python code to run. Give the whole program in one ```python code block, as asked, and "
    "finish as the task says."
)
LOAD_FAILED = "solution failed to load:"  # the harness's verdict for every test of a program that did not load
CLOSING = "Fix the program and give the whole corrected program again, in the same form as before."


def public_task(task: Task) -> Task:
    """The task with its public tests only (`Task.split_tests`): what feedback runs."""
    public, _ = task.split_tests()
    return dataclasses.replace(task, tests=_without_hidden_functions(public), public_tests=None, public_parts=[])


def hidden_task(task: Task) -> Task | None:
    """The task with its hidden tests only, which score a feedback episode; None when it has none."""
    _, hidden = task.split_tests()
    return dataclasses.replace(task, tests=hidden, public_tests=None, public_parts=[]) if hidden else None


class PublicCheck(NamedTuple):
    """A program's verdict on its task's public tests: whether it passes them all, the feedback message (empty when
    it passes), and the fraction of them it passes."""

    passed: bool
    text: str
    fraction: float


def public_feedback_many(
    pairs: Sequence[tuple[Task, str | None]],
    cfg: FeedbackConfig,
    pool: ExecutionProvider | None = None,
    limits: Limits | None = None,
) -> list[PublicCheck]:
    """The public-test check of many (task, code) pairs, graded in parallel over `pool`: what execution feedback
    shows the policy. A pair without code fails with a message that says so, and a task without public tests passes
    (there is nothing to show)."""
    todo = [(i, public_task(task), code) for i, (task, code) in enumerate(pairs) if code is not None]
    todo = [(i, task, code) for i, task, code in todo if task.tests]
    grades = grade_many([(task, code) for _, task, code in todo], pool, limits, detail=True) if todo else []
    found = [PublicCheck(False, NO_CODE, 0.0) if code is None else PublicCheck(True, "", 1.0) for _, code in pairs]
    for (i, _, _), grade in zip(todo, grades, strict=True):
        text = "" if grade.passed else render_feedback(grade, cfg)
        found[i] = PublicCheck(grade.passed, text, grade.tests_passed / max(grade.tests_total, 1))
    return found


def _without_hidden_functions(public: list[Test]) -> list[Test]:
    """Public tests with each test module cut to its public test functions (and methods): every test of a module
    carries the whole module, hidden tests' functions included, and the program could read them from memory."""
    keep: dict[str, set[str]] = {}
    for test in public:
        if isinstance(test, ModuleTest) and test.test is not None:
            keep.setdefault(test.module, set()).add(test.test)
    if not keep:
        return public
    return [
        dataclasses.replace(t, module=_public_module(t.module, keep[t.module], t.style))
        if isinstance(t, ModuleTest) and t.module in keep
        else t
        for t in public
    ]


def _public_module(source: str, names: set[str], kind: str) -> str:
    """`source` without the test functions and methods not named in `names` (`test_f`, `Cls::test_m` for pytest,
    `Cls.test_m` for unittest); the rest as it was, line for line. Cut by the lines each definition spans (its
    decorators included), never by unparsing the tree: `ast.unparse` recurses once per level of an expression, and a
    module nested hundreds deep would end the run in a RecursionError."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return source
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    sep = "." if kind == "unittest" else "::"
    lines = source.splitlines(keepends=True)
    cuts: list[tuple[int, int, str]] = []  # (first line, last line, what replaces them), 1-based and inclusive

    def span(node: ast.stmt) -> tuple[int, int]:
        return min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]), node.end_lineno or 0

    def hidden(name: str, qualified: str) -> bool:
        return name.startswith("test") and qualified not in names

    for node in tree.body:
        if isinstance(node, functions) and hidden(node.name, node.name):
            cuts.append((*span(node), ""))
        elif isinstance(node, ast.ClassDef):
            gone = [m for m in node.body if isinstance(m, functions) and hidden(m.name, f"{node.name}{sep}{m.name}")]
            if gone and node.body[0].lineno == node.lineno:  # `class T: def test_a(self): ...` on one line
                return source if len(gone) < len(node.body) else _cut(lines, [(*span(node), "")])
            for m in gone:  # each method becomes `pass` at its own indentation: the class body is never left empty
                cuts.append((*span(m), " " * m.col_offset + "pass\n"))
    return _cut(lines, cuts)


def _cut(lines: list[str], cuts: list[tuple[int, int, str]]) -> str:
    for first, last, replacement in sorted(cuts, reverse=True):
        lines[first - 1 : last] = [replacement] if replacement else []
    text = "".join(lines)
    return text if text.endswith("\n") else text + "\n"


def render_feedback(grade: Grade, cfg: FeedbackConfig) -> str:
    """The message for a program's grade on the public tests: how many failed, then the first `max_failures` of
    them, each field cut to `max_chars`; an infrastructure error says only that the tests could not run."""
    if grade.status == "error":
        return "Your program could not be run on the tests this time (a sandbox failure, not your code). " + CLOSING
    failing = [(i, o) for i, o in enumerate(grade.outcomes) if not o.passed]
    total = len(grade.outcomes)
    if failing and all((o.why or "").startswith(LOAD_FAILED) for _, o in failing):  # one cause: said once
        error = failing[0][1].error or (failing[0][1].why or "")[len(LOAD_FAILED) :].strip()
        return "\n\n".join(
            [
                f"Your program failed to load, so none of the {total} public tests ran.\n"
                + _field("Error", error, cfg.max_chars),
                CLOSING,
            ]
        )
    head = f"Your program failed {len(failing)} of the {total} public test{'s' if total != 1 else ''}"
    shown = failing[: cfg.max_failures]
    head += ":" if len(shown) == len(failing) else f"; the first {len(shown)}:"
    blocks = [_block(i, outcome, cfg.max_chars) for i, outcome in shown]
    return "\n\n".join([head, *blocks, CLOSING])


def _block(index: int, outcome: TestOutcome, max_chars: int) -> str:
    lines = [f"Test {index + 1}", _field("Input", outcome.input, max_chars)]
    if outcome.expected is not None:
        lines.append(_field("Expected output", outcome.expected, max_chars))
    if outcome.actual is not None or outcome.error is None:
        lines.append(_field("Your output", outcome.actual, max_chars))
    if outcome.error is not None:
        lines.append(_field("Error", outcome.error, max_chars))
    return "\n".join(lines)


def _field(label: str, value: str | None, max_chars: int) -> str:
    if value is None or value == "":
        return f"{label}: (nothing)"
    text = cut(value, max_chars)
    return f"{label}:\n{text}" if "\n" in text.rstrip("\n") else f"{label}: {text.rstrip(chr(10))}"


def cut(text: str, max_chars: int) -> str:
    """`text` at most `max_chars` long, marked where it was cut."""
    return text if len(text) <= max_chars else text[:max_chars] + CUT
