"""Public code data sets through `azr data validate`: each source's published file, its reference solutions, and
the same tasks with solutions swapped between tasks and with one operator mutated; prints a figures table.

On a machine with internet it downloads each source's public file at its pinned revision (the SOURCES table: files
on the Hugging Face hub, or in the release repositories on GitHub), checked against its pinned size and SHA-256 as it
arrives; `--data DIR` uses files already there instead, named `<source>.jsonl`, `.json`, `.parquet` or `.jsonl.gz`,
checked the same way (`--no-verify` measures them whatever they hold: rows of one's own, or a partial copy). A
source with no hash pinned runs only with `--unpinned`; `--pins` lists each pin and where it came from. Each run
validates the first `--limit` rows of a source:
  - refs: the file's own reference solutions (all should pass: the source's own harness passes them);
  - swapped: each task given the next task's solution (all should fail);
  - mutated: each solution with its first operator that has a counterpart changed (`+` to `-`, `<` to `>=`, ...);
    a mutant that still passes is either equivalent or on a path the tests never take.
A source whose release carries no solutions (LiveCodeBench) is loaded and counted, nothing more. The remainder
(references that fail) is listed with the first reason azr gives. Then each set's own comparison rules, on its rows
(`RULES`): BigCodeBench's references as whole functions (code-RL copies' shape: the test and the code as one module,
under the prompt's imports), HumanEval+ rows without `test` (the reference as oracle) and EvalPlus's float rule
(float results scaled by 1 + 1e-9 pass, by 1 + 1e-3 fail), LiveCodeBench's decimal stdout (expected outputs with
zeros added pass, with a digit changed fail) and PrimeIntellect's class methods (gold solutions that define
`fn_name` in a class pass). Run from the repository root:
    python scripts/public_sets.py [--data DIR] [--only NAME,...] [--limit N] [--workers N] [--package NAME]...
                                  [--unpinned] [--pins]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import http.client
import io
import json
import re
import subprocess
import sys
import tempfile
import tokenize
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HUB = "https://huggingface.co/datasets"
RAW = "https://raw.githubusercontent.com"


@dataclass(frozen=True)
class Source:
    """One public set: its format, where its file is (`{rev}` in the URL stands for `revision`), the column holding
    its reference solutions (None: the release has none), and the pin a download must match: `revision` is a commit
    where one is known, else a branch (then only a hash could hold the file still). `sha256` None means no hash is
    known for the file; `pinned_by` says where a hash came from: "computed" (this project hashed the very
    file that URL serves, from a copy of its repository at `revision`) or "published" (public code that downloads
    the same revision states it; not recomputed here)."""

    format: str
    url: str
    column: str | None
    revision: str | None = None
    sha256: str | None = None
    size: int | None = None
    pinned_by: str | None = None

    @property
    def location(self) -> str:
        return self.url.format(rev=self.revision or "main")


SOURCES: dict[str, Source] = {
    "mbpp+": Source(
        "mbpp+",
        f"{RAW}/evalplus/mbppplus_release/{{rev}}/MbppPlus.jsonl.gz",
        "canonical_solution",
        revision="64fc4195b858a17cdfdb3324f0baf37939144e14",
        sha256="af43697e8791c4c149bdfd6b489d8b5412507551ac20e28a439f650b8225db63",
        size=336032,
        pinned_by="computed",
    ),
    "humaneval+": Source(
        "humaneval+",
        f"{RAW}/evalplus/humanevalplus_release/{{rev}}/HumanEvalPlus.jsonl.gz",
        "canonical_solution",
        revision="200defce9e3429d28ca215b6dd061c0f7f31c18b",
        sha256="272720b90ac375502c8ed23cd791c2a93dfb22a911641a494da74a426c09f101",
        size=925932,
        pinned_by="computed",
    ),
    "livecodebench": Source(
        "livecodebench",
        f"{HUB}/livecodebench/code_generation_lite/resolve/{{rev}}/test6.jsonl",
        None,
        revision="0fe84c3912ea0c4d4a78037083943e8f0c4dd505",
        sha256="bb4c364f71921c4495a6ad15abe1a927350b720009f4933e2e71f8af0f6fd1f5",
        size=134303240,
        pinned_by="published",
    ),
    "kodcode": Source(
        "kodcode", f"{HUB}/KodCode/KodCode-Light-RL-10K/resolve/{{rev}}/data/train-00000-of-00001.parquet", "solution"
    ),
    "bigcodebench": Source(
        "bigcodebench",
        f"{HUB}/bigcode/bigcodebench/resolve/{{rev}}/data/v0.1.4-00000-of-00001.parquet",
        "canonical_solution",
        revision="b74c0d0bf70d2c0bc459be537895cca163007f1a",
        sha256="d9a4965821c9507ebdfb551c288656b2d5fe553234f5183044333ca8a4018267",
        pinned_by="published",
    ),
    "primeintellect": Source(
        "primeintellect",
        f"{HUB}/PrimeIntellect/verifiable-coding-problems/resolve/{{rev}}/default/train/0000.parquet",
        "gold_standard_solution",
        revision="refs%2Fconvert%2Fparquet",
    ),
    "code_contests": Source(
        "code_contests",
        f"{HUB}/deepmind/code_contests/resolve/{{rev}}/data/test-00000-of-00001-9c49eeff30aacaa8.parquet",
        "solutions",
        revision="802411c3010cb00d1b05bad57ca77365a3c699d6",
        sha256="aa426cbdb202bf8703b658bcb31fd1878ca7cfd33ca07d3b703dc94ca6a2b651",
        size=63077400,
        pinned_by="published",
    ),
    "apps": Source("apps", f"{HUB}/codeparrot/apps/resolve/{{rev}}/test.jsonl", "solutions"),
}
# A download larger than this, for a source whose size is not pinned, is stopped (the largest pinned file is
# LiveCodeBench's 134 MB).
MAX_DOWNLOAD = 1 << 30
SUFFIXES = (".jsonl", ".json", ".parquet", ".jsonl.gz")
SUMMARY = re.compile(r"(\d+) tasks, (\d+) passed, (\d+) failed, (\d+) without a reference solution")
SWAPS = {"+": "-", "-": "+", "*": "+", "//": "*", "/": "*", "%": "*", "<": ">=", ">": "<=", "<=": ">", ">=": "<"}
SWAPS |= {"==": "!=", "!=": "==", "and": "or", "or": "and", "True": "False", "False": "True"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="a folder holding the files already (no download)")
    parser.add_argument("--only", help="comma-separated source names (default: every source found)")
    parser.add_argument("--limit", type=int, default=0, help="first N rows of each source (default: all)")
    parser.add_argument("--workers", type=int, help="sandbox workers for azr data validate")
    parser.add_argument(
        "--package", action="append", default=[], help="offer this installed package to programs (repeatable)"
    )
    parser.add_argument("--unpinned", action="store_true", help="measure a source with no SHA-256 pinned yet")
    parser.add_argument(
        "--no-verify",
        action="store_true",
        help="with --data: measure the files whatever their hash (the figures then stand for those files only)",
    )
    parser.add_argument("--pins", action="store_true", help="list each source's revision and hash, and stop")
    args = parser.parse_args(argv)
    if args.pins:
        print_pins()
        return 0
    names = args.only.split(",") if args.only else list(SOURCES)
    unknown = [n for n in names if n not in SOURCES]
    if unknown:
        parser.error(f"unknown source {unknown[0]!r} (one of {', '.join(SOURCES)})")
    if args.no_verify and not args.data:
        parser.error("--no-verify needs --data: a download is always checked against its pin")
    figures = []
    with tempfile.TemporaryDirectory(prefix="azr-public-") as tmp:
        for name in names:
            if args.data:
                path = _local(args.data, name)
                if path is None:
                    print(f"{name}: no file in {args.data}", file=sys.stderr)
                    continue
                problem = None if args.no_verify else check_pin(name, path, args.unpinned)
            else:
                path, problem = download(name, Path(tmp), args.unpinned)
            if problem:
                print(problem, file=sys.stderr)
                return 2
            figures.append(_measure(name, path, Path(tmp), args.limit, _options(args)))
    _print_table(figures)
    if args.no_verify:
        print("(--no-verify: the files were not checked against the pins; the figures stand for these files only)")
    return 0


def check_pin(name: str, path: Path, unpinned: bool) -> str | None:
    """Why `path` may not stand for source `name` (its SHA-256 is not the pinned one, or none is pinned and
    `unpinned` is not set); None when it may."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return _pin_problem(name, str(path), digest.hexdigest(), unpinned)


