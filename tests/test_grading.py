"""Grading of reference solutions: partial credit, verdicts from the harness (not the exit code), limits, env."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from azr.data import Task
from azr.grading import grade, validate_references

TASK = Task(
    "t-double",
    "Write `double(x)`.",
    ["assert double(2) == 4", "assert double(0) == 0", "assert double(-3) == -6"],
    entry_point="double",
)


def test_correct_solution_passes_every_test():
    g = grade(TASK, "def double(x):\n    return 2 * x\n")
    assert (g.status, g.tests_passed, g.tests_total, g.failures) == ("passed", 3, 3, [])


def test_partial_credit_and_each_test_runs_alone():
    g = grade(TASK, "def double(x):\n    return 2 * x if x > 0 else 1\n")
    assert (g.status, g.tests_passed) == ("failed", 1)
    assert [f.split(":")[0] for f in g.failures] == ["test 1", "test 2"]


@pytest.mark.parametrize(
    "code",
    [
        "def double(x):\n    return 2 * x\nimport os\nos._exit(0)\n",
        "import sys\nsys.exit(0)\n",
        "def double(x):\n    import os\n    os._exit(0)\n",
        "def double(x):\n    raise SystemExit(0)\n",
        "print('[null, null, null]')\nimport os\nos._exit(0)\n",
    ],
    ids=["os._exit-at-top", "sys.exit-at-top", "os._exit-in-call", "SystemExit-in-call", "prints-fake-verdict"],
)
def test_early_exit_or_printing_passes_nothing(code):
    g = grade(TASK, code)
    assert g.tests_passed == 0 and g.status in ("crashed", "failed")


def test_a_program_that_kills_itself_is_crashed_not_an_infrastructure_error():
    g = grade(TASK, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    assert (g.status, g.tests_passed) == ("crashed", 0)


def test_timeout_kills_the_programs_whole_process_group(tmp_path):
    pid_file = tmp_path / "child.pid"
    code = (
        "import subprocess, time\n"
        f"child = subprocess.Popen(['sleep', '60'])\nopen({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "def f():\n    time.sleep(60)\n"
    )
    g = grade(Task("t", "p", ["assert f()"]), code, timeout_s=2.0)
    assert g.status == "timeout" and g.duration_s < 10
    pid = int(pid_file.read_text())
    status = Path(f"/proc/{pid}/status")
    assert not status.exists() or "\nState:\tZ" in status.read_text()  # gone, or a zombie awaiting its reaper


def test_a_background_child_holding_stdout_does_not_stall_the_verdict():
    code = "import subprocess\nsubprocess.Popen(['sleep', '30'])\ndef double(x):\n    return 2 * x\n"
    g = grade(TASK, code, timeout_s=10.0)
    assert g.passed and g.duration_s < 5


def test_tests_are_isolated_from_each_other():
    task = Task("t", "p", ["SEEN.append(1)\nassert len(SEEN) == 1"] * 3)
    assert grade(task, "SEEN = []\n").tests_passed == 3  # module state is rebuilt for every test


def test_memory_limit_and_undecodable_output():
    g = grade(Task("t", "p", ["x = bytearray(400 * 1024 * 1024)"]), "", memory_mb=128)
    assert (g.status, g.tests_passed) == ("failed", 0) and "MemoryError" in g.failures[0]
    noisy = "import os\nos.write(2, bytes(range(256)))\nos.write(1, b'\\xff\\xfe')\ndef double(x):\n    return 2 * x\n"
    assert grade(TASK, noisy).passed


def test_secrets_in_the_environment_do_not_reach_the_program(monkeypatch):
    monkeypatch.setenv("TOGETHER_API_KEY", "sk-fake-azr-test")
    task = Task(
        "t-env",
        "p",
        [
            "import os\nassert 'TOGETHER_API_KEY' not in os.environ",
            "import os\nassert not any('sk-fake' in v for v in os.environ.values())",
            f"import os\nassert os.getcwd() != {os.getcwd()!r}",
        ],
    )
    assert grade(task, "").passed


def test_validate_references_reports_broken_solution_and_skips_missing():
    broken = Task("t-broken", "p", TASK.tests, solution="def double(x):\n    return x + x + 1\n")
    good = Task("t-good", "p", TASK.tests, solution="def double(x):\n    return x * 2\n")
    none = Task("t-none", "p", TASK.tests)
    results = validate_references([broken, good, none], workers=2)
    assert [(t.id, g and g.status) for t, g in results] == [
        ("t-broken", "failed"),
        ("t-good", "passed"),
        ("t-none", None),
    ]
