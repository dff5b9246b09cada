"""Loaders are bounded before they allocate: a LiveCodeBench pickle's memo and its expansion, the collection of
parametrized tests, nesting and integer length. Each hostile file is refused in one line naming file:line, and the
ones that once took gigabytes are loaded in a child process under an address-space limit, whose peak memory is
checked, so the bound is proven rather than hoped for."""

from __future__ import annotations

import base64
import json
import os
import pickle
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from azr.data import AssertTest, load_tasks
from azr.data.formats.pickled import PickleError, load_plain
from azr.errors import DataError

STDIN_PUBLIC = json.dumps([{"input": "1\n", "output": "1\n", "testtype": "stdin"}])
LCB = {"question_id": "q1", "question_content": "Echo the number.", "starter_code": "", "metadata": "{}"}
LCB |= {"public_test_cases": STDIN_PUBLIC}
LIMIT_MB = 1024  # the child's address space: far below what the old loaders asked for
PEAK_MB = 300  # what a refused file may cost the child at most (the interpreter and azr.data included)

CHILD = """
import json, resource, sys
limit = {limit} << 20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from azr.data import AssertTest, load_tasks
from azr.errors import UserError
try:
    load_tasks(sys.argv[1], format=sys.argv[2] or None)
    outcome = "loaded"
except UserError as exc:
    outcome = str(exc)
# VmHWM: this process's own peak since its exec (ru_maxrss would carry the forking parent's over)
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({{"outcome": outcome, "peak_mb": peak >> 10}}))
"""


def packed(raw: bytes) -> str:
    return base64.b64encode(zlib.compress(raw, 9)).decode()


def write_rows(path, *rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def load_in_child(path, fmt: str = "livecodebench") -> dict:
    """load_tasks in a fresh interpreter under RLIMIT_AS: its outcome (the error's text) and its peak RSS (VmHWM)."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(limit=LIMIT_MB), str(path), fmt],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]  # a MemoryError or a traceback is a failure
    return json.loads(done.stdout.splitlines()[-1])


MEMO_INDEX = b"\x80\x04N" + b"r" + struct.pack("<I", 2**28) + b"0]."  # None put at memo index 2**28, an empty list
# one 1000-character line shared 400,000 times as a stdin case's input lines: 400 MB once joined
SHARED = pickle.dumps([{"input": ["x" * 1000] * 400_000, "output": "1", "testtype": "stdin"}], protocol=4)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (SHARED, "expands to more than 67,108,864 bytes"),
        (b"\x80\x04" + b"]" * 200 + b"a" * 199 + b".", "nested more than 100 levels deep"),
        (pickle.dumps([{"input": 10**5000, "output": "1", "testtype": "stdin"}]), "an integer of more than 4,300"),
    ],
    ids=["shared-references", "deep", "long-integer"],
)
def test_a_hostile_pickle_is_refused_in_one_line_within_a_bounded_memory(tmp_path, raw, message):
    path = write_rows(tmp_path / "lcb.jsonl", {**LCB, "private_test_cases": packed(raw)})
    got = load_in_child(path)
    assert got["outcome"].startswith(f"{path}:1: column 'private_test_cases': unreadable pickle: {message}"), got
    assert "\n" not in got["outcome"] and got["peak_mb"] < PEAK_MB, got


def test_a_memo_index_costs_its_entry_not_an_array_that_long(tmp_path):
    """Python's unpickler grows its memo array to the index a PUT names (2**28: two gigabytes)."""
    path = write_rows(tmp_path / "lcb.jsonl", {**LCB, "private_test_cases": packed(MEMO_INDEX)})
    got = load_in_child(path)
    assert got == {"outcome": "loaded", "peak_mb": got["peak_mb"]} and got["peak_mb"] < PEAK_MB


def test_three_stacked_parametrize_of_200_are_refused_before_they_are_made(tmp_path):
    values = "[" + ", ".join(map(str, range(200))) + "]"
    module = "import pytest\n\n" + "".join(f"@pytest.mark.parametrize('{v}', {values})\n" for v in "abc")
    module += "def test_sum(a, b, c):\n    assert a + b + c >= 0\n"
    path = write_rows(tmp_path / "kod.jsonl", {"id": "p", "prompt": "x", "tests": [{"pytest": module}]})
    got = load_in_child(path, "")
    assert got["outcome"] == (
        f"{path}:1: field 'tests[0]': more than 10,000 tests in one module (test_sum: 200 x 200 x 200 "
        "parametrized cases; AZR_MAX_MODULE_TESTS=N raises it)"
    )
    assert got["peak_mb"] < PEAK_MB, got


def test_the_plain_data_reader_reads_what_livecodebench_writes_and_refuses_objects():
    cases = json.dumps([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}])
    for protocol in range(6):
        assert load_plain(pickle.dumps(cases, protocol=protocol), 1 << 20) == cases
    value = {"a": [1, 2.5, None, True, b"x", ("t", "u")], "b": {"c": "d"}}
    assert load_plain(pickle.dumps(value), 1 << 20) == value
    shared = ["s"] * 3
    assert load_plain(pickle.dumps([shared, shared]), 1 << 20) == [shared, shared]
    with pytest.raises(PickleError, match=r"^refused to load (posix|os)\.getcwd"):
        load_plain(pickle.dumps(__import__("os").getcwd), 1 << 20)
    cycle: list = []
    cycle.append(cycle)
    with pytest.raises(PickleError, match="a container that holds itself"):
        load_plain(pickle.dumps(cycle), 1 << 20)
    with pytest.raises(PickleError, match="malformed pickle"):
        load_plain(b"\x80\x04]", 1 << 20)


