"""Shared fixtures: the tiny model (built once per session), a CLI runner that returns (code, stdout, stderr), and a
live vLLM server on CPU serving the tiny model (`vllm_server`)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from azr.cli import azr, invoke

REPO = Path(__file__).resolve().parent.parent
# One math thread per process (this one, and every run, server and rank the tests start): the models here are tiny,
# the machine has 2 cores shared with sandbox workers, and two OpenMP threads spinning against them made a 2-step
# CLI run 2.7x slower under load (45.5 s against 16.7 s). Set before torch is first imported.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    from azr.models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    """The tiny model's tokenizer, loaded once per test module (a module may change it without touching another's)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="session")
def demo_run(tiny_model_dir, tmp_path_factory) -> Path:
    """examples/tiny.yaml as shipped (seed 0) on the tiny model through `azr train`, once for the whole session (under
    pytest-xdist by the first worker to ask, the others waiting): the demo test checks this run, and the async demo
    continues from its warm start, which is bit for bit the one its own recipe trains. The run's folder."""
    from run_files import DEMO_RECIPE, once_per_session

    def make(folder: Path) -> None:
        sets = ["--set", f"model.name_or_path={tiny_model_dir}", "--set", "logging.console=plain"]
        code = invoke(azr, "azr", ["train", "--config", str(DEMO_RECIPE), "--output-dir", str(folder), *sets])
        assert code == 0, f"azr train of {DEMO_RECIPE.name} exited {code}: its log is in the captured output"

    return once_per_session(tmp_path_factory, "demo-run", make)


@dataclass(frozen=True)
class LiveVllm:
    """What `vllm_server` yields: an OpenAI-compatible endpoint on 127.0.0.1 serving the tiny model."""

    base_url: str  # http://127.0.0.1:PORT/v1 — pass as an OpenAI client's base_url; no API key needed
    model: str  # the served model name to put in requests ("tiny")
    python: str  # the vLLM venv's interpreter
    pid: int  # the server's pid, also its process group id
    log_path: Path  # the server's log