def _pin_problem(name: str, what: str, digest: str, unpinned: bool) -> str | None:
    pinned = SOURCES[name].sha256
    if pinned is not None and digest != pinned:
        return f"{name}: {what} has SHA-256 {digest}, not the pinned {pinned}: the data set changed under its URL"
    if pinned is None and not unpinned:
        return f"{name}: no SHA-256 pinned; {what} has {digest} (pin it in SOURCES, or pass --unpinned)"
    return None


def download(name: str, folder: Path, unpinned: bool) -> tuple[Path, str | None]:
    """Source `name`'s file, fetched into `folder` and checked as it arrives: its path, or why it is refused. A file
    refused (its hash or size not the pinned one, the transfer failed) is deleted: only a checked file is ever under
    its final name."""
    source = SOURCES[name]
    url = source.location
    suffix = next(s for s in sorted(SUFFIXES, key=len, reverse=True) if url.endswith(s))
    path = folder / f"{name}{suffix}"
    partial = path.with_name(path.name + ".part")
    limit = source.size if source.size is not None else MAX_DOWNLOAD
    digest, size = hashlib.sha256(), 0
    print(f"{name}: downloading {url}", file=sys.stderr)
    try:
        with urllib.request.urlopen(url, timeout=300) as reply, partial.open("wb") as out:
            while block := reply.read(1 << 20):
                size += len(block)
                if size > limit:
                    raise _Refused(f"{name}: {url} sent more than the {limit} bytes pinned")
                digest.update(block)
                out.write(block)
        if source.size is not None and size != source.size:
            raise _Refused(f"{name}: {url} sent {size} bytes, not the {source.size} pinned")
        problem = _pin_problem(name, url, digest.hexdigest(), unpinned)
        if problem:
            raise _Refused(problem)
    except _Refused as refused:
        partial.unlink(missing_ok=True)
        return path, str(refused)
    except (OSError, http.client.HTTPException) as error:  # URLError and timeouts are OSErrors
        partial.unlink(missing_ok=True)
        return path, f"{name}: {url}: download failed: {getattr(error, 'reason', None) or error}"
    partial.replace(path)
    return path, None


