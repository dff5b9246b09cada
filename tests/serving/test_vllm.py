"""The vLLM sidecar: the command it builds, its lifecycle against a stand-in server, and a real vLLM on CPU.

The stand-in is a real stdlib HTTP server installed as `vllm.entrypoints.openai.api_server` on PYTHONPATH, with a
worker child like vLLM's engine; it makes start-up failures and stubborn processes cheap to provoke. The live tests
use the session's `vllm_server` fixture (real vLLM serving the tiny model).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from azr.config import VllmConfig
from azr.errors import ConfigError
from azr.serving import group_members
from azr.serving.vllm import ENTRYPOINT, VllmServer, VllmServerError

REPO = Path(__file__).resolve().parents[2]

STAND_IN = textwrap.dedent(
    """
    import argparse, json, os, signal, subprocess, sys, time
    from http.server import BaseHTTPRequestHandler, HTTPServer

    print("pid", os.getpid(), flush=True)
    mode = os.environ.get("STAND_IN_MODE", "ok")
    if mode == "crash":
        sys.exit("stand-in: cannot load the model")
    parser = argparse.ArgumentParser()
    parser.add_argument("--model"); parser.add_argument("--host"); parser.add_argument("--port", type=int)
    parser.add_argument("--served-model-name")
    args, _ = parser.parse_known_args()
    # A worker in the server's process group, like vLLM's engine core; "stubborn" ones ignore SIGTERM.
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN) if %r else None; time.sleep(600)"
    worker = subprocess.Popen([sys.executable, "-c", code % (mode == "stubborn-worker")])
    if mode == "stubborn-worker":
        signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))  # the leader leaves its worker behind
    elif mode == "deaf":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # like vLLM's API server waiting on requests it dropped
    else:
        signal.signal(signal.SIGTERM, lambda *a: (worker.terminate(), sys.exit(0)))
    if mode == "never-ready":
        time.sleep(600)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            models = {"data": [{"id": args.served_model_name or args.model}]}
            body = {"/health": b"", "/v1/models": json.dumps(models).encode()}
            self.send_response(200 if self.path in body else 404)
            self.end_headers()
            self.wfile.write(body.get(self.path, b""))

        def log_message(self, *a):
            pass

    HTTPServer((args.host, args.port), Handler).serve_forever()
    """
)


@pytest.fixture
def stand_in(tmp_path):
    """Install the stand-in as `python -m vllm.entrypoints.openai.api_server`; returns a VllmServer factory."""
    package = tmp_path / "fake" / "vllm" / "entrypoints" / "openai"
    package.mkdir(parents=True)
    for directory in [package, package.parent, package.parent.parent]:
        (directory / "__init__.py").write_text("")
    (package / "api_server.py").write_text(STAND_IN)
    info = tmp_path / "fake" / "vllm-0.0.1.dist-info"  # what a version query finds, as for an installed vLLM
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.0.1\n")
    (info / "top_level.txt").write_text("vllm\n")

    def make(mode: str = "ok", **kwargs) -> VllmServer:
        env = {"PYTHONPATH": str(tmp_path / "fake"), "STAND_IN_MODE": mode}
        return VllmServer(model="m", env=env, log_path=tmp_path / "server.log", **kwargs)

    return make


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# --- the command and environment -----------------------------------------------------------------------------


def test_argv_is_the_openai_entrypoint_with_the_configured_flags():
    server = VllmServer(
        model="/m",
        python="/venv/bin/python",
        port=8123,
        served_model_name="tiny",
        max_model_len=1024,
        gpu_memory_utilization=0.5,
        tensor_parallel_size=2,
        extra_args=["--enforce-eager"],
    )
    assert server.argv() == [
        "/venv/bin/python", "-m", ENTRYPOINT, "--model", "/m", "--host", "127.0.0.1", "--port", "8123",
        "--served-model-name", "tiny", "--max-model-len", "1024", "--gpu-memory-utilization", "0.5",
        "--tensor-parallel-size", "2", "--enforce-eager",
    ]  # fmt: skip
    assert "--device" not in server.argv()  # vLLM picks its platform itself; the flag is gone from recent versions
    assert server.base_url == "http://127.0.0.1:8123/v1"


def test_argv_leaves_out_what_is_not_set():
    argv = VllmServer(model="/m", python="p", port=1).argv()
    assert argv == ["p", "-m", ENTRYPOINT, "--model", "/m", "--host", "127.0.0.1", "--port", "1"]


def test_environment_adds_telemetry_defaults_and_the_callers_values_win():
    env = VllmServer(model="m", env={"VLLM_CPU_KVCACHE_SPACE": "1"}).environ({"PATH": "/bin", "DO_NOT_TRACK": "0"})
    assert env == {
        "PATH": "/bin",
        "DO_NOT_TRACK": "0",
        "VLLM_NO_USAGE_STATS": "1",
        "PYTHONUNBUFFERED": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
    }


def test_from_config_takes_the_vllm_section():
    cfg = VllmConfig(
        python="/v/bin/python", port=9000, max_model_len=2048, extra_args=["--x"], gpus=[2, 3], env={"A": "1"}
    )
    server = VllmServer.from_config(cfg, "/model", startup_timeout_s=5, env={"B": "2"})
    assert server.argv() == [
        "/v/bin/python", "-m", ENTRYPOINT, "--model", "/model", "--host", "127.0.0.1", "--port", "9000",
        "--max-model-len", "2048", "--x",
    ]  # fmt: skip
    assert server.env == {"A": "1", "CUDA_VISIBLE_DEVICES": "2,3", "B": "2"}  # the caller's env adds to the section's
    assert server.startup_timeout_s == 5 and server.base_url == "http://127.0.0.1:9000/v1"


def test_a_whole_command_replaces_the_entrypoint():
    server = VllmServer(model="/m", python="/p", port=5, command=["/p", "-m", "other", "--port", "5"])
    assert server.argv() == ["/p", "-m", "other", "--port", "5"]


def test_the_module_imports_neither_vllm_nor_torch():
    code = "import sys, azr.serving.vllm; print([m for m in ('vllm', 'torch', 'transformers') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_missing_interpreter_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"^vllm\.python: .*nope does not exist$"):
        VllmServer(model="m", python=str(tmp_path / "nope")).start()


# --- lifecycle against the stand-in --------------------------------------------------------------------------


def test_start_waits_for_health_and_models_and_stop_removes_the_whole_group(stand_in):
    with stand_in(served_model_name="tiny") as server:
        assert server.port > 0 and server.model_name == "tiny"
        with urllib.request.urlopen(server.base_url + "/models", timeout=5) as resp:
            assert json.load(resp)["data"][0]["id"] == "tiny"
        members = group_members(server.pid)
        assert len(members) == 2  # the server and its worker, in the server's own group
        assert os.getpgid(server.pid) == server.pid != os.getpgrp()
    assert not any(alive(pid) for pid in members)
    assert server.stop() is None  # idempotent


def test_stop_kills_workers_that_ignore_sigterm_and_outlive_their_leader(stand_in):
    server = stand_in("stubborn-worker", stop_timeout_s=1).start()
    members = group_members(server.pid)
    assert len(members) == 2
    started = time.monotonic()
    server.stop()
    assert not any(alive(pid) for pid in members)
    assert time.monotonic() - started < 10


def test_a_server_that_exits_early_fails_fast_with_its_log(stand_in):
    started = time.monotonic()
    with pytest.raises(VllmServerError, match=r"(?s)exited with code 1 before it was ready.*cannot load the model"):
        stand_in("crash", startup_timeout_s=120).start()
    assert time.monotonic() - started < 30


def test_a_missing_vllm_names_the_install(tmp_path):
    server = VllmServer(model="m", env={"PYTHONPATH": ""}, log_path=tmp_path / "log")  # this venv has no vllm
    with pytest.raises(VllmServerError, match=r"scripts/vllm_cpu_env\.py"):
        server.start()


def test_a_server_never_ready_times_out_and_is_stopped(stand_in):
    server = stand_in("never-ready", startup_timeout_s=2)
    with pytest.raises(VllmServerError, match=r"not ready after 2s \(vllm.startup_timeout_s\)"):
        server.start()
    assert server.pid is None  # stopped on the way out
    server_pid = int(server.log_path.read_text().split()[1])
    assert not alive(server_pid) and not group_members(server_pid)


CALLER = textwrap.dedent(
    """
    import os, subprocess, sys, time
    from azr.serving.vllm import VllmServer
    sibling = subprocess.Popen(["sleep", "60"])  # another member of the caller's process group, like a data worker
    env = {"PYTHONPATH": sys.argv[1], "STAND_IN_MODE": sys.argv[4]}
    server = VllmServer(model="m", env=env, log_path=sys.argv[2], stop_timeout_s=float(sys.argv[5])).start()
    print(server.pid, sibling.pid, flush=True)
    if sys.argv[3] == "stop":
        server.stop()
        print("caller alive; sibling", "alive" if sibling.poll() is None else "dead", flush=True)
        sibling.kill()
    else:
        time.sleep(60)  # killed by the test
    """
)


def run_caller(stand_in_dir: Path, log: Path, action: str, mode: str = "ok", stop_s: float = 30) -> subprocess.Popen:
    """The caller (a trainer) in its own session, so that a teardown that hit the caller's group hits only it."""
    argv = [sys.executable, "-c", CALLER, str(stand_in_dir), str(log), action, mode, str(stop_s)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True, cwd=REPO)