def test_a_livecodebench_case_that_is_no_object_is_one_line(tmp_path):
    for cases, shown in (([["1"], 5], r"0: .* got \['1'\]"), ([{"input": "1\n", "output": "1\n"}, 7], "1: .* got 7")):
        path = write_rows(tmp_path / "lcb.jsonl", {**LCB, "public_test_cases": json.dumps(cases)})
        with pytest.raises(DataError, match=rf"^{path}:1: test case {shown}$"):
            load_tasks(path, format="livecodebench")
    deep = "[" * 1_000_000 + "]" * 1_000_000
    path = write_rows(tmp_path / "deep.jsonl", {**LCB, "public_test_cases": deep})
    with pytest.raises(DataError, match=rf"^{path}:1: column 'public_test_cases': nested more than 100 levels deep"):
        load_tasks(path, format="livecodebench")


def test_a_test_too_deep_to_compile_is_one_line(tmp_path):
    test = "assert " + "+".join(["1"] * 100_000) + " == 100000"
    path = write_rows(tmp_path / "t.jsonl", {"id": "a", "prompt": "p", "tests": [test]})
    with pytest.raises(DataError, match=rf"^{path}:1: field 'tests\[0\]': not valid Python: nested too deeply"):
        load_tasks(path)


def test_tests_of_two_kinds_are_refused_at_load_even_when_already_tagged(tmp_path):
    from azr.data import StdioCase, encode

    tests = [encode(StdioCase("1\n", "1\n")), "assert f(1) == 1"]
    path = write_rows(tmp_path / "t.jsonl", {"id": "a", "prompt": "p", "tests": tests})
    with pytest.raises(DataError, match="stdin/stdout cases and assert tests in one task; use one kind"):
        load_tasks(path)
    path = write_rows(tmp_path / "m.jsonl", {"id": "a", "prompt": "p", "tests": ["\x00stdio:{}"]})
    with pytest.raises(DataError, match=r"tests\[0\]': a malformed stdin/stdout case"):
        load_tasks(path)


def test_a_column_map_reads_json_lists_only_where_a_list_belongs(tmp_path):
    row = {"q": '["a", "b"] are the names: print them.', "t": '["assert f() == 1"]', "s": "def f():\n    return 1\n"}
    path = write_rows(tmp_path / "t.jsonl", row)
    (task,) = load_tasks(path, {"prompt": "q", "tests": "t", "solution": "s"})
    assert task.prompt == row["q"] and task.tests == [AssertTest("assert f() == 1")]
    (task,) = load_tasks(
        write_rows(tmp_path / "s.jsonl", {**row, "s": '["def f():\\n    return 1\\n"]'}),
        {
            "prompt": "q",
            "tests": "t",
            "solution": "s",
        },
    )
    assert task.solution == "def f():\n    return 1\n"  # APPS's solutions, JSON text: the first
    for text, why in (("[" * 200 + "]" * 200, "nested more than 100 levels deep"), ("[" + "9" * 5000 + "]", "digits")):
        path = write_rows(tmp_path / "bad.jsonl", {**row, "t": text})
        with pytest.raises(DataError, match=rf"^{path}:1: column 't': .*{why}"):
            load_tasks(path, {"prompt": "q", "tests": "t"})


def test_a_checker_file_is_a_bounded_read_of_a_regular_file(tmp_path, monkeypatch):
    from azr.data import read_checker

    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)  # opening it would wait for a writer forever
    for path, why in ((Path("/dev/zero"), "a character device, not a regular file"), (fifo, "a FIFO")):
        with pytest.raises(DataError, match=rf"^{path}: {why}"):
            read_checker(path)
    big = tmp_path / "big.py"
    big.write_text("x = 1\n" * 1000)
    monkeypatch.setenv("AZR_MAX_CHECKER_BYTES", "100")
    with pytest.raises(DataError, match=rf"^{big}: larger than the limit of 100 bytes \(AZR_MAX_CHECKER_BYTES=N"):
        read_checker(big)


def test_an_oracle_value_python_cannot_print_is_no_expected_value():
    from azr.data.formats import evalplus
    from azr.data.formats.evalplus import NO_VALUE, oracle_outputs

    mark = evalplus._MARK
    assert oracle_outputs(f"{mark}0x{'f' * 5000}\n{mark}[1, 2]\n", 2) == [NO_VALUE, [1, 2]]
