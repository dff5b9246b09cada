"""`pip install .` into a fresh venv gives four console scripts that import and run (the seed's all failed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from azr.data.tasks import load_tasks

REPO = Path(__file__).resolve().parent.parent


pytestmark = pytest.mark.slow  # a real `pip install .` into a fresh venv, with an isolated build from PyPI


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("install")
    source = root / "src"  # build from a copy so the checkout gets no build/ or egg-info
    shutil.copytree(REPO / "azr", source / "azr", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # A real `pip install .` (isolated build backend from PyPI); --no-deps because the dependencies are this
    # interpreter's (put on PYTHONPATH below), which keeps the test from downloading torch again.
    subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--disable-pip-version-check",
            str(source),
        ],
        check=True,
        cwd=root,
    )
    return venv / "bin"


def _run(bin_dir: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    return subprocess.run([str(bin_dir / argv[0]), *argv[1:]], capture_output=True, text=True, env=env, cwd=cwd)


@pytest.mark.parametrize("script", ["azr", "azr-train", "azr-eval", "azr-gen"])
def test_console_scripts_run(installed, script, tmp_path):
    result = _run(installed, script, "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"Usage: {script} [OPTIONS]")


def test_installed_package_imports_from_the_venv_and_ships_its_data(installed, tmp_path):
    probe = _run(installed, "python", "-c", "import azr; print(azr.__file__)", cwd=tmp_path)
    assert probe.stdout.startswith(str(installed.parent)), probe.stdout  # not the checkout
    result = _run(installed, "azr", "data", "validate", "held-out", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    count = len(load_tasks("held-out"))
    assert f"held-out: {count} tasks, {count} passed, 0 failed" in result.stdout
    triplets = tmp_path / "t.jsonl"  # Absolute Zero's sandbox harness is shipped as a source file: it must be there
    triplets.write_text('{"program": "def f(x):\\n    return [x] * 2", "input": "1", "output": "[1, 1]"}\n')
    checked = _run(installed, "azr", "absolute-zero", "check", str(triplets), "--json", cwd=tmp_path)
    assert checked.stdout == '{"line": 1, "valid": true, "reason": ""}\n', checked.stderr
    error = _run(installed, "azr-train", "--config", "nope.yaml", cwd=tmp_path)
    assert (error.returncode, error.stderr) == (2, "azr-train: error: nope.yaml: config file not found\n")
