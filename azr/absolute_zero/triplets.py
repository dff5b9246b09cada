"""Triplets, the task record of Absolute Zero mode (a program `f`, its arguments' source, the repr of what it
returns; for induction several inputs and outputs and a message), and their JSONL line format for buffers, seeds
and the checker, Absolute-Zero-Reasoner's own seed files included. Reading checks each line's shape (errors name
`file:line`); whether a triplet is valid is `validation`'s (docs/absolute-zero.md has both line formats).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from azr.data import json_lines
from azr.errors import DataError, did_you_mean, show
from azr.logs import write_data_file

TaskType = Literal["deduction", "abduction", "induction"]
TASK_TYPES: tuple[TaskType, ...] = ("deduction", "abduction", "induction")
LINE_FIELDS = ("program", "input", "output", "inputs", "outputs", "message", "origin")
# Absolute-Zero-Reasoner's seed and buffer lines: `snippet` is the program; the rest is read or ignored (see above).
NATIVE_FIELDS = ("snippet", "imports", "composite_functions")
NATIVE_IGNORED = ("original_snippet", "_input_type", "_output_type", "_input_types", "_output_types")


@dataclass(frozen=True)
class Triplet:
    """One task: `inputs` holds one input (deduction / abduction) or several (induction, `many`); `outputs` is
    None until validation computes them. `origin` says where it came from (a seed task, a step)."""

    program: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...] | None = None
    message: str = ""
    many: bool = False
    origin: str = ""

    @property
    def input(self) -> str:
        return self.inputs[0]

    @property
    def output(self) -> str | None:
        return self.outputs[0] if self.outputs else None

    @property
    def key(self) -> tuple:
        """What makes two triplets the same task (buffers keep one of each)."""
        return (self.program, self.inputs, self.message)

    def with_outputs(self, outputs: tuple[str, ...]) -> Triplet:
        return Triplet(self.program, self.inputs, tuple(outputs), self.message, self.many, self.origin)

    def to_line(self) -> dict[str, Any]:
        line: dict[str, Any] = {"program": self.program}
        if self.many:
            line["inputs"] = list(self.inputs)
            if self.outputs is not None:
                line["outputs"] = list(self.outputs)
            line["message"] = self.message
        else:
            line["input"] = self.input
            if self.outputs is not None:
                line["output"] = self.output
        if self.origin:
            line["origin"] = self.origin
        return line


def split_pairs(triplet: Triplet, shown: int) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """An induction task's (input, output) pairs: the first `shown` go into the solver's prompt, the rest are
    hidden and decide whether its program is right."""
    pairs = list(zip(triplet.inputs, triplet.outputs or (), strict=True))
    return pairs[:shown], pairs[shown:]


def triplet_from_line(row: object, where: str) -> Triplet:
    """A Triplet from one parsed JSON line; DataError naming `where` (file:line) when its shape is wrong."""
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    known = LINE_FIELDS + NATIVE_FIELDS + NATIVE_IGNORED
    for key in row:
        if key not in known:
            raise DataError(f"{where}: unknown field '{key}'{did_you_mean(key, known)}")

    def text(name: str) -> str:
        value = row.get(name)
        if not isinstance(value, str):
            raise DataError(f"{where}: field '{name}': expected a string, got {show(value)}")
        return value

    def texts(name: str) -> tuple[str, ...]:
        value = row.get(name)
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise DataError(f"{where}: field '{name}': expected a non-empty list of strings, got {show(value)}")
        return tuple(value)

    if ("program" in row) == ("snippet" in row):
        raise DataError(f"{where}: expected one of 'program' (azr's lines) or 'snippet' (Absolute-Zero-Reasoner's)")
    program = text("program") if "program" in row else _native_program(row, text("snippet"), where)
    single, many = "input" in row, "inputs" in row
    if single == many:
        raise DataError(f"{where}: expected exactly one of 'input' (one call) or 'inputs' (an induction task)")
    if single and ({"outputs", "message"} & set(row)):
        raise DataError(f"{where}: 'outputs' and 'message' belong to an induction line (with 'inputs')")
    if many and "output" in row:
        raise DataError(f"{where}: an induction line gives 'outputs', not 'output'")
    origin = text("origin") if "origin" in row else ""
    if single:
        outputs = (text("output"),) if "output" in row else None
        return Triplet(program, (text("input"),), outputs, origin=origin)
    inputs = texts("inputs")
    outputs = texts("outputs") if "outputs" in row else None
    if outputs is not None and len(outputs) != len(inputs):
        raise DataError(f"{where}: {len(inputs)} inputs but {len(outputs)} outputs")
    message = text("message") if "message" in row else ""
    return Triplet(program, inputs, outputs, message, True, origin)


def _native_program(row: dict[str, Any], snippet: str, where: str) -> str:
    """An Absolute-Zero-Reasoner snippet with what it leans on put before it: its composite functions' snippets
    and any of its `imports` it does not already hold."""
    imports = row.get("imports", [])
    if not isinstance(imports, list) or not all(isinstance(i, str) for i in imports):
        raise DataError(f"{where}: field 'imports': expected a list of import statements, got {show(imports)}")
    helpers = row.get("composite_functions", [])
    if not isinstance(helpers, list) or not all(
        isinstance(h, dict) and isinstance(h.get("snippet"), str) for h in helpers
    ):
        raise DataError(
            f"{where}: field 'composite_functions': expected a list of {{\"snippet\": ...}}, got {show(helpers)}"
        )
    lines = snippet.splitlines()
    missing = [i.strip() for i in imports if i.strip() and i.strip() not in (line.strip() for line in lines)]
    return "\n".join([*missing, *(h["snippet"] for h in helpers), snippet])


def read_numbered(path: Path) -> list[tuple[int, Triplet]]:
    """(line number, triplet) for every non-blank line of a triplet file; DataError naming `file:line` for a
    malformed one."""
    return [(number, triplet_from_line(row, f"{path}:{number}")) for number, row in json_lines(Path(path))]


def read_triplets(path: Path) -> list[Triplet]:
    return [t for _, t in read_numbered(path)]


def write_triplets(path: Path, triplets: list[Triplet]) -> Path:
    """The triplets, one JSON line each, written atomically (a crash leaves the old file or the new one) and
    verbatim (a snippet that looks like a credential stays as it is)."""
    text = "".join(json.dumps(t.to_line(), ensure_ascii=False) + "\n" for t in triplets)
    return write_data_file(Path(path), text)  # data: verbatim, never redacted
