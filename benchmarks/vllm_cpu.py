"""What the benchmarks that start a vLLM server share: the CPU server's flags and the interpreter of its venv.
Imported by the scripts beside it; not a benchmark itself."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The vLLM CPU flags the tests use (tests/conftest.py): eager, float32, and a batch that holds every prompt whole.
CPU_ARGS = ["--enforce-eager", "--dtype", "float32", "--max-num-seqs", "8", "--max-num-batched-tokens", "8192"]


def vllm_python(given: str | None) -> str:
    """`given`, else $AZR_VLLM_PYTHON, else the venv scripts/vllm_cpu_env.py builds."""
    if given or os.environ.get("AZR_VLLM_PYTHON"):
        return given or os.environ["AZR_VLLM_PYTHON"]
    sys.path.insert(0, str(REPO / "scripts"))
    import vllm_cpu_env

    return str(vllm_cpu_env.default_dir() / "bin" / "python")
