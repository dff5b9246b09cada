"""`azr data audit`: the last line, the files it writes, its exit codes and the hardened file."""

from __future__ import annotations

import json
import os
import re

import pytest

from azr.data import AssertTest, read_jsonl

SOLUTION = """def clamp_sum(xs, limit):
    total = 0
    for x in xs:
        if x > 0 and total + x <= limit:
            total += x
    return min(total, limit)
"""
LAST = re.compile(r"kill rate \d\.\d\d over \d+ tasks \(\d+ mutants, \d+ equivalent, \d+ probes passed\)")


def _row(id_, tests, solution=SOLUTION):
    return json.dumps({"id": id_, "prompt": "<b>sum</b>", "tests": tests, "solution": solution}) + "\n"


def test_a_file_whose_tests_check_something_exits_0_and_writes_its_records(cli, write, tmp_path):
    path = write("t.jsonl", _row("<script>alert(1)</script>", ["assert clamp_sum([2, 3], 4) == 2"]))
    code, out, _ = cli("data", "audit", path, "--out", tmp_path / "out", "--workers", "2")
    assert code == 0, out
    assert LAST.fullmatch(out.strip().splitlines()[-1])
    (record,) = [json.loads(line) for line in (tmp_path / "out" / "audit.jsonl").read_text().splitlines()]
    assert set(record) >= {"id", "kill_rate", "mutants", "killed", "equivalent", "survivors", "probes_passed"}
    assert record["mutants"] >= 5 and isinstance(record["survivors"], list)
    page = (tmp_path / "out" / "audit.html").read_text()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert '"xtitle":"kill rate"' in page


def test_a_probe_that_passes_exits_1_and_is_named(cli, write):
    path = write("t.jsonl", _row("vacuous", ["clamp_sum([1], 2)"]))
    code, out, _ = cli("data", "audit", path, "--workers", "2")
    assert code == 1 and "PROBE vacuous: passed" in out and "returns None" in out
    assert LAST.fullmatch(out.strip().splitlines()[-1])


def test_harden_writes_azr_tasks_and_prints_both_kill_rates(cli, write, tmp_path):
    path = write("t.jsonl", _row("weak", ["assert clamp_sum([], 0) == 0"]))
    out_file = tmp_path / "hard.jsonl"
    code, out, _ = cli("data", "audit", path, "--harden", out_file, "--workers", "2")
    lines = out.strip().splitlines()
    before = float(next(x for x in lines if x.startswith("before:")).split()[3])
    after = float(next(x for x in lines if x.startswith("after:")).split()[3])
    assert after > before and code == 1  # the weak file lets the empty-value probe through
    (task,) = read_jsonl(out_file)
    assert len(task.tests) > 1 and task.tests[0] == AssertTest("assert clamp_sum([], 0) == 0")
    code, out, _ = cli("data", "validate", out_file, "--workers", "2")
    assert code == 0, out


def test_user_errors_exit_2_before_anything_runs(cli, write, tmp_path):
    assert cli("data", "audit", tmp_path / "missing.jsonl")[0] == 2
    path = write("t.jsonl", _row("a", ["assert clamp_sum([], 0) == 0"]))
    assert cli("data", "audit", path, "--harden", tmp_path / "h.txt")[0] == 2
    assert cli("data", "audit", path, "--format", "nope")[0] == 2
    none = write("n.jsonl", json.dumps({"id": "a", "prompt": "p", "tests": ["assert 1"]}) + "\n")
    code, _, err = cli("data", "audit", none)
    assert code == 2 and "no task has a reference solution" in err