def vllm_python() -> tuple[str | None, str]:
    """The vLLM interpreter, from $AZR_VLLM_PYTHON or else the complete venv that scripts/vllm_cpu_env.py builds;
    (None, why) when there is none."""
    hint = "run `make vllm-env` (python scripts/vllm_cpu_env.py) or set AZR_VLLM_PYTHON"
    if os.environ.get("AZR_VLLM_PYTHON"):
        python = os.environ["AZR_VLLM_PYTHON"]
        return (python, "") if Path(python).is_file() else (None, f"AZR_VLLM_PYTHON={python} does not exist; {hint}")
    spec = importlib.util.spec_from_file_location("vllm_cpu_env", REPO / "scripts" / "vllm_cpu_env.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    venv = script.default_dir()
    if not script.is_complete(venv):
        return None, f"no complete vLLM venv at {venv}; {hint}"
    return str(venv / "bin" / "python"), ""


# Every vLLM CPU server the tests start. eager: torch.compile would add ~50 s to startup on 2 cores; float32: no
# bf16 kernels needed on the CPU. A token budget that holds every running prompt whole: vllm-cpu 0.32 crashes its
# engine when a request with a `seed` (azr eval sends one per sample) is split by chunked prefill ("CPU Generator
# does not use offset").
VLLM_CPU_ARGS = ["--enforce-eager", "--dtype", "float32", "--max-num-seqs", "8", "--max-num-batched-tokens", "8192"]
VLLM_CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def argv_flag(argv: list[str], name: str) -> str | None:
    """The value of `--name VALUE` or `--name=VALUE` in a server's argv (None: not given)."""
    for i, arg in enumerate(argv):
        if arg == name:
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def require_vllm_python() -> str:
    """The vLLM interpreter; skips the test when there is none, unless AZR_REQUIRE_VLLM=1 (CI), which fails."""
    python, reason = vllm_python()
    if python is None:
        if os.environ.get("AZR_REQUIRE_VLLM") == "1":
            pytest.fail(f"AZR_REQUIRE_VLLM=1 but {reason}")
        pytest.skip(reason)
    return python


@pytest.fixture(scope="session")
def vllm_server(tiny_model_dir, tmp_path_factory):
    """A real vLLM server (CPU) on the tiny model for the whole session; yields a `LiveVllm`. Skips when no vLLM
    venv is found, unless AZR_REQUIRE_VLLM=1 (CI), which fails instead. Startup takes about a minute."""
    from azr.config import VllmConfig
    from azr.serving import VllmServer, group_members
    from azr.serving.modes import seeded_sampling_args

    python = require_vllm_python()
    config = json.loads((tiny_model_dir / "config.json").read_text())
    assert config["hidden_size"] // config["num_attention_heads"] >= 32, "vLLM's CPU attention needs head_dim >= 32"
    assert (tiny_model_dir / "chat_template.jinja").exists(), "/v1/chat/completions needs a chat template"
    server = VllmServer(
        model=str(tiny_model_dir),
        python=python,
        served_model_name="tiny",
        max_model_len=1024,
        # the flags azr's own servers add on a CPU build (no partial prefills: seeded requests would kill the engine)
        extra_args=[*VLLM_CPU_ARGS, *seeded_sampling_args(VllmConfig(python=python, env=VLLM_CPU_ENV), 1024)],
        env=VLLM_CPU_ENV,
        log_path=tmp_path_factory.mktemp("vllm") / "server.log",
        startup_timeout_s=540,
    )
    with server:
        yield LiveVllm(server.base_url, server.model_name, python, server.pid, server.log_path)
        pid = server.pid
    assert not group_members(pid), "vLLM processes outlived the server's teardown"


@pytest.fixture
def cli(capsys):
    """Run `azr ARGS...` in-process the way the console script does; returns (exit code, stdout, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        code = invoke(azr, "azr", [str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def write(tmp_path):
    """Write a text file under tmp_path and return its path."""

    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    return _write


@pytest.fixture(autouse=True)
def _no_hub(monkeypatch):
    """Nothing in the tests may reach a model hub."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="module")
def grader():
    """A CodeGrader on its own two-worker bwrap pool, shared by one module's tests."""
    from azr.rewards.functions import CodeGrader
    from azr.sandbox import Limits, open_pool

    pool = open_pool("bwrap", workers=2)
    yield CodeGrader(pool, Limits(wall_s=10.0))
    pool.close()


@pytest.fixture(scope="session")
def az_pool():
    """A two-worker bwrap pool for Absolute Zero's checks, shared by the session."""
    from azr.sandbox import open_pool

    pool = open_pool("bwrap", workers=2)
    yield pool
    pool.close()


# Session fixtures that start a server: a test that uses one is slow whatever its own marks say.
SERVER_FIXTURES = {"vllm_server"}
_running: list[pytest.Item] = []  # the test being set up, run or torn down


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _guard_training()
    _running.append(item)
    try:
        return (yield)
    finally:
        _running.pop()


def _refuse_unless_slow(what: str, original, applies=lambda *args, **kwargs: True):
    """Wrap `original` so that a test not marked `slow` (or a fixture it sets up) that calls it fails, naming
    itself: the fast path (`make test-fast`, -m "not slow") never trains a model or starts a vLLM server."""

    def guarded(*args, **kwargs):
        item = _running[-1] if _running else None
        if item is not None and item.get_closest_marker("slow") is None and applies(*args, **kwargs):
            pytest.fail(f"{item.nodeid} {what}: mark it @pytest.mark.slow (or use a fixture that does not)")
        return original(*args, **kwargs)

    guarded._azr_guard = True
    return guarded


_patch = pytest.MonkeyPatch()


def _guard_training() -> None:
    """Refuse training (transformers' Trainer.train, which TRL's trainers run) to tests not marked `slow`, once
    its trainer is loaded (test modules that train import it when they are collected): a run of a few light tests
    never pays for importing it."""
    module = sys.modules.get("transformers.trainer")  # loaded with TRL or any trainer
    if module is not None and not getattr(module.Trainer.train, "_azr_guard", False):
        _patch.setattr(module.Trainer, "train", _refuse_unless_slow("trains a model", module.Trainer.train))


@pytest.fixture(scope="session", autouse=True)
def _slow_work_is_marked_slow():
    """Starting a real vLLM server (from another interpreter: this one has no vLLM, so a server on it is a
    stand-in) is refused to any test not marked `slow`, as training is (`_guard_training`). Training in a
    subprocess (`azr train` as a command, torchrun) is marked by hand."""
    from azr.serving import VllmServer

    real = lambda s: Path(s.python).is_file() and Path(s.python).resolve() != Path(sys.executable).resolve()  # noqa: E731
    _patch.setattr(VllmServer, "start", _refuse_unless_slow("starts a vLLM server", VllmServer.start, real))
    yield
    _patch.undo()


@pytest.hookimpl(tryfirst=True)  # before -m "not slow" deselects by mark
def pytest_collection_modifyitems(config, items):
    """A test that uses a server fixture is marked `slow`. Tests marked `network` need the internet, which CI has
    not: they skip, saying so, unless AZR_NETWORK_TESTS=1. The longest modules run first (`longest_modules_first`)."""
    for item in items:
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    longest_modules_first(items)
    _skip_network_tests(items)


def _skip_network_tests(items: list[pytest.Item]) -> None:
    if os.environ.get("AZR_NETWORK_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="needs the internet; set AZR_NETWORK_TESTS=1 to run it")
    for item in items:
        if "network" in item.keywords:
            item.add_marker(skip)


def longest_modules_first(items: list[pytest.Item]) -> None:
    """Reorder `items` (the same way in every process) so that the modules expected to take longest come first, each
    module's tests in their own order. `make test` runs two pytest-xdist workers with `--dist loadfile
    --no-loadscope-reorder`: each module goes whole to one worker (its module fixtures are built once), in this
    order, so the long ones start first and end with the many short ones that follow. A module's weight is the sum
    of its slow tests' `@pytest.mark.slow(minutes=N)`, where N is 0.1 unless given (most slow tests take seconds);
    a module without slow tests weighs 0."""
    weight: dict[str, float] = {}
    for item in items:
        mark = item.get_closest_marker("slow")
        module = item.nodeid.split("::")[0]
        weight[module] = weight.get(module, 0.0) + (float(mark.kwargs.get("minutes", 0.1)) if mark else 0.0)
    items.sort(key=lambda item: -weight[item.nodeid.split("::")[0]])  # stable: each module keeps its order


# ------------------------------------------------------------------------------------------------ timeout headroom
HEADROOM = 2.0  # a test should end in half its timeout on a quiet machine, so a loaded hour cannot fail it
_took: dict[str, list] = {}  # nodeid -> [seconds of setup + call + teardown, its timeout]


def timeout_of(item: pytest.Item) -> float | None:
    """The pytest-timeout limit of `item`: its own `@pytest.mark.timeout(N)`, else `--timeout` (None: no limit)."""
    mark = item.get_closest_marker("timeout")
    if mark is None:
        limit = item.config.getoption("timeout", None)
    else:
        limit = mark.args[0] if mark.args else mark.kwargs.get("timeout")
    return float(limit) if limit else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "setup":  # travels with the report to the xdist controller, which prints the summary
        report.user_properties.append(("timeout_s", timeout_of(item)))
    return report


def pytest_runtest_logreport(report):
    took = _took.setdefault(report.nodeid, [0.0, None])
    took[0] += report.duration
    took[1] = dict(report.user_properties).get("timeout_s", took[1])


def pytest_terminal_summary(terminalreporter):
    """Every test that took more than half its timeout, named at the end of the run (`make test`, CI)."""
    close = sorted((s / t, s, t, n) for n, (s, t) in _took.items() if t and s * HEADROOM > t)
    if close:
        terminalreporter.section(f"tests within {HEADROOM:g}x of their timeout")
        for _, seconds, limit, nodeid in reversed(close):
            terminalreporter.line(f"{seconds:7.1f} s of {limit:6.0f} s  {nodeid}")
