"""Third-party start-up noise stays off the console and is in the log at debug level: the real lines, from where
they really come from (bitsandbytes' logger at import, transformers' FutureWarning), through `azr train`'s own
start (`preflight`), in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest

# bitsandbytes prints its kernels-community line only on CPUs with AVX512-BF16 (not this one) when the optional
# `kernels` package fails: the finder makes it believe the CPU has them, and `kernels` is made unimportable.
SCRIPT = """
import importlib.abc, importlib.machinery, sys
sys.modules["kernels"] = None

class AVX512BF16(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "bitsandbytes.functional":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            module.has_avx512bf16 = lambda: True
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, AVX512BF16())
from azr.cli.app import setup_logging
from azr.config import load_config
from azr.training import preflight

level, model, out = sys.argv[1:]
setup_logging(level)
preflight(load_config(None, [f"model.name_or_path={model}", f"output_dir={out}"]))  # imports TRL, bitsandbytes
assert "bitsandbytes" in sys.modules
from transformers import TrainingArguments
TrainingArguments(output_dir=out, gradient_checkpointing=True, use_cpu=True, report_to="none")  # its own notice
print("started")
"""
BNB = "Failed to load CPU gemm_4bit_forward from kernels-community"
DEPRECATED = "FutureWarning: `gradient_checkpointing` is deprecated"


@pytest.mark.parametrize("level", ["info", "debug"])
def test_library_notices_reach_the_log_at_debug_level_only(tiny_model_dir, tmp_path, level):
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, level, str(tiny_model_dir), str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and done.stdout == "started\n", done.stderr[-2000:]
    if level == "info":
        assert BNB not in done.stderr and DEPRECATED not in done.stderr, done.stderr
    else:
        lines = done.stderr.splitlines()
        assert any(line.startswith("DEBUG bitsandbytes.backends.cpu.ops: " + BNB) for line in lines), done.stderr
        assert any(line.startswith("DEBUG py.warnings: ") and DEPRECATED in line for line in lines), done.stderr