class _Refused(Exception):
    """A download that may not stand for its source (the message says why)."""


def print_pins() -> None:
    """Each source's revision, size and SHA-256, and where the hash came from."""
    for name, source in SOURCES.items():
        pin = f"sha256 {source.sha256} ({source.pinned_by})" if source.sha256 else "no sha256 pinned"
        print(f"{name:<15}{source.revision or 'main':<42}{pin}\n{'':<15}{source.location}")


def _options(args: argparse.Namespace) -> list[str]:
    """`azr data validate` options every run of a source gets."""
    options = ["--workers", str(args.workers)] if args.workers else []
    for package in args.package:
        options += ["--package", package]
    return options


def _local(folder: Path, name: str) -> Path | None:
    return next((folder / f"{name}{s}" for s in SUFFIXES if (folder / f"{name}{s}").is_file()), None)


def read_rows(path: Path) -> list[dict[str, Any]]:
    """A downloaded file's rows, as published (parquet through pyarrow, which azr's data loading uses too)."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        text = f.read()
    if path.suffix == ".json":
        return json.loads(text)
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def _measure(name: str, path: Path, tmp: Path, limit: int, options: list[str]) -> dict[str, Any]:
    fmt, column = SOURCES[name].format, SOURCES[name].column
    rows = read_rows(path)
    rows = rows[:limit] if limit else rows
    if column is None and any(r.get("solution") for r in rows):
        column = "solution"  # a copy of the release that adds a solution column
    refs = _validate(_write(tmp / f"{name}.refs.jsonl", rows), fmt, options)
    figure: dict[str, Any] = {"source": name, "format": fmt, "rows": len(rows), "refs": refs}
    figure["rules"] = rule_checks(name, rows, tmp, options)
    if column is None or refs["passed"] + refs["failed"] == 0:
        return figure
    solutions = [_solution(r, column) for r in rows]
    passing = [i for i, r in enumerate(rows) if _id_of(r, fmt) not in refs["failing"] and solutions[i]]
    swapped = [
        _with_solution(rows[i], column, solutions[passing[(k + 1) % len(passing)]]) for k, i in enumerate(passing)
    ]
    figure["swapped"] = _validate(_write(tmp / f"{name}.swapped.jsonl", swapped), fmt, options)
    figure["swapped"]["survivors"] = _survivors([rows[i] for i in passing], fmt, figure["swapped"])
    mutated, kept = [], []
    for i in passing:
        mutant = mutate(solutions[i])
        if mutant is not None:
            mutated.append(_with_solution(rows[i], column, mutant))
            kept.append(rows[i])
    if mutated:
        figure["mutated"] = _validate(_write(tmp / f"{name}.mutated.jsonl", mutated), fmt, options)
        figure["mutated"]["survivors"] = _survivors(kept, fmt, figure["mutated"])
    return figure


def _survivors(rows: list[dict[str, Any]], fmt: str, run: dict[str, Any]) -> list[str]:
    return [i for i in (_id_of(r, fmt) for r in rows) if i and i not in run.get("failing", {})]


def _id_of(row: dict[str, Any], fmt: str) -> str:
    for key in ("task_id", "question_id", "problem_id", "name", "in_source_id", "id"):
        if row.get(key) is not None:
            return str(row[key])
    return ""


def _solution(row: dict[str, Any], column: str) -> str | None:
    value = row.get(column)
    if column == "solutions" and isinstance(value, dict):  # CodeContests: the first Python 3 one
        pairs = zip(value.get("language") or [], value.get("solution") or [], strict=False)
        return next((s for lang, s in pairs if lang == 3), None)
    if column == "solutions" and isinstance(value, str):  # APPS: JSON text of a list
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if isinstance(value, list):
        return value[0] if value else None
    return value if isinstance(value, str) else None


def _with_solution(row: dict[str, Any], column: str, code: str) -> dict[str, Any]:
    if column == "solutions" and isinstance(row.get(column), dict):
        return {**row, column: {"language": [3], "solution": [code]}}
    if column == "solutions":
        return {**row, column: json.dumps([code])}
    if column == "gold_standard_solution":
        return {**row, column: f"```python\n{code}\n```"}
    return {**row, column: code}


def mutate(code: str) -> str | None:
    """`code` with its first operator that has a counterpart in SWAPS changed; None when it has none."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    lines = code.splitlines(keepends=True)
    for tok in tokens:
        if tok.type in (tokenize.OP, tokenize.NAME) and tok.string in SWAPS and tok.start[0] == tok.end[0]:
            row, col = tok.start[0] - 1, tok.start[1]
            line = lines[row]
            lines[row] = line[:col] + SWAPS[tok.string] + line[tok.end[1] :]
            return "".join(lines)
    return None


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, default=str) + "\n")
    return path


