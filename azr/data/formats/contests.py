"""Competitive-programming sets as published, converted to task fields.

- `livecodebench`: code-generation rows (`question_content`, `starter_code`, `public_test_cases`,
  `private_test_cases`, `metadata` with `func_name`). Cases are `stdin` (stdin/stdout) or `functional` (a call of
  `Solution.func_name` with JSON arguments one per line; stdout compared as its grader does, `decimals`); the
  private cases may be compressed (base64 of zlib of a pickled JSON string), read by `pickled.load_plain`: plain
  data only, every size bounded before it is allocated. The public cases are public tests, the private ones hidden.
- `code_contests`: DeepMind CodeContests (`description`, `public_tests`, `private_tests`, `generated_tests`,
  `solutions` with language 3 = Python 3: the first is the reference); `public_tests` are public, the others hidden.
- `primeintellect`: PrimeIntellect's verifiable-coding-problems / SYNTHETIC-1 (`prompt`, `verification_info`
  with `test_cases` of type `stdin_stdout` or `function_call`, `gold_standard_solution` in Markdown fences). A
  `function_call` case calls `fn_name` as its verifier does: the method of a fresh instance of the program's first
  class that defines it, else the top-level function. The first case is public, the rest hidden.

Each task's prelude is the imports these sets' harnesses put in scope (`common.HARNESS_PRELUDE`).
"""

from __future__ import annotations

import base64
import binascii
import zlib
from typing import Any

from azr.data.formats.classic import call_cases
from azr.data.formats.common import (
    HARNESS_PRELUDE,
    Row,
    io_lists,
    need,
    need_text,
    optional_text,
    parsed,
    row_id,
    unfenced,
)
from azr.data.formats.pickled import PickleError, load_plain
from azr.errors import DataError, show

# The instructions in our own words: complete the starter code, or write a whole program on stdin and stdout.
LIVECODEBENCH_CALL = (
    "Complete this starter code into a solution, and give the whole class in one Python code block.\n"
    "```python\n{starter}\n```"
)
LIVECODEBENCH_STDIN = (
    "Write a complete Python program that reads the input from standard input and prints the answer to standard "
    "output. Give it in one Python code block."
)
_MAX_DECODED = 64 << 20  # one row's decompressed private cases


def decoded_cases(value: Any, where: str, column: str) -> list[Row]:
    """A LiveCodeBench test-case column: a list, JSON text, or base64(zlib(pickle(JSON text)))."""
    if isinstance(value, list):
        return value
    if not isinstance(value, str):
        raise DataError(f"{where}: column '{column}': expected a list of test cases, got {show(value)}")
    if value.lstrip().startswith("["):
        return parsed(value, where, column)
    try:
        packed = zlib.decompressobj()
        raw = packed.decompress(base64.b64decode(value, validate=True), _MAX_DECODED)
    except (binascii.Error, zlib.error, ValueError) as exc:
        raise DataError(f"{where}: column '{column}': neither JSON nor base64/zlib/pickle: {exc}") from None
    if packed.unconsumed_tail:
        raise DataError(f"{where}: column '{column}': decompresses to over {_MAX_DECODED:,} bytes")
    try:
        inner = load_plain(raw, _MAX_DECODED)
    except PickleError as exc:
        raise DataError(f"{where}: column '{column}': unreadable pickle: {exc}") from None
    cases = parsed(inner, where, column) if isinstance(inner, (str, bytes)) else inner
    if not isinstance(cases, list):
        raise DataError(f"{where}: column '{column}': expected a list of test cases, got {show(cases)}")
    return cases