def test_teardown_spares_the_callers_process_group(stand_in, tmp_path):
    stand_in()  # writes the stand-in package
    caller = run_caller(tmp_path / "fake", tmp_path / "server.log", "stop")
    out, _ = caller.communicate(timeout=120)
    server_pid = int(out.split()[0])
    assert caller.returncode == 0 and out.splitlines()[1] == "caller alive; sibling alive"
    assert not group_members(server_pid)


@pytest.mark.parametrize(
    ("mode", "stop_s"),
    [("ok", 30), ("deaf", 1)],
    ids=["the parent-death signal", "the reaper kills a server deaf to SIGTERM"],
)
def test_the_server_stops_when_its_caller_is_killed(stand_in, tmp_path, mode, stop_s):
    stand_in()
    caller = run_caller(tmp_path / "fake", tmp_path / "server.log", "wait", mode, stop_s)
    server_pid = int(caller.stdout.readline().split()[0])
    os.killpg(caller.pid, signal.SIGKILL)  # the caller's own group: caller and sibling, not the server
    caller.wait()
    deadline = time.monotonic() + 30
    while group_members(server_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = group_members(server_pid)
    if left:
        os.killpg(server_pid, signal.SIGKILL)  # leave no stand-in behind when this fails
    assert not left


def test_stop_disarms_the_reaper_first(stand_in):
    server = stand_in().start()
    reaper = server._reaper.process
    assert reaper.poll() is None and os.getsid(reaper.pid) == reaper.pid  # alive, in a session of its own
    server.stop()
    assert reaper.poll() is not None


# --- scripts/vllm_cpu_env.py --------------------------------------------------------------------------------


def run_env_script(*args: str) -> subprocess.CompletedProcess:
    script = REPO / "scripts" / "vllm_cpu_env.py"
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=60)