def _validate(path: Path, fmt: str, options: list[str]) -> dict[str, Any]:
    command = [sys.executable, "-m", "azr.cli", "data", "validate", str(path), "--format", fmt, *options]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = SUMMARY.search(done.stdout)
    bare = re.search(r"(\d+) tasks, none with a reference solution", done.stderr)
    if found is None and bare is not None:
        count = int(bare.group(1))
        return {"tasks": count, "passed": 0, "failed": 0, "without": count, "failing": {}}
    fails = [line for line in done.stdout.splitlines() if line.startswith("FAIL ")]
    if found is None:
        reason = (done.stderr.strip().splitlines() or ["no summary"])[-1]
        return {"tasks": 0, "passed": 0, "failed": 0, "without": 0, "failing": {}, "error": reason}
    tasks, passed, failed, without = map(int, found.groups())
    failing = {line[5:].split(":", 1)[0]: line.split(":", 1)[1].strip() for line in fails}
    return {"tasks": tasks, "passed": passed, "failed": failed, "without": without, "failing": failing}


# Each data set's own comparison rules, checked on its published rows (SPEC_FUNCTIONS.md, "Each format's rules"):
# every check derives programs that the set's own harness passes (or fails) and counts how azr grades them.
def rule_checks(name: str, rows: list[dict[str, Any]], tmp: Path, options: list[str]) -> list[dict[str, Any]]:
    """(check, passed, total, expected "pass" or "fail") figures of the rules `name`'s harness has."""
    checks = RULES.get(name)
    return checks(rows, tmp, options) if checks else []


def _bigcodebench_rules(rows: list[dict[str, Any]], tmp: Path, options: list[str]) -> list[dict[str, Any]]:
    """References as code-RL copies ship them (a whole function, without the prompt's imports and constants):
    BigCodeBench passes them, as its test and the code run as one module under the prompt's imports."""
    whole = []
    for row in rows:
        signature = _signature(row.get("code_prompt") or "", row.get("entry_point") or "task_func")
        if signature and isinstance(row.get("canonical_solution"), str):
            whole.append({**row, "canonical_solution": signature + row["canonical_solution"]})
    run = _validate(_write(tmp / "bigcodebench.whole.jsonl", whole), "bigcodebench", options)
    return [_figure("whole-function references pass", run["passed"], run["passed"] + run["failed"], "pass", run)]


