"""`azr sandbox serve` judged by SandboxFusion's own material, on loopback: its Python runner tests
(`sandbox/tests/runners/test_python.py`, `test_pytest.py` in bytedance/SandboxFusion, transcribed here as requests
and the answers its source gives them: `python FILE` / `pytest FILE` in a fresh directory, the status from the
return code alone) and the edge cases of a program run as CPython runs a script, each sent through a raw HTTP
client and through SandboxFusion's own PyPI client (`sandbox-fusion`). Then the fields' bounds (422 naming the
field), what is not offered, and `azr sandbox run --code` on the same programs."""

from __future__ import annotations

import base64
import dataclasses
import json

import httpx2
import pytest
from procs import start_server, stop

from azr.sandbox.server import ServeLimits, parse_request


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@dataclasses.dataclass
class Case:
    """A request and what SandboxFusion answers it: `status`, `run_result.status`, and where given the return code,
    stdout (exact), text stdout/stderr must hold, and the fetched files (decoded)."""

    request: dict
    status: str
    run_status: str = "Finished"
    return_code: int | None = None
    stdout: str | None = None
    stdout_has: str = ""
    stderr_has: str = ""
    files: dict[str, str] | None = None


# A pytest module of this test's own: a function, and a test class using the capfd and tmp_path fixtures (OP: the
# comparison its asserts make).
TALLY = """import collections

def tally(path):
    words = open(path, encoding="utf-8").read().lower().split()
    for word, n in collections.Counter(words).most_common():
        print(f"{word}={n}")

class TestTally:
    def test_counts_case_blind(self, capfd, tmp_path):
        (tmp_path / "t.txt").write_text("Ab ab AB cd", encoding="utf-8")
        tally(tmp_path / "t.txt")
        assert capfd.readouterr().out OP "ab=3\\ncd=1\\n"

    def test_one_word(self, capfd, tmp_path):
        (tmp_path / "u.txt").write_text("zz", encoding="utf-8")
        tally(tmp_path / "u.txt")
        assert capfd.readouterr().out OP "zz=1\\n"
"""
UNITTEST = """import unittest

class T(unittest.TestCase):
    def test_a(self):
        self.assertEqual(1 + 1, {want})

if __name__ == "__main__":
    unittest.main()
"""
DOCTEST = '''def double(x):
    """
    >>> double(2)
    {want}
    """
    return 2 * x

import doctest
{call}
'''
PICKLE = """import pickle

class Point:
    def __init__(self, x):
        self.x = x

def square(v):
    return v * v

p = pickle.loads(pickle.dumps(Point(3)))
print(type(p).__name__, p.x, pickle.loads(pickle.dumps(square))(4))
"""
POOL = """import multiprocessing

def square(v):
    return v * v

if __name__ == "__main__":
    with multiprocessing.{ctx}Pool(2) as pool:
        print(pool.map(square, [1, 2, 3]))
"""
SOURCE = """import inspect, os

def f():
    return 1

print(os.path.isfile(__file__), os.path.dirname(__file__) == os.getcwd())
print(inspect.getsource(f), end="")
"""
LOOPBACK = """import socket

print(socket.gethostbyname("localhost"))
server = socket.socket()
server.bind(("localhost", 0))
server.listen()
client = socket.create_connection(("localhost", server.getsockname()[1]))
conn, _ = server.accept()
client.sendall(b"ping")
print(conn.recv(4).decode())
"""