def test_env_script_reuses_a_complete_venv_and_prints_its_python(tmp_path):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import vllm_cpu_env
    finally:
        sys.path.pop(0)
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    (venv / vllm_cpu_env.STAMP).write_text(json.dumps(vllm_cpu_env.wanted_stamp()))
    done = run_env_script("--dir", str(venv))
    assert done.returncode == 0 and done.stdout == f"{venv}/bin/python\n" and not done.stderr


def test_env_script_never_wipes_a_directory_that_is_not_a_venv(tmp_path):
    (tmp_path / "precious.txt").write_text("keep")
    done = run_env_script("--dir", str(tmp_path))
    assert done.returncode == 1 and done.stderr.splitlines()[-1].startswith(f"error: {tmp_path} exists and is not")
    assert (tmp_path / "precious.txt").read_text() == "keep" and done.stdout == ""


# --- a real vLLM on CPU ----------------------------------------------------------------------------------------


def post(base_url: str, path: str, body: dict) -> dict:
    request = urllib.request.Request(
        base_url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as resp:
        return json.load(resp)


def test_vllm_serves_chat_completions(vllm_server):
    messages = [{"role": "user", "content": "Write a function that adds two numbers."}]
    # min_tokens (a vLLM extension): the random tiny model may otherwise pick end-of-turn first
    body = {"model": vllm_server.model, "messages": messages, "max_tokens": 8, "min_tokens": 4, "temperature": 0}
    reply = post(vllm_server.base_url, "/chat/completions", body)
    assert reply["model"] == "tiny" and reply["usage"]["completion_tokens"] >= 4
    assert isinstance(reply["choices"][0]["message"]["content"], str) and reply["choices"][0]["message"]["content"]


def test_vllm_serves_completions_and_lists_the_model(vllm_server):
    body = {"model": vllm_server.model, "prompt": "def add(a, b):", "max_tokens": 8, "min_tokens": 4}
    reply = post(vllm_server.base_url, "/completions", body)
    assert reply["choices"][0]["text"] and reply["usage"]["completion_tokens"] >= 4
    with urllib.request.urlopen(vllm_server.base_url + "/models", timeout=10) as resp:
        assert [m["id"] for m in json.load(resp)["data"]] == ["tiny"]


def test_vllm_runs_in_its_own_process_group_with_its_workers(vllm_server):
    """The fixture's teardown then asserts that every one of these is gone."""
    assert os.getpgid(vllm_server.pid) == vllm_server.pid != os.getpgrp()
    assert len(group_members(vllm_server.pid)) >= 3  # API server, engine core, worker


def test_a_run_that_fails_after_its_server_started_stops_it(stand_in, cli, tiny_model_dir, tmp_path):
    """azr train in adapter mode against the stand-in: the run fails after the server is up, as the policy loads
    (its weights file is damaged, which no check before the start can see), and the server's whole group is gone
    when the command returns."""
    stand_in()  # writes the stand-in package and its metadata
    damaged = tmp_path / "damaged-model"
    shutil.copytree(tiny_model_dir, damaged)
    (damaged / "model.safetensors").write_bytes(b"not a safetensors file")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        json.dumps(
            {
                "output_dir": str(tmp_path / "out"),
                "model": {"name_or_path": str(damaged), "adapter": {"r": 8}},
                "sandbox": {"workers": 1},
                "vllm": {"mode": "adapter", "python": sys.executable, "env": {"PYTHONPATH": str(tmp_path / "fake")}},
            }
        )
    )
    code, _, err = cli("train", "--config", recipe)
    assert code == 2 and "model.name_or_path: cannot load" in err and "deserializing" in err, err
    server = json.loads((tmp_path / "out" / "vllm" / "server.json").read_text())
    assert server["mode"] == "adapter" and server["url"].startswith("http://127.0.0.1:")
    assert not alive(server["pid"]) and not group_members(server["pid"])
    assert (tmp_path / "out" / "vllm" / "server.log").read_text().startswith(f"pid {server['pid']}")


def test_server_mode_runs_the_command_its_caller_passes_in(stand_in, tmp_path):
    """The Sidecar launches, records and stops server mode's server without knowing its command (TRL's, which
    azr.training builds: serving imports no trl); without one it refuses server mode when it is built."""
    from azr.config import load_config
    from azr.serving import Sidecar

    c = load_config(None, ["model.name_or_path=m", "vllm.mode=server", "vllm.gpus=[1]"])
    with pytest.raises(ValueError, match="trl_server"):
        Sidecar(c)
    built = []

    def command(cfg, max_model_len, log_path):
        built.append((cfg.vllm.mode, max_model_len, log_path))
        return stand_in()

    with Sidecar(c, max_model_len=64, trl_server=command) as sidecar:
        sidecar.start(tmp_path / "run")
        assert built == [("server", 64, tmp_path / "run" / "server.log")]
        recorded = json.loads((tmp_path / "run" / "server.json").read_text())
        assert recorded["url"] == sidecar.server.url and sidecar.group_port > 0  # TRL's weight-sync group's port
        pid = sidecar.server.pid
    assert not alive(pid) and not group_members(pid)