def _signature(code_prompt: str, entry: str) -> str:
    """The `def entry(...):` lines of a code prompt, without what comes before (imports, constants)."""
    at = code_prompt.find(f"def {entry}(")
    return code_prompt[at:].rstrip() + "\n" if at >= 0 else ""


def _humaneval_plus_rules(rows: list[dict[str, Any]], tmp: Path, options: list[str]) -> list[dict[str, Any]]:
    """EvalPlus's released rows have no `test`: the reference is the oracle of their inputs. Its evaluator takes an
    output within `allclose(rtol=1e-07, atol=1e-06)` from the first float output of a column on (base, then plus):
    with every float result of the reference scaled by 1 + 1e-9, each test that compares within a tolerance
    passes; scaled by 1 + 1e-3, the task fails. (A test before any float output compares exactly, in EvalPlus too:
    such a test, where the output mixes floats with other values, fails at 1 + 1e-9 in both.)"""
    from azr.config import SandboxConfig
    from azr.data import load_tasks
    from azr.rewards import grade_many, sandbox_oracle
    from azr.sandbox import Limits, open_pool

    bare = [{k: v for k, v in row.items() if k != "test"} for row in rows]
    path = _write(tmp / "humaneval+.no-test.jsonl", bare)
    run = _validate(path, "humaneval+", options)
    figures = [_figure("references pass without `test`", run["passed"], run["passed"] + run["failed"], "pass", run)]
    tasks = load_tasks(path, format="humaneval+", oracle=sandbox_oracle(SandboxConfig()))
    floats = [t for t in tasks if t.solution and (t.atol is not None or any(_tolerant(test) for test in t.tests))]
    with open_pool("bwrap", workers=2) as pool:
        pairs = [(t, _scaled(t.solution or "", t.entry_point or "", "1e-9")) for t in floats]
        grades = grade_many(pairs, pool, Limits(wall_s=60.0))
        verdicts = [(t, g.per_test or [False] * len(t.tests)) for t, g in zip(floats, grades, strict=True)]
        within = [ok for t, per in verdicts for test, ok in zip(t.tests, per, strict=True) if _tolerant(test, t)]
        figures.append(_figure("tolerant tests, float results x (1 + 1e-9): pass", sum(within), len(within), "pass"))
        pairs = [(t, _scaled(t.solution or "", t.entry_point or "", "1e-3")) for t in floats]
        passed = sum(g.passed for g in grade_many(pairs, pool, Limits(wall_s=60.0)))
        figures.append(_figure("tasks, float results x (1 + 1e-3): pass", passed, len(floats), "fail"))
    return figures


def _tolerant(test: Any, task: Any = None) -> bool:
    """Whether a test compares its floats within a tolerance: its own (EvalPlus's rule for float outputs), or
    `task`'s (a task with a non-zero `atol`)."""
    from azr.data import AssertTest

    own = isinstance(test, AssertTest) and test.atol is not None
    return own or (task is not None and task.atol is not None and isinstance(test, AssertTest))


def _scaled(solution: str, entry: str, scale: str) -> str:
    """The solution with each float it returns (alone, or in a list or tuple) scaled by 1 + `scale`."""
    return (
        f"{solution}\n\n_azr_reference = {entry}\n\n\ndef {entry}(*args, **kwargs):\n"
        f"    value = _azr_reference(*args, **kwargs)\n"
        f"    grow = lambda v: v * (1 + {scale}) if type(v) is float else v\n"
        f"    return type(value)(map(grow, value)) if type(value) in (list, tuple) else grow(value)\n"
    )


_DECIMAL = re.compile(r"^-?\d+\.\d+$")


def _livecodebench_rules(rows: list[dict[str, Any]], tmp: Path, options: list[str]) -> list[dict[str, Any]]:
    """LiveCodeBench's grader takes a line that differs as text when its tokens are equal as decimals: a program
    that prints each expected output with three more zeros after every decimal passes, one that changes a digit
    of it fails."""
    from azr.data import StdioCase, load_tasks
    from azr.rewards import grade_many
    from azr.sandbox import Limits, open_pool

    tasks = load_tasks(_write(tmp / "livecodebench.rules.jsonl", rows), format="livecodebench")
    chosen = []
    for task in tasks:
        cases = [t for t in task.tests if isinstance(t, StdioCase)]
        if task.stdio and any(_DECIMAL.match(tok) for c in cases if c for tok in c.output.split()):
            chosen.append((task, {c.input: c.output for c in cases if c}))
    figures = []
    with open_pool("bwrap", workers=2) as pool:
        for label, edit, expect in (("zeros added", _padded, "pass"), ("a digit changed", _changed, "fail")):
            pairs = [(task, _lookup({i: edit(o) for i, o in table.items()})) for task, table in chosen]
            passed = sum(g.passed for g in grade_many(pairs, pool, Limits(wall_s=60.0)))
            figures.append(_figure(f"decimal outputs with {label} pass", passed, len(chosen), expect))
    return figures


