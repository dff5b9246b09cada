"""What the policy is asked in each role and task type, and how a proposal is read back from its completion.
Solver prompts use azr's own system prompt and answer format (so an output-prediction problem in `azr eval` asks
what a deduction solver is asked in training); proposer prompts ask for fenced ```python, ```input (and for
induction ```message) blocks. Reading is text only: judging and validation happen in the sandbox.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from azr.absolute_zero.triplets import TaskType, Triplet, split_pairs
from azr.prompts import chat_messages, reference_answer, strip_thinking

PROPOSER_SYSTEM = (
    "You design Python code-reasoning tasks for another programmer to solve. You may reason first. Then answer in "
    "exactly the format the request asks for."
)
_FENCE = re.compile(r"^```[ \t]*([\w+-]*)[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
_SOLVER_TASK = {
    "deduction": "the function and the input, and must predict the output",
    "abduction": "the function and its output, and must find an input that produces it",
}
_ARGUMENTS = "the arguments exactly as you would write them between the parentheses of `f(...)`"


def rules_text(allowed_imports: Sequence[str], max_output_chars: int) -> str:
    return (
        "Rules: one top-level function `f` (helpers go inside it; classes are allowed); imports only from "
        f"{', '.join(allowed_imports) or 'nothing'}; no printing, files, randomness or time; `f` returns plain data "
        f"(numbers, strings, lists, tuples, dicts, sets, booleans, None), the same on every run, with a repr of at "
        f"most {max_output_chars} characters."
    )


def proposer_messages(kind: TaskType, references: Sequence[Triplet], rules: str, n_inputs: int, shown: int):
    """The proposer's conversation: K reference triplets (deduction, abduction) or one program (induction)."""
    if kind == "induction":
        program = references[0].program
        text = (
            f"Here is a Python function `f`. Write {n_inputs} different inputs for it that together show what it "
            f"does, and a short message that hints at what it does without giving the code. A solver will see "
            f"{shown} of the inputs with their outputs and your message, and must write `f` so that it also gives "
            f"the right outputs for the other inputs.\n\n```python\n{program.strip()}\n```\n\nAnswer with "
            f"{n_inputs} ```input blocks, each holding {_ARGUMENTS}, then one ```message block."
        )
    else:
        examples = "\n\n".join(
            f"Example {n}:\n```python\n{t.program.strip()}\n```\n```input\n{t.input}\n```\nOutput: {t.output}"
            for n, t in enumerate(references, 1)
        )
        text = (
            f"Write a new Python function `f` and one input for it, for a task where a solver is given "
            f"{_SOLVER_TASK[kind]}. Make it different from the examples, and neither trivial nor impossible to "
            f"reason about.\n\n{rules}\n\n{examples}\n\nAnswer with one ```python block holding the function, then "
            f"one ```input block holding {_ARGUMENTS}."
        )
    return [{"role": "system", "content": PROPOSER_SYSTEM}, {"role": "user", "content": text}]


def parse_proposal(kind: TaskType, text: str, program: str | None, n_inputs: int) -> Triplet | None:
    """The proposed triplet (outputs not computed yet), or None when the completion is not in the asked format.
    An induction proposal is about `program`, the one its prompt showed."""
    visible = strip_thinking(text or "")
    if visible is None:
        return None
    blocks: dict[str, list[str]] = {}
    for match in _FENCE.finditer(visible):
        blocks.setdefault(match.group(1).lower(), []).append(match.group(2).rstrip("\n"))
    inputs = [b.strip() for b in blocks.get("input", [])]
    if kind == "induction":
        messages = blocks.get("message", [])
        if program is None or len(inputs) != n_inputs or len(messages) != 1 or not messages[0].strip():
            return None
        return Triplet(program, tuple(inputs), message=" ".join(messages[0].split()), many=True)
    code = blocks.get("python", []) + blocks.get("py", [])
    if len(code) != 1 or len(inputs) != 1 or not code[0].strip():
        return None
    return Triplet(code[0], (inputs[0],))


def proposal_text(kind: TaskType, triplet: Triplet) -> str:
    """A proposal written the way a proposer answers (what the warm start teaches)."""
    if kind == "induction":
        blocks = "".join(f"```input\n{i}\n```\n" for i in triplet.inputs)
        return f"{blocks}```message\n{triplet.message}\n```"
    return f"```python\n{triplet.program.strip()}\n```\n```input\n{triplet.input}\n```"


def solver_messages(kind: TaskType, triplet: Triplet, shown: int, rules: str) -> list[dict[str, str]]:
    """The solver's conversation: azr's system prompt and answer format, the task in the user message."""
    if kind == "deduction":
        text = (
            f"Predict the output of the Python function `f` below for the given input.\n\n```python\n"
            f"{triplet.program.strip()}\n```\n\nInput:\n```python\nf({triplet.input})\n```\n\nWrite the value `f` "
            f"returns as a Python literal (as `repr` shows it) in your ```python block, then the line "
            f"`Final answer: f`."
        )
    elif kind == "abduction":
        text = (
            f"Find an input for which the Python function `f` below returns the given output.\n\n```python\n"
            f"{triplet.program.strip()}\n```\n\nOutput:\n```python\n{triplet.output}\n```\n\nWrite {_ARGUMENTS} "
            f"in your ```python block, then the line `Final answer: f`."
        )
    else:
        examples = "\n".join(f"f({i}) == {o}" for i, o in split_pairs(triplet, shown)[0])
        text = (
            f"Write a Python function `f` that matches this description and these examples; it is also checked on "
            f"other inputs.\n\nDescription: {triplet.message}\n\nExamples:\n```python\n{examples}\n```\n\n{rules}"
            f"\n\nWrite the function in your ```python block, then the line `Final answer: f`."
        )
    return chat_messages(text)


def solver_answer(kind: TaskType, triplet: Triplet) -> str:
    """The reference answer to a solver prompt, in azr's answer format (what the warm start teaches)."""
    content = {"deduction": triplet.output or "", "abduction": triplet.input, "induction": triplet.program}[kind]
    return reference_answer(content, "f")


def warm_start_pairs(
    kinds: Sequence[TaskType],
    singles: Sequence[Triplet],
    sets: Sequence[Triplet],
    references: int,
    n_inputs: int,
    shown: int,
    rules: str,
    rng: random.Random,
) -> list[tuple[list[dict[str, str]], str]]:
    """(conversation, answer) pairs that teach both roles' formats on valid seed triplets: per seed and type, the
    solver's prompt with its reference answer, and a proposer prompt (other seeds as references) answered with
    the seed itself."""
    pairs = []
    for kind in kinds:
        pool = sets if kind == "induction" else singles
        for triplet in pool:
            pairs.append((solver_messages(kind, triplet, shown, rules), solver_answer(kind, triplet)))
            if kind == "induction":
                refs = [triplet]
            else:
                others = [t for t in singles if t.program != triplet.program]
                refs = rng.sample(others, min(references, len(others)))
            pairs.append((proposer_messages(kind, refs, rules, n_inputs, shown), proposal_text(kind, triplet)))
    return pairs