CASES = {
    # SandboxFusion's runner tests (test_python.py, test_pytest.py)
    "print": Case({"code": "print(123)", "run_timeout": 5}, "Success", return_code=0, stdout="123\n"),
    "timeout": Case({"code": "import time; time.sleep(0.2)", "run_timeout": 0.1}, "Failed", "TimeLimitExceeded"),
    "assertion error": Case({"code": "assert 1 == 2"}, "Failed", return_code=1, stderr_has="AssertionError"),
    "syntax error": Case({"code": "int a = 1"}, "Failed", return_code=1, stderr_has="SyntaxError: invalid syntax"),
    "file read": Case(
        {
            "code": 'print(open("dir1/dir2/dir3/secret_flag").read())',
            "files": {"dir1/dir2/dir3/secret_flag": b64('"a secret for the test"')},
        },
        "Success",
        stdout_has="a secret for the test",
    ),
    "stdin": Case({"code": "print(int(input()))", "stdin": "65535"}, "Success", stdout="65535\n"),
    "fetch files": Case(
        {
            "code": 'open("a.txt", "w").write("secret"); open("/mnt/b", "w").write("sauce")',
            "fetch_files": ["a.txt", "/mnt/b"],
        },
        "Success",
        files={"a.txt": "secret", "/mnt/b": "sauce"},
    ),
    "passing tests as python": Case({"code": TALLY.replace("OP", "==")}, "Success", return_code=0),
    "passing tests as pytest": Case(
        {"code": TALLY.replace("OP", "=="), "language": "pytest"}, "Success", return_code=0
    ),
    "failing tests as python": Case({"code": TALLY.replace("OP", "!=")}, "Success", return_code=0),
    "failing tests as pytest": Case(
        {"code": TALLY.replace("OP", "!="), "language": "pytest"}, "Failed", return_code=1, stdout_has="2 failed"
    ),
    # A program is a program: what CPython gives `python FILE`
    "unittest.main failing": Case({"code": UNITTEST.format(want=3)}, "Failed", return_code=1, stderr_has="FAILED"),
    "unittest.main passing": Case({"code": UNITTEST.format(want=2)}, "Success", return_code=0, stderr_has="OK"),
    # doctest.testmod() reports and returns; the exit code (all SandboxFusion reads) stays 0 unless the program
    # makes it its own
    "doctest.testmod failing": Case(
        {"code": DOCTEST.format(want=5, call="doctest.testmod()")},
        "Success",
        return_code=0,
        stdout_has="1 failures",
    ),
    "doctest failures as exit code": Case(
        {"code": DOCTEST.format(want=5, call="raise SystemExit(doctest.testmod().failed)")}, "Failed", return_code=1
    ),
    "doctest passing as exit code": Case(
        {"code": DOCTEST.format(want=4, call="raise SystemExit(doctest.testmod().failed)")}, "Success", return_code=0
    ),
    "uncaught exception": Case(
        {"code": "def f():\n    raise ValueError('boom')\nf()"},
        "Failed",
        return_code=1,
        stderr_has="ValueError: boom",
    ),
    "uncaught KeyboardInterrupt": Case({"code": "raise KeyboardInterrupt"}, "Failed", return_code=-2),
    "killed by a signal": Case(
        {"code": "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)"}, "Failed", return_code=-15
    ),
    "exit code": Case({"code": "import sys\nsys.exit(3)"}, "Failed", return_code=3),
    "SystemExit with a message": Case({"code": "raise SystemExit('bye')"}, "Failed", return_code=1, stderr_has="bye"),
    "__main__ guard": Case({"code": 'if __name__ == "__main__":\n    print("main")'}, "Success", stdout="main\n"),
    "pickle of its own objects": Case({"code": PICKLE}, "Success", stdout="Point 3 16\n"),
    "multiprocessing (fork)": Case({"code": POOL.format(ctx="")}, "Success", stdout="[1, 4, 9]\n"),
    "multiprocessing (spawn)": Case(
        {"code": POOL.format(ctx='get_context("spawn").')}, "Success", stdout="[1, 4, 9]\n"
    ),
    "__file__ and inspect.getsource": Case({"code": SOURCE}, "Success", stdout="True True\ndef f():\n    return 1\n"),
    "a module it writes": Case(
        {"code": 'open("helper.py", "w").write("X = 41\\n")\nimport helper\nprint(helper.X + 1)'},
        "Success",
        stdout="42\n",
    ),
    "a module it is given": Case(
        {"code": "from pkg.helper import X\nprint(X)", "files": {"pkg/helper.py": b64("X = 7\n")}},
        "Success",
        stdout="7\n",
    ),
    "sys.stdin.buffer": Case(
        {"code": "import sys\nprint(sys.stdin.buffer.read())", "stdin": "1 2\n3"}, "Success", stdout="b'1 2\\n3'\n"
    ),
    "open(0)": Case(
        {"code": "print(sum(map(int, open(0).read().split())))", "stdin": "1 2\n3\n"}, "Success", stdout="6\n"
    ),
    "os.read(0)": Case(
        {"code": "import os\nprint(os.read(0, 5))", "stdin": "abcdefgh"}, "Success", stdout="b'abcde'\n"
    ),
    "sys.stdin lines": Case(
        {
            "code": "import sys\nn = int(sys.stdin.readline())\nprint([int(x) * n for x in sys.stdin])",
            "stdin": "2\n3\n4\n",
        },
        "Success",
        stdout="[6, 8]\n",
    ),
    "no stdin is an empty one": Case(
        {"code": "import sys\nprint(repr(sys.stdin.read()))", "stdin": None}, "Success", stdout="''\n"
    ),
    "localhost resolves, loopback works": Case({"code": LOOPBACK}, "Success", stdout="127.0.0.1\nping\n"),
    "a thread the program started is waited for": Case(
        {"code": "import threading, time\nthreading.Thread(target=lambda: (time.sleep(0.2), print('late'))).start()"},
        "Success",
        stdout="late\n",
    ),
    "atexit handlers run": Case(
        {"code": "import atexit\natexit.register(print, 'bye')\nprint('hi')"}, "Success", stdout="hi\nbye\n"
    ),
    # where SandboxFusion's router stalls past about 192 KiB of output, azr returns all of it
    "a large output comes back whole": Case({"code": "print('x' * 300_000)"}, "Success", stdout="x" * 300_000 + "\n"),
    "a fetched file that is missing is left out": Case(
        {"code": "print(1)", "fetch_files": ["nothing-here.txt"]}, "Success", files={}
    ),
    "a null file content is skipped, as SandboxFusion does": Case(
        {"code": "import os\nprint(os.path.exists('skipped.txt'))", "files": {"skipped.txt": None}},
        "Success",
        stdout="False\n",
    ),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server offering pytest (for `language: pytest`), without a token: SandboxFusion's client sends none."""
    proc, url = start_server(tmp_path_factory.mktemp("fusion") / "serve.log", "--package", "pytest", token=False)
    yield url
    stop(proc)


def _over_http(url: str, request: dict) -> dict:
    response = httpx2.post(f"{url}/run_code", json={"language": "python", **request}, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def _over_client(url: str, request: dict) -> dict:
    from sandbox_fusion import RunCodeRequest, run_code

    answer = run_code(RunCodeRequest(**{"language": "python", **request}), endpoint=url, max_attempts=1)
    return json.loads(answer.json())


@pytest.mark.slow(minutes=0.5)
@pytest.mark.parametrize("via", [_over_http, _over_client], ids=["http", "sandbox-fusion client"])
@pytest.mark.parametrize("name", list(CASES))
def test_every_python_case_answers_as_sandboxfusion(server, via, name):
    case = CASES[name]
    answer = via(server, case.request)
    run = answer["run_result"]
    seen = (answer["status"], run["status"])
    assert seen == (case.status, case.run_status), (name, answer)
    if case.return_code is not None:
        assert run["return_code"] == case.return_code, (name, answer)
    if case.run_status == "TimeLimitExceeded":
        assert run["return_code"] is None
    if case.stdout is not None:
        assert run["stdout"] == case.stdout, (name, answer)
    assert case.stdout_has in run["stdout"], (name, answer)
    assert case.stderr_has in run["stderr"], (name, answer)
    if case.files is not None:
        assert {k: base64.b64decode(v).decode() for k, v in answer["files"].items()} == case.files


@pytest.mark.slow(minutes=0.1)
def test_a_file_outside_the_places_programs_write_is_not_fetched(server):
    """A divergence, documented: SandboxFusion returns any file its runner can read; azr only files from the
    program's own writable places (working directory, /tmp, /mnt, /dev/shm), never the worker's /proc."""
    names = ["/etc/hosts", "/proc/self/environ", "/proc/self/fd/0", "../../etc/hosts", "x.txt"]
    answer = _over_http(server, {"code": "open('x.txt', 'w').write('ok')", "fetch_files": names})
    assert {k: base64.b64decode(v) for k, v in answer["files"].items()} == {"x.txt": b"ok"}


@pytest.mark.slow(minutes=0.1)
def test_what_is_not_offered_is_a_4xx_naming_the_field(server):
    for language in ("cpp", "nodejs", "python2", "bash"):
        refused = httpx2.post(f"{server}/run_code", json={"code": "print(1)", "language": language})
        assert refused.status_code == 422 and refused.json()["detail"].startswith("language:"), language
    jupyter = httpx2.post(f"{server}/run_jupyter", json={"cells": ["1"]})
    assert jupyter.status_code == 404 and "/run_jupyter" in jupyter.json()["detail"]
    for files, why in (
        ({"/etc/passwd": b64("x")}, "relative"),
        ({"../up.txt": b64("x")}, "relative"),
        ({"a/../../up.txt": b64("x")}, "relative"),
        ({"a.txt": "not base64!"}, "base64"),
        ({"dir/": b64("x")}, "directory"),
        ({".": b64("x")}, "directory"),
        ({"a": b64("x"), "a/b": b64("y")}, "directory"),
        ({"x" * 300: b64("x")}, "255 bytes"),
        ([["a.txt", b64("x")]], "object"),
    ):
        refused = httpx2.post(f"{server}/run_code", json={"code": "1", "language": "python", "files": files})
        assert refused.status_code == 422, files
        assert refused.json()["detail"].startswith("files") and why in refused.json()["detail"], refused.json()
    for fetch in ("a.txt", [1], ["a\x00b"]):
        refused = httpx2.post(f"{server}/run_code", json={"code": "1", "language": "python", "fetch_files": fetch})
        assert refused.status_code == 422 and refused.json()["detail"].startswith("fetch_files"), fetch
    for field, value in (("stdin", 5), ("run_timeout", "soon"), ("compile_timeout", -1), ("memory_limit_MB", 1.5)):
        body = {"code": "1", "language": "python", field: value}
        refused = httpx2.post(f"{server}/run_code", json=body)
        assert refused.status_code == 422 and refused.json()["detail"].startswith(field), (field, refused.text)


def test_files_and_fetch_files_are_bounded():
    caps = ServeLimits(max_files=3, max_files_mb=1)
    body = {"code": "1", "language": "python"}
    with pytest.raises(ValueError, match=r"^files: at most 3"):
        parse_request({**body, "files": {f"f{i}": b64("x") for i in range(4)}}, caps)
    with pytest.raises(ValueError, match=r"^files: over 1 MiB in all"):
        parse_request({**body, "files": {"a": b64("x" * (600 << 10)), "b": b64("y" * (600 << 10))}}, caps)
    with pytest.raises(ValueError, match=r"^fetch_files: at most 3"):
        parse_request({**body, "fetch_files": ["a", "b", "c", "d"]}, caps)
    with pytest.raises(ValueError, match=r"^language: 'pytest' needs pytest"):
        parse_request({**body, "language": "pytest"}, caps, offered=())
    run = parse_request({**body, "files": {"ok/a.txt": b64("x"), "IGNORE_THIS_FILE.txt": b64("y")}}, caps)
    assert run.files == {"ok/a.txt": b64("x")} and run.limits.fetch_bytes == 1 << 20


@pytest.mark.slow(minutes=0.1)
@pytest.mark.parametrize("api", ["azr", "sandboxfusion"])
def test_the_remote_provider_carries_stdin_files_and_fetch_both_ways(server, api):
    """azr's own client sends a raw run's parts too: as fields (`api: azr`) or inside the envelope's request."""
    from azr.config import RemoteSandboxConfig
    from azr.sandbox import Limits, RemoteProvider

    code = "import sys\nopen('out.txt', 'w').write(open('in/a.txt').read() * 2)\nprint(sys.stdin.read()[::-1])"
    with RemoteProvider(RemoteSandboxConfig(urls=[server], api=api, backoff_s=0.0)) as provider:
        result = provider.run(code, Limits(wall_s=10), stdin="abc", files={"in/a.txt": b64("xy")}, fetch=["out.txt"])
    assert (result.status, result.exit_code, result.stdout) == ("ok", 0, "cba\n"), result
    assert {k: base64.b64decode(v) for k, v in result.files.items()} == {"out.txt": b"xyxy"}


@pytest.mark.slow(minutes=0.1)
def test_fetched_files_past_the_cap_are_left_out_and_named(tmp_path):
    from azr.sandbox import Limits, open_pool

    code = "open('small', 'w').write('s')\nopen('big', 'w').write('b' * 5000)"
    with open_pool("auto", 1) as pool:
        result = pool.run(code, Limits(fetch_bytes=4096), fetch=["small", "big"])
    assert set(result.files) == {"small"} and "big" in result.note


@pytest.mark.slow(minutes=0.1)
@pytest.mark.parametrize(
    ("code", "status", "exit_code"),
    [
        (UNITTEST.format(want=3), "failed", 1),
        (UNITTEST.format(want=2), "ok", 0),
        (DOCTEST.format(want=5, call="raise SystemExit(doctest.testmod().failed)"), "failed", 1),
        ("raise KeyboardInterrupt", "crashed", 1),
        (PICKLE, "ok", 0),
    ],
    ids=["unittest failing", "unittest passing", "doctest failing", "KeyboardInterrupt", "pickle"],
)
def test_azr_sandbox_run_reports_a_failing_program_as_a_failure(cli, write, code, status, exit_code):
    rc, out, _ = cli("sandbox", "run", "--code", write("prog.py", code), "--json")
    assert (rc, json.loads(out)["status"]) == (exit_code, status), out