def _padded(text: str) -> str:
    return re.sub(r"(?<![\w.])(-?\d+\.\d+)(?![\w.])", r"\g<1>000", text)


def _changed(text: str) -> str:
    return re.sub(r"(?<![\w.])(-?\d+\.\d*)(\d)(?![\w.])", lambda m: m[1] + str((int(m[2]) + 1) % 10), text, count=1)


def _lookup(table: dict[str, str]) -> str:
    return f"import sys\nprint({table!r}.get(sys.stdin.read(), ''), end='')\n"


def _primeintellect_rules(rows: list[dict[str, Any]], tmp: Path, options: list[str]) -> list[dict[str, Any]]:
    """PrimeIntellect's verifier calls `fn_name` as the method of the program's class that defines it: the gold
    solutions of function_call rows whose code holds such a class pass."""
    chosen = []
    for row in rows:
        info = row.get("verification_info")
        info = json.loads(info) if isinstance(info, str) else info
        cases = (info or {}).get("test_cases") or []
        gold = row.get("gold_standard_solution") or ""
        fn = cases[0].get("fn_name") if cases and isinstance(cases[0], dict) else None
        if (
            fn
            and all(c.get("type") == "function_call" for c in cases)
            and re.search(rf"class \w+.*def {fn}\(", gold, re.S)
        ):
            chosen.append(row)
    run = _validate(_write(tmp / "primeintellect.methods.jsonl", chosen), "primeintellect", options)
    return [_figure("class-method gold solutions pass", run["passed"], run["passed"] + run["failed"], "pass", run)]


def _figure(check: str, passed: int, total: int, expect: str, run: dict[str, Any] | None = None) -> dict[str, Any]:
    figure = {"check": check, "passed": passed, "total": total, "expect": expect}
    if run and run.get("failing"):
        figure["failing"] = run["failing"]
    return figure


RULES = {
    "bigcodebench": _bigcodebench_rules,
    "humaneval+": _humaneval_plus_rules,
    "livecodebench": _livecodebench_rules,
    "primeintellect": _primeintellect_rules,
}


def _print_table(figures: list[dict[str, Any]]) -> None:
    head = f"{'source':<15}{'format':<15}{'tasks':>6}{'refs pass':>11}{'swapped fail':>14}{'mutated fail':>14}"
    print(head)
    print("-" * len(head))
    for f in figures:
        refs = f["refs"]
        if "error" in refs:
            print(f"{f['source']:<15}{f['format']:<15}  not loaded: {refs['error']}")
            continue
        checked = refs["passed"] + refs["failed"]
        cells = [f"{refs['passed']}/{checked}" if checked else "no refs"]
        for key in ("swapped", "mutated"):
            run = f.get(key)
            cells.append(f"{run['failed']}/{run['passed'] + run['failed']}" if run and "error" not in run else "-")
        print(f"{f['source']:<15}{f['format']:<15}{refs['tasks']:>6}{cells[0]:>11}{cells[1]:>14}{cells[2]:>14}")
    for f in figures:
        for rule in f.get("rules", []):
            verdict = "as its harness" if (rule["passed"] == rule["total"]) == (rule["expect"] == "pass") else "NOT"
            print(
                f"  {f['source']}: {rule['check']}: {rule['passed']}/{rule['total']} ({verdict}: all {rule['expect']})"
            )
            for task, why in list(rule.get("failing", {}).items())[:8]:
                print(f"    {task}: {why[:160]}")
    for f in figures:
        for task, why in f["refs"].get("failing", {}).items():
            print(f"  {f['source']}: reference of {task} fails: {why[:160]}")
        for key in ("swapped", "mutated"):
            run = f.get(key) or {}
            if run and "error" not in run and run["passed"]:
                few = ", ".join(run.get("survivors", [])[:8])
                print(f"  {f['source']}: {run['passed']} {key} solutions still pass: {few}")


if __name__ == "__main__":
    sys.exit(main())