def test_an_evalplus_file_is_audited_with_its_plus_inputs_graded(cli, write):
    """MBPP+ rows carry plus inputs without outputs: the audit reads them with the reference run as oracle, as
    data validate does, so a mutant only the plus inputs catch (`>` for `>=` at 10) is killed."""
    row = {
        "task_id": "Mbpp/900",
        "prompt": '"""\nWrite big(x): whether x is at least 10.\n"""\nassert big(20) == True\n',
        "entry_point": "big",
        "canonical_solution": "def big(x):\n    return x >= 10\n",
        "assertion": "\nassert big(20) == True\n",
        "base_input": [[20]],
        "plus_input": [[10], [9], [0]],
        "atol": 0,
    }
    path = write("plus.jsonl", json.dumps(row) + "\n")
    code, out, _ = cli("data", "audit", path, "--format", "mbpp+", "--workers", "2")
    assert code == 0, out
    assert "kill rate 1.00 over 1 tasks" in out.strip().splitlines()[-1], out


CREDENTIAL_LOOKING = (
    "assert clamp_sum([], 0) == 0  # Authorization: Bearer abcdefgh12345 http://user:pw@host/x?key=0123456789"
)


def test_harden_writes_the_tests_verbatim_even_where_they_look_like_credentials(cli, write, tmp_path):
    """Redaction is for logs and reports: a hardened task file holds the tests as written, so every reference
    still passes its own tests."""
    path = write("t.jsonl", _row("weak", [CREDENTIAL_LOOKING]))
    out_file = tmp_path / "hard.jsonl"
    cli("data", "audit", path, "--harden", out_file, "--workers", "2")
    (task,) = read_jsonl(out_file)
    assert task.tests[0] == AssertTest(CREDENTIAL_LOOKING) and "<redacted>" not in out_file.read_text()


def test_harden_onto_its_own_input_is_refused_before_the_audit(cli, write, tmp_path):
    path = write("t.jsonl", _row("weak", ["assert clamp_sum([], 0) == 0"]))
    before = path.read_text()
    link = tmp_path / "link.jsonl"
    link.symlink_to(path)
    for target in (path, link):
        code, out, err = cli("data", "audit", path, "--harden", target, "--workers", "2")
        assert (code, out) == (2, "")
        assert err.strip().splitlines() == [
            f"azr: error: --harden {target}: is the task file being audited; write the hardened tasks elsewhere"
        ]
    assert path.read_text() == before


def test_out_and_harden_targets_are_refused_before_the_audit(cli, write, tmp_path):
    path = write("t.jsonl", _row("weak", ["assert clamp_sum([], 0) == 0"]))
    a_file = write("file", "x")
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    for args, message in (
        (["--out", a_file], f"--out {a_file}: exists and is not a folder"),
        (["--harden", fifo], f"--harden: {fifo} is a FIFO; azr writes only regular files"),
        (["--harden", a_file / "h.jsonl"], f"--harden: cannot write {a_file / 'h.jsonl'}: Not a directory"),
    ):
        code, out, err = cli("data", "audit", path, *args, "--workers", "2")
        assert (code, out) == (2, ""), err  # no audit ran: nothing printed
        (line,) = err.strip().splitlines()
        assert line.startswith(f"azr: error: {message}")


HUGE = [
    {"solution": "def f(x):\n    return 10 ** 5000 + x\n", "tests": ["assert f(1) == f(1)", "assert f(2) > 0"]},
    {"solution": "s = input()\nprint(len(s))\n", "tests": [{"input": "1" * 100_001 + "\n", "output": "100001\n"}]},
    {"solution": "def f(x):\n    return x % 7\n", "tests": [f"assert f(0x{'f' * 5000}) == {int('f' * 5000, 16) % 7}"]},
]


@pytest.mark.parametrize("row", HUGE, ids=["returns-a-huge-int", "reads-a-huge-token", "hexadecimal-argument"])
def test_values_python_cannot_print_are_graded_and_audited_without_a_traceback(cli, write, row):
    path = write("t.jsonl", json.dumps({"id": "huge", "prompt": "p", **row}) + "\n")
    code, out, err = cli("data", "validate", path, "--workers", "2")
    assert code == 0 and "1 passed" in out, out + err
    code, out, err = cli("data", "audit", path, "--workers", "2")
    last = out.strip().splitlines()[-1]
    assert code in (0, 1) and LAST.fullmatch(last.replace("kill rate n/a", "kill rate 0.00")), out + err
