"""`azr sandbox serve` against hostile requests and slow clients, a real server on loopback each: every malformed
body is a 422 that holds no worker, a worker always goes back to its pool, a program's overrun is its `timeout`
however long it queued, an abandoned request is never run (and stopped if it was running), a backend without
isolation is refused unless asked for, slow connections are closed in bounded time, and the token's scheme is read
case-insensitively."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time

import httpx2
import pytest
from procs import ROOT, TOKEN, TOKEN_ENV, start_server, stop

import azr.sandbox.backends as backends
from azr.config import RemoteSandboxConfig
from azr.sandbox import Limits, RemoteProvider

AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def server(tmp_path, monkeypatch):
    """start(*flags): a loopback server with a token (two workers unless a flag says otherwise); its base URL."""
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    started = []

    def start(*flags: str) -> str:
        proc, url = start_server(tmp_path / f"serve{len(started)}.log", *flags)
        started.append(proc)
        return url

    yield start
    for proc in started:
        stop(proc)


def post(url: str, body, timeout: float = 30.0, headers=AUTH) -> httpx2.Response:
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return httpx2.post(f"{url}/run_code", content=data, headers=headers, timeout=timeout)


def health(url: str) -> dict:
    return httpx2.get(f"{url}/health", headers=AUTH, timeout=10).json()


MALFORMED = {
    "float memory_mb": {"code": "print(1)", "limits": {"memory_mb": 0.5}},
    "float file_size_mb": {"code": "print(1)", "limits": {"file_size_mb": 0.5}},
    "float output_bytes": {"code": "print(1)", "limits": {"output_bytes": 1e18}},
    "huge output_bytes": {"code": "print(1)", "limits": {"output_bytes": 10**18}},
    "huge processes": {"code": "print(1)", "limits": {"processes": 10**30}},
    "unknown limit": {"code": "print(1)", "limits": {"wall": 1}},
    "bool limit": {"code": "print(1)", "limits": {"wall_s": True}},
    "401-digit run_timeout": '{"code": "print(1)", "run_timeout": 1' + "0" * 400 + "}",
    "401-digit wall_s": '{"code": "print(1)", "limits": {"wall_s": 1' + "0" * 400 + "}}",
    "401-digit memory": '{"code": "print(1)", "memory_limit_MB": 1' + "0" * 400 + "}",
    "float memory_limit_MB": {"code": "print(1)", "memory_limit_MB": 0.5},
    "NaN run_timeout": '{"code": "print(1)", "run_timeout": NaN}',
    "lone surrogate limits key": '{"code": "print(1)", "limits": {"\\ud800": 1}}',
    "deep nesting": '{"code": "print(1)", "limits": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "deep nesting alone": "[" * 100_000 + "]" * 100_000,
    "not an object": "[1, 2]",
    "not JSON": "{code: 1",
}
LENIENT = {  # text made valid, as in every input azr reads: the program runs
    "lone surrogate in code": '{"code": "print(\\"\\udc00\\")", "limits": {}}',
    "invalid UTF-8 in code": b'{"code": "print(\'\xff\xfe\')"}',
}


@pytest.mark.slow(minutes=0.3)
def test_every_malformed_body_is_a_422_and_the_workers_still_run_a_good_request(server):
    url = server()
    answers = {name: post(url, body) for name, body in MALFORMED.items()}
    got = {name: a.status_code for name, a in answers.items()}
    assert got == dict.fromkeys(got, 422), {n: (a.status_code, a.text[:200]) for n, a in answers.items()}
    assert all(len(a.json()["detail"]) <= 300 for a in answers.values())
    ran = [post(url, body).json()["run_result"]["stdout"] for body in LENIENT.values()]
    assert ran == ["\ufffd\n", "\ufffd\ufffd\n"]
    good = post(url, {"code": "print(6 * 7)", "language": "python"}, timeout=30)
    assert good.status_code == 200 and good.json()["run_result"]["stdout"] == "42\n"
    assert health(url)["programs"] == 3


@pytest.mark.slow(minutes=0.3)
def test_eight_overrunning_programs_on_a_one_worker_server_all_come_back_timeout(server):
    """They queue behind each other for up to 7 s, far past the client's 2 s beyond each program's limit: the queue
    is the server's, the overrun the program's."""
    url = server("--workers", "1")
    cfg = RemoteSandboxConfig(urls=[url], token_env=TOKEN_ENV, concurrency=8, timeout_s=2.0, retries=0)
    with RemoteProvider(cfg) as provider:
        results = provider.map(["while True:\n    pass\n"] * 8, Limits(wall_s=1.0))
    assert [r.status for r in results] == ["timeout"] * 8, [r.note for r in results]


@pytest.mark.slow(minutes=0.3)
def test_an_abandoned_request_is_dropped_from_the_queue_never_run(server):
    url = server("--workers", "1")
    # long enough for three clients to come and go behind it on a loaded machine
    first = threading.Thread(target=post, args=(url, {"code": "import time\ntime.sleep(8)", "run_timeout": 15}))
    first.start()
    deadline = time.monotonic() + 30
    while health(url)["running"] == 0:  # the first holds the one worker
        assert time.monotonic() < deadline
        time.sleep(0.05)
    for _ in range(3):  # queued behind the first; their clients give up and close the connection
        with pytest.raises(httpx2.TimeoutException):
            post(url, {"code": "print(1)"}, timeout=0.5)
    first.join()
    time.sleep(1.0)  # an abandoned request that was still queued would run now
    seen = health(url)
    assert (seen["programs"], seen["running"], seen["queued"]) == (1, 0, 0), seen


@pytest.mark.slow(minutes=0.3)
def test_a_running_program_whose_client_went_away_is_stopped_and_its_worker_serves_the_next(server):
    url = server("--workers", "1")
    with pytest.raises(httpx2.TimeoutException):  # a 60 s loop whose client gives up after 1 s
        post(url, {"code": "while True:\n    pass\n", "run_timeout": 60}, timeout=1.0)
    started = time.monotonic()
    answer = post(url, {"code": "print(7)"}, timeout=45)  # the one worker is free again long before the loop's 60 s
    assert answer.status_code == 200 and answer.json()["run_result"]["stdout"] == "7\n", answer.text[:300]
    assert time.monotonic() - started < 30
    seen = health(url)
    assert (seen["programs"], seen["running"], seen["queued"]) == (2, 0, 0), seen


def test_serve_refuses_a_backend_without_isolation_in_one_line():
    argv = [sys.executable, "-m", "azr.cli", "sandbox", "serve", "--backend", "process", "--port", "0"]
    done = subprocess.run(argv, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT)}, timeout=60)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "no isolation" in done.stderr and "--allow-unisolated" in done.stderr


def test_serve_refuses_autos_fallback_to_the_process_backend(cli, monkeypatch):
    monkeypatch.setattr(backends, "probe", lambda backend: "no user namespaces here" if backend.prefix else "")
    code, _, err = cli("sandbox", "serve", "--port", "0")
    assert code == 2 and "'process' backend has no isolation" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow(minutes=0.2)
def test_the_process_backend_is_served_when_asked_for_explicitly(server):
    url = server("--backend", "process", "--allow-unisolated")
    assert health(url)["isolation"] == "none"
    assert post(url, {"code": "print(5)"}).json()["run_result"]["stdout"] == "5\n"


def _closed_within(sock: socket.socket, deadline: float) -> bool:
    """Whether the server closes `sock` (an answer may come first) before `deadline`."""
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            if not sock.recv(65536):
                return True
        except TimeoutError:
            return False
        except OSError:
            return True
    return False


@pytest.mark.slow(minutes=0.3)
def test_slow_clients_are_closed_in_bounded_time_and_the_server_still_answers(server):
    """Ten slow connections, eight unauthenticated: four never send a byte, four dribble their headers, two send
    headers and then dribble a body. All are closed within a few seconds of the time-outs (3 s for headers, 2 s for
    a body), and past the connection cap a new connection is closed at once."""
    url = server("--header-timeout", "3", "--body-timeout", "2", "--max-connections", "12")
    host, port = url.removeprefix("http://").rsplit(":", 1)
    socks = [socket.create_connection((host, int(port))) for _ in range(10)]
    started = time.monotonic()
    stop_dribbling = threading.Event()
    body = f"POST /run_code HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 1000\r\n\r\n"
    for sock in socks[8:]:
        sock.sendall(body.encode())

    def dribble() -> None:  # a byte every 0.2 s on each of the six that send anything
        while not stop_dribbling.wait(0.2):
            for sock in socks[4:]:
                with contextlib.suppress(OSError):
                    sock.send(b"X" if sock in socks[8:] else b"a")

    for sock in socks[4:8]:
        sock.sendall(b"POST /run_code HTTP/1.1\r\nX-Slow: ")
    dribbler = threading.Thread(target=dribble, daemon=True)
    dribbler.start()
    try:
        crowd = [socket.create_connection((host, int(port))) for _ in range(4)]  # 14 open: two past the cap
        assert all(_closed_within(s, time.monotonic() + 1.5) for s in crowd[2:])  # at once, before any time-out
        for s in crowd:
            s.close()
        closed = [_closed_within(s, started + 10.0) for s in socks]
        assert all(closed), f"still open after 10 s: {[i for i, c in enumerate(closed) if not c]}"
    finally:
        stop_dribbling.set()
        for sock in socks:
            sock.close()
    assert post(url, {"code": "print(7)"}).json()["run_result"]["stdout"] == "7\n"


@pytest.mark.slow(minutes=0.2)
def test_the_token_scheme_is_case_insensitive_and_the_token_is_not(server):
    url = server()
    for scheme in ("Bearer", "bearer", "BEARER"):
        assert post(url, {"code": "print(1)"}, headers={"Authorization": f"{scheme} {TOKEN}"}).status_code == 200
    for wrong in (f"Bearer {TOKEN.upper()}", f"Basic {TOKEN}", TOKEN, f"Bearer{TOKEN}", ""):
        assert post(url, {"code": "print(1)"}, headers={"Authorization": wrong}).status_code == 401


def post_batch(url: str, body, timeout: float = 60.0) -> httpx2.Response:
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return httpx2.post(f"{url}/run_batch", content=data, headers=AUTH, timeout=timeout)


@pytest.mark.slow(minutes=0.2)
def test_a_batch_runs_each_program_as_run_code_runs_it_and_answers_in_order(server):
    """azr's /run_batch: each program its own run on a worker, its own time (a queued overrun is its `timeout`),
    the answers in the order asked and each what /run_code answers for the same body."""
    url = server("--workers", "1")
    bodies = [
        {"code": "print(1)"},
        {"code": "import sys\nprint('no', file=sys.stderr)\nsys.exit(3)"},
        {"code": "while True:\n    pass\n", "limits": {"wall_s": 1.0}},  # queued behind the others on one worker
        {"code": "while True:\n    pass\n", "limits": {"wall_s": 1.0}},
        {"code": "print(input())", "stdin": "hi\n", "limits": {"wall_s": 5.0}},
    ]
    answer = post_batch(url, {"requests": bodies})
    assert answer.status_code == 200, answer.text[:300]
    results = answer.json()["results"]
    singles = [post(url, body).json() for body in bodies]
    shape = [
        (r["status"], r["run_result"]["status"], r["run_result"]["return_code"], r["run_result"]["stdout"])
        for r in results
    ]
    assert shape == [
        ("Success", "Finished", 0, "1\n"),
        ("Failed", "Finished", 3, ""),
        ("Failed", "TimeLimitExceeded", None, ""),
        ("Failed", "TimeLimitExceeded", None, ""),
        ("Success", "Finished", 0, "hi\n"),
    ]
    assert shape == [
        (r["status"], r["run_result"]["status"], r["run_result"]["return_code"], r["run_result"]["stdout"])
        for r in singles
    ]
    assert [("azr" in r) for r in results] == [False, False, True, True, True]  # azr's result where azr's limits came
    assert [r["azr"]["status"] for r in results[2:4]] == ["timeout", "timeout"]
    seen = health(url)
    assert (seen["programs"], seen["running"], seen["queued"]) == (10, 0, 0), seen


@pytest.mark.slow(minutes=0.2)
def test_a_malformed_batch_is_a_422_naming_the_request_and_the_field_and_runs_nothing(server):
    url = server()
    good = {"code": "print(1)"}
    bad = {
        "not a list": {"requests": good},
        "empty": {"requests": []},
        "another key": {"requests": [good], "n": 1},
        "over the cap": {"requests": [good] * 257},
        "a bad request": {"requests": [good, {"code": 1}]},
        "a bad limit": {"requests": [good, good, {"code": "print(1)", "limits": {"memory_mb": 0.5}}]},
        "not JSON": "{requests: 1",
    }
    answers = {name: post_batch(url, body) for name, body in bad.items()}
    assert {n: a.status_code for n, a in answers.items()} == dict.fromkeys(bad, 422)
    assert answers["a bad request"].json()["detail"] == "requests[1]: code: expected a string"
    assert answers["a bad limit"].json()["detail"].startswith("requests[2]: ")
    assert health(url)["programs"] == 0  # nothing of a refused batch ran
    assert post_batch(url, {"requests": [good]}).json()["results"][0]["run_result"]["stdout"] == "1\n"


@pytest.mark.slow(minutes=0.3)
def test_a_batch_whose_client_went_away_stops_its_running_program_and_never_runs_the_queued(server):
    url = server("--workers", "1")
    body = {"requests": [{"code": "while True:\n    pass\n", "run_timeout": 60}] + [{"code": "print(1)"}] * 3}
    with pytest.raises(httpx2.TimeoutException):  # the client gives up after 1 s, the loop would run 60
        post_batch(url, body, timeout=1.0)
    started = time.monotonic()
    answer = post(url, {"code": "print(7)"}, timeout=45)
    assert answer.status_code == 200 and answer.json()["run_result"]["stdout"] == "7\n", answer.text[:300]
    assert time.monotonic() - started < 30  # the worker was freed long before the loop's 60 s
    time.sleep(1.0)  # a queued program of the abandoned batch would run now
    seen = health(url)
    assert (seen["programs"], seen["running"], seen["queued"]) == (2, 0, 0), seen