def livecodebench(row: Row, where: str) -> Row:
    question = need_text(row, where, "question_content")
    starter = optional_text(row, where, "starter_code")
    cases = decoded_cases(need(row, where, "public_test_cases"), where, "public_test_cases")
    public = len(cases)
    if row.get("private_test_cases") not in (None, ""):
        cases = cases + decoded_cases(row["private_test_cases"], where, "private_test_cases")
    for i, case in enumerate(cases):
        if not isinstance(case, dict):
            raise DataError(f"{where}: test case {i}: expected an object (input, output, testtype), got {show(case)}")
    for i, case in enumerate(cases):
        if case.get("testtype") not in ("stdin", "functional"):
            raise DataError(
                f"{where}: test case {i}: testtype: expected 'stdin' or 'functional', got {show(case.get('testtype'))}"
            )
    kinds = {c.get("testtype") for c in cases}
    if not cases or len(kinds) != 1:
        raise DataError(f"{where}: column 'public_test_cases': expected cases of one testtype, stdin or functional")
    out: Row = {"prelude": HARNESS_PRELUDE, "public_tests": public}
    if kinds == {"functional"}:
        metadata = parsed(row.get("metadata") or "{}", where, "metadata")
        fn = metadata.get("func_name") if isinstance(metadata, dict) else None
        if not isinstance(fn, str) or not fn:
            raise DataError(f"{where}: column 'metadata': functional cases need 'func_name'")
        out["entry_point"] = f"Solution.{fn}" if "class Solution" in starter else fn
        inputs = [str(c.get("input", "")) for c in cases]
        out["tests"] = call_cases(fn, inputs, [c.get("output") for c in cases], f"{where}: test cases", False)
        prompt = f"{question}\n\n{LIVECODEBENCH_CALL.format(starter=starter.rstrip())}"
    else:
        out["tests"] = [{"input": c.get("input"), "output": c.get("output")} for c in cases]
        out["compare"] = "decimals"  # its grade_stdio: a line that differs as text may be equal as decimals
        prompt = f"{question}\n\n{LIVECODEBENCH_STDIN}"
    solution = row.get("solution")  # not in LiveCodeBench's release: a column some copies add
    return {**row_id(row, "question_id"), "prompt": prompt, "solution": solution, **out}


PYTHON3 = 3  # CodeContests' language code for Python 3 (1 is Python 2, which does not run here)


def code_contests(row: Row, where: str) -> Row:
    tests: list[Row] = []
    public = 0
    for column in ("public_tests", "private_tests", "generated_tests"):  # public first: they lead the tests
        if row.get(column) is not None:
            inputs, outputs = io_lists(row[column], where, column)
            tests += [{"input": i, "output": o} for i, o in zip(inputs, outputs, strict=True)]
        if column == "public_tests":
            public = len(tests)
    if not tests:
        raise DataError(f"{where}: columns 'public_tests', 'private_tests', 'generated_tests': no test cases")
    solutions = parsed(row.get("solutions") or {}, where, "solutions")
    solution = None
    if isinstance(solutions, dict):
        languages, sources = solutions.get("language") or [], solutions.get("solution") or []
        solution = next((s for lang, s in zip(languages, sources, strict=False) if lang == PYTHON3), None)
    return {
        **row_id(row, "name"),
        "prompt": need_text(row, where, "description"),
        "solution": solution,
        "tests": tests,
        "public_tests": public,
    }


def primeintellect(row: Row, where: str) -> Row:
    info = parsed(need(row, where, "verification_info"), where, "verification_info")
    cases = info.get("test_cases") if isinstance(info, dict) else None
    if isinstance(cases, str):
        cases = parsed(cases, where, "verification_info.test_cases")
    if not isinstance(cases, list) or not cases or not all(isinstance(c, dict) for c in cases):
        raise DataError(f"{where}: column 'verification_info': expected 'test_cases', a non-empty list of objects")
    language = info.get("language", "python")
    if language not in ("python", "python3", None):
        raise DataError(f"{where}: column 'verification_info': language '{language}' (only Python runs here)")
    kinds = {c.get("type") for c in cases}
    prompt = need_text(row, where, "prompt", "problem", "problem_statement")
    out: Row = {"prelude": HARNESS_PRELUDE, "public_tests": 1}
    if kinds == {"function_call"}:
        fn = cases[0].get("fn_name")
        if not isinstance(fn, str) or not fn.isidentifier():
            raise DataError(f"{where}: column 'verification_info': function_call cases need 'fn_name'")
        out["entry_point"] = fn  # its verifier calls the method of the program's class that defines fn, if any
        at = f"{where}: column 'verification_info'"
        calls = call_cases(fn, [c.get("input") for c in cases], [c.get("output") for c in cases], at)
        out["tests"] = [{**call, "any_class": True} for call in calls]
    elif kinds == {"stdin_stdout"}:
        out["tests"] = [{"input": c.get("input"), "output": c.get("output")} for c in cases]
    else:
        found = ", ".join(sorted(map(str, kinds)))
        raise DataError(f"{where}: column 'verification_info': test case types {found} (stdin_stdout or function_call)")
    gold = row.get("gold_standard_solution")
    return {
        **row_id(row, "problem_id", "in_source_id"),
        "prompt": prompt,
        "solution": unfenced(gold) if isinstance(gold, str) and gold.strip() else None,
        **out,
    }
