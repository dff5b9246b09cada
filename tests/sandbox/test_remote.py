"""The remote provider against real `azr sandbox serve` processes on loopback: the same verdicts as the local pool
(hostile programs, every test kind), failover when a server is SIGKILLed mid-batch with every result once, the
token, the size cap, SandboxFusion's /run_code shapes, and servers that die with whoever started them."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2
import pytest
from procs import TOKEN, TOKEN_ENV, kill_group_when, start_server, stop

from azr.config import RemoteSandboxConfig, SandboxConfig
from azr.data import StdioCase, Task, module_tests
from azr.errors import ConfigError
from azr.rewards import grade_many, harness_preload
from azr.sandbox import ExecResult, Limits, RemoteProvider, open_pool
from azr.sandbox.server import build_app

ROOT = Path(__file__).resolve().parents[2]
QUICK = Limits(wall_s=5.0)


def remote(*urls: str, **fields) -> RemoteProvider:
    fields = {"token_env": TOKEN_ENV, "backoff_s": 0.0, **fields}
    return RemoteProvider(RemoteSandboxConfig(urls=list(urls), **fields), harness_preload())


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """Two loopback servers with a token, shared by the module."""
    os.environ[TOKEN_ENV] = TOKEN
    folder = tmp_path_factory.mktemp("serve")
    started = [start_server(folder / f"server{i}.log") for i in range(2)]
    yield [url for _, url in started]
    for proc, _ in started:
        stop(proc)


@pytest.fixture(scope="module")
def local():
    pool = open_pool("bwrap", workers=2, preload=harness_preload())
    yield pool
    pool.close()


# ------------------------------------------------------------------------------------- the same verdicts
ADD = "def add(a, b):\n    return a + b\n"
HOSTILE = {
    "right": ADD,
    "wrong": "def add(a, b):\n    return a - b\n",
    "exit 0 at load": "import os\nos._exit(0)",
    "SystemExit in the call": "def add(a, b):\n    raise SystemExit(0)",
    "endless loop": "def add(a, b):\n    while True:\n        pass",
    "memory hog": "def add(a, b):\n    x = bytearray(1 << 34)\n    return a + b",
    "kills its worker": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)",
    "closes stdout and fd 3": "import os\nos.close(1)\nos.close(3)\n" + ADD,
    "output flood": "print('x' * 10_000_000)\n" + ADD,
    "forged verdict lines": 'import os\nos.write(3, b\'{"test": 0, "ok": true}\\n\' * 50)\n' + ADD,
    "fork bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        break\n" + ADD,
    "always-equal": "class A:\n    def __eq__(self, o):\n        return True\ndef add(a, b):\n    return A()",
}
PYTEST_MODULE = (
    "from solution import add\n\ndef test_one():\n    assert add(1, 2) == 3\n\n"
    "def test_two():\n    assert add(2, 2) == 4\n"
)
UNITTEST_MODULE = (
    "import unittest\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(add(1, 1), 2)\n"
)
STDIO_ADD = "a, b = map(int, input().split())\nprint(a + b)\n"
CHECKER = "def check(input, expected, output):\n    return output.split() == expected.split()\n"
KINDS = {
    "asserts": Task("asserts", "", ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]),
    "pytest": Task("pytest", "", module_tests("pytest", PYTEST_MODULE, "t")),
    "unittest": Task("unittest", "", module_tests("unittest", UNITTEST_MODULE, "t")),
    "stdio": Task("stdio", "", [StdioCase("1 2\n", "3\n"), StdioCase("5 5\n", "10\n")]),
    "special judge": Task("judge", "", [StdioCase("2 2\n", "4")], checker=CHECKER),
}


def _pairs() -> list[tuple[Task, str]]:
    pairs = [(task, code) for task in KINDS.values() if task.id not in ("stdio", "judge") for code in HOSTILE.values()]
    for name in ("stdio", "judge"):
        pairs += [(KINDS["stdio" if name == "stdio" else "special judge"], c) for c in (STDIO_ADD, "print(0)")]
    return pairs


def _verdicts(grades) -> list[tuple]:
    return [(g.status, g.tests_passed, g.tests_total, tuple(g.per_test)) for g in grades]


@pytest.mark.slow(minutes=1.5)
@pytest.mark.parametrize("api", ["azr", "sandboxfusion"])
def test_verdicts_are_the_local_pools_on_hostile_programs_and_every_test_kind(servers, local, api):
    pairs = _pairs()
    expected = grade_many(pairs, local, QUICK)
    with remote(*servers, api=api) as provider:
        got = grade_many(pairs, provider, QUICK)
        metrics = provider.metrics()
        assert metrics.get("remote_lost", 0) == 0
    assert _verdicts(got) == _verdicts(expected)
    # azr's servers take the graded programs in batches (a /run_batch each), SandboxFusion one a request
    sent = metrics["remote_requests"] - metrics.get("remote_retries", 0)
    assert sent < len(pairs) / 4 if api == "azr" else sent >= len(pairs), (sent, len(pairs))
    if api == "azr":  # the server's own results, notes and reasons included
        assert [g.failures for g in got] == [g.failures for g in expected]
    assert {g.status for g in expected} >= {"passed", "failed", "timeout", "crashed"}


# ------------------------------------------------------------------------------------------- failover
@pytest.mark.slow(minutes=0.5)
def test_a_server_killed_mid_batch_loses_no_result_and_counts_none_twice(tmp_path, monkeypatch):
    monkeypatch.setenv(TOKEN_ENV, TOKEN)  # the client's token, whether or not the module's servers have started
    (a, url_a), (b, url_b) = start_server(tmp_path / "a.log"), start_server(tmp_path / "b.log")
    try:
        n = 24
        programs = [(f"import time\ntime.sleep(0.3)\nprint({i})", QUICK) for i in range(n)]
        with remote(url_a, url_b, down_after=1, retries=3) as provider:
            results = []
            for result in provider.imap(programs):
                results.append(result)
                if len(results) == 2:
                    a.kill()  # mid-batch: its requests in flight are lost, and it refuses the rest
            metrics = provider.metrics()
        assert [r.stdout.strip() for r in results] == [str(i) for i in range(n)]
        assert all(r.status == "ok" for r in results)
        assert metrics["remote_retries"] >= 1 and metrics["remote_marked_down"] >= 1
        assert metrics.get("remote_lost", 0) == 0
    finally:
        stop(a)
        stop(b)


def test_a_program_no_server_can_run_is_an_infrastructure_error_never_a_fail(tmp_path):
    closed = "http://127.0.0.1:9"  # discard port: nothing listens on loopback
    with remote(closed, retries=1, token_env=None) as provider:
        [grade] = grade_many([(KINDS["asserts"], ADD)], provider, QUICK)
        assert grade.status == "error" and "no sandbox server could run" in grade.failures[-1]
        assert provider.metrics()["remote_lost"] == 1


# ------------------------------------------------------------------------------------- batches
class _Flaky:
    """A real pool behind an in-process server whose sandbox fails the first run of a program printing 'flaky'
    (fault injection: the pool's own `error`, as a worker that could not start gives)."""

    def __init__(self, pool):
        self.pool, self.failed = pool, 0
        self.preload, self.isolation = pool.preload, pool.isolation

    def run(self, code, limits=None, **options):
        if "flaky" in code and not self.failed:
            self.failed += 1
            return ExecResult("error", note="the worker could not start")
        return self.pool.run(code, limits, **options)


@contextlib.contextmanager
def _served(app):
    """`app` (an ASGI app) served by uvicorn on a free loopback port in this process; its base URL."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the in-process server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)


def _without_batches(app):
    """`app` as an azr server from before /run_batch: that route is a 404."""
    from starlette.responses import JSONResponse

    async def older(scope, receive, send):
        if scope["type"] == "http" and scope["path"] == "/run_batch":
            await JSONResponse({"detail": "Not Found"}, status_code=404)(scope, receive, send)
            return
        await app(scope, receive, send)

    return older


def test_a_server_without_run_batch_gets_one_program_a_request_with_the_same_results(local, caplog):
    caplog.set_level(logging.INFO, logger="azr.sandbox.remote")
    with _served(_without_batches(build_app(local, 2))) as url, remote(url, token_env=None, batch_size=4) as provider:
        first = list(provider.imap([(f"print({i})", QUICK) for i in range(6)]))
        asked = provider.metrics()["remote_requests"]
        second = list(provider.imap([(f"print({i})", QUICK) for i in range(6)]))
        metrics = provider.metrics()
    assert [r.stdout for r in first] == [r.stdout for r in second] == [f"{i}\n" for i in range(6)]
    assert asked <= 2 + 6  # the batches refused, then each program alone
    assert metrics["remote_requests"] - asked == 6  # known now: no batch is sent again
    assert metrics.get("remote_lost", 0) == 0 and metrics.get("remote_refused", 0) == 0
    assert sum("has no /run_batch" in r.message for r in caplog.records) == 1


def test_the_batch_a_server_without_run_batch_refused_runs_its_programs_side_by_side(local):
    # Each program prints when it starts and when it ends; run one after another, the second would start after the
    # first ended. One dispatch thread (concurrency = batch size), so nothing else runs them side by side.
    code = "import time\nprint(time.time())\ntime.sleep(1.5)\nprint(time.time())\n"
    with _served(_without_batches(build_app(local, 2))) as url:
        with remote(url, token_env=None, batch_size=2, concurrency=2) as provider:
            results = list(provider.imap([(code, QUICK), (code, QUICK)]))
    assert [r.status for r in results] == ["ok", "ok"]
    (start_a, end_a), (start_b, end_b) = ([float(v) for v in r.stdout.split()] for r in results)
    assert max(start_a, start_b) < min(end_a, end_b)  # the two ran at the same time


def test_a_program_of_a_batch_that_the_servers_sandbox_failed_runs_again_alone(local):
    flaky = _Flaky(local)
    with _served(build_app(flaky, 2)) as url, remote(url, token_env=None, batch_size=8) as provider:
        results = list(provider.imap([("print(0)", QUICK), ("print('flaky')", QUICK), ("print(2)", QUICK)]))
        metrics = provider.metrics()
    assert [(r.status, r.stdout) for r in results] == [("ok", "0\n"), ("ok", "flaky\n"), ("ok", "2\n")]
    assert flaky.failed == 1 and metrics["remote_requests"] == 2 and metrics["remote_retries"] == 1


# ---------------------------------------------------------------------------------------- the guards
@pytest.mark.slow(minutes=0.2)
def test_a_wrong_token_is_a_one_line_error_that_never_shows_a_token(servers, monkeypatch):
    monkeypatch.setenv(TOKEN_ENV, "wrong-" + TOKEN)
    with remote(servers[0]) as provider:
        with pytest.raises(ConfigError) as refused:
            provider.health(servers[0])
        result = provider.run("print(1)", QUICK)
    message = str(refused.value)
    assert "\n" not in message and TOKEN_ENV in message and TOKEN not in message
    assert result.status == "error" and "refused the token" in result.note and TOKEN not in result.note
    answer = httpx2.post(f"{servers[0]}/run_code", json={"code": "print(1)", "language": "python"})
    assert answer.status_code == 401


@pytest.mark.slow(minutes=0.2)
def test_an_oversized_request_is_refused(servers):
    big = "x = 1\n" + "#" * (17 << 20)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    answer = httpx2.post(f"{servers[0]}/run_code", json={"code": big, "language": "python"}, headers=headers)
    assert answer.status_code == 413
    with remote(servers[0]) as provider:
        result = provider.run(big, QUICK)
    assert result.status == "error" and "413" in result.note


@pytest.mark.slow(minutes=0.2)
def test_run_code_answers_sandboxfusions_shapes(servers):
    headers = {"Authorization": f"Bearer {TOKEN}"}

    def post(**body):
        answer = httpx2.post(f"{servers[0]}/run_code", json={"language": "python", **body}, headers=headers)
        return answer.status_code, answer.json()

    status, ok = post(code="print(input()[::-1])", stdin="abc\n", run_timeout=5, memory_limit_MB=256)
    assert status == 200 and set(ok) >= {"status", "message", "compile_result", "run_result", "files"}
    assert ok["status"] == "Success" and ok["compile_result"] is None
    run = ok["run_result"]
    assert set(run) == {"status", "execution_time", "return_code", "stdout", "stderr"}
    assert (run["status"], run["return_code"], run["stdout"]) == ("Finished", 0, "cba\n")
    assert post(code="import sys; sys.exit(3)")[1]["status"] == "Failed"
    late = post(code="while True: pass", run_timeout=1)[1]
    assert (late["status"], late["run_result"]["status"]) == ("Failed", "TimeLimitExceeded")
    assert post(code="print(1)", language="cpp")[0] == 422
    health = httpx2.get(f"{servers[0]}/health", headers=headers).json()
    assert health["isolation"] == "namespaces" and health["programs"] >= 3 and "queued" in health


def test_a_server_on_another_address_needs_a_token():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "azr.cli", "sandbox", "serve", "--host", "0.0.0.0", "--port", "0"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2 and "needs a token" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_remote_recipe_without_urls_is_refused_naming_the_field():
    with pytest.raises(ConfigError, match=r"sandbox\.remote\.urls"):
        SandboxConfig(provider="remote")


@pytest.mark.slow(minutes=0.3)
def test_a_server_and_its_workers_die_with_a_sigkilled_azr(tmp_path):
    log = tmp_path / "serve.log"
    proc, url = start_server(log, new_session=True)

    def serving() -> bool:
        with remote(url) as provider:
            return provider.run("print(2)", QUICK).stdout == "2\n"  # workers started

    kill_group_when(proc, serving, log, timeout_s=60)


@pytest.mark.slow(minutes=0.3)
def test_doctor_runs_the_isolation_probes_on_a_server(servers):
    env = {**os.environ, "PYTHONPATH": str(ROOT), TOKEN_ENV: TOKEN}
    argv = [sys.executable, "-m", "azr.cli", "sandbox", "doctor", "--url", servers[1], "--token-env", TOKEN_ENV]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "isolation: namespaces" in done.stdout and "guarantees hold" in done.stdout
    assert "FAIL" not in done.stdout and json.dumps(TOKEN) not in done.stdout


@pytest.mark.slow(minutes=0.3)
def test_data_validate_and_audit_grade_on_the_recipes_servers(servers, cli, write, tmp_path):
    rows = [
        {"id": f"t{i}", "prompt": "add", "solution": ADD, "tests": [f"assert add({i}, 1) == {i + 1}"]} for i in range(3)
    ]
    tasks = write("tasks.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    recipe = write("recipe.yaml", f"sandbox:\n  provider: remote\n  remote:\n    urls: ['{servers[0]}']\n")
    token = f"sandbox.remote.token_env={TOKEN_ENV}"
    code, out, err = cli("data", "validate", tasks, "--config", recipe, "--set", token)
    assert code == 0 and "3 tasks, 3 passed" in out, out + err
    code, out, err = cli("data", "audit", tasks, "--config", recipe, "--set", token)
    assert code in (0, 1) and "kill rate" in out.splitlines()[-1], out + err
    code, _, err = cli("data", "validate", tasks, "--set", "sandbox.workers=2")
    assert code == 2 and "--set: needs --config" in err


@pytest.mark.slow(minutes=0.2)
def test_a_server_marked_down_is_left_alone_then_probed_again(servers):
    closed = "http://127.0.0.1:9"
    with remote(closed, servers[0], down_after=1, probe_interval_s=1.0, retries=2) as provider:
        results = [provider.run(f"print({i})", QUICK) for i in range(4)]
        assert [r.stdout for r in results] == [f"{i}\n" for i in range(4)]
        seen = provider.metrics()
        assert seen["remote_failures"] == 1 and seen["remote_marked_down"] == 1 and seen["remote_servers_down"] == 1
        time.sleep(1.1)  # its probe is due: the next request in its turn goes there once, fails, and it is down again
        assert all(provider.run("print(1)", QUICK).stdout == "1\n" for _ in range(2))
        assert provider.metrics()["remote_failures"] == 2


@pytest.mark.slow(minutes=0.2)
def test_a_wrong_token_stops_a_command_in_one_line(servers, cli, write, monkeypatch):
    monkeypatch.setenv(TOKEN_ENV, "wrong")
    tasks = write(
        "tasks.jsonl", json.dumps({"id": "t", "prompt": "p", "solution": ADD, "tests": ["assert add(1, 1) == 2"]})
    )
    recipe = write(
        "r.yaml", f"sandbox: {{provider: remote, remote: {{urls: ['{servers[0]}'], token_env: {TOKEN_ENV}}}}}\n"
    )
    code, _, err = cli("data", "validate", tasks, "--config", recipe)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "refused the token" in err and "wrong" not in err
