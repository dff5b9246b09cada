"""How often the path of one `azr train` call re-enters a package: the tiny recipe, one GRPO step, under a profile hook.

Every call that crosses from one azr package into another (azr code calling azr code, directly or through a library
such as TRL in between) records the chain of azr packages on the stack at that moment, consecutive frames of one
package collapsed (cli > training > rollouts > training). A chain re-enters a package when it holds it again after
leaving it. Printed: the distinct chains that re-enter (the figure), the most re-entries in one chain, the packages
re-entered with their counts, and the chains themselves with --chains. A package here is azr/<name>/ or a top-level
module (azr/logs.py -> logs), as tests/test_layering.py counts them.

Usage: python benchmarks/train_path.py [--chains] [--json]   (about two minutes on two cores; builds the tiny model)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path
from types import FrameType

import azr

ROOT = str(Path(azr.__file__).resolve().parent) + "/"
RECIPE = Path(__file__).resolve().parent.parent / "examples" / "tiny.yaml"
# The tiny recipe cut to one GRPO step over two tasks: every phase runs (warm start, pass rate, GRPO, evaluation).
OVERRIDES = [
    "data.max_tasks=2",
    "sft.args.num_train_epochs=1",
    "sft.near_misses=0",
    "grpo.max_steps=1",
    "grpo.num_generations=2",
    "grpo.per_device_train_batch_size=2",
    "grpo.num_iterations=1",
    "grpo.max_completion_length=16",
    "grpo.save_steps=1000",
    "logging.pass_rate_tasks=2",
    "logging.pass_rate_samples=2",
    "logging.console=plain",
]


def package(filename: str) -> str | None:
    """The azr package a code object's file belongs to; None outside azr."""
    if not filename.startswith(ROOT):
        return None
    parts = filename[len(ROOT) :].split("/")
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


class PathRecorder:
    """The profile hook: on each call into azr from another azr package, the collapsed chain of the stack."""

    def __init__(self) -> None:
        self.chains: Counter[tuple[str, ...]] = Counter()
        self.example: dict[tuple[str, ...], str] = {}  # chain -> the first call that made it (caller -> callee)
        self._packages: dict[str, str | None] = {}  # filename -> package, cached: the hook runs on every call

    def _package(self, filename: str) -> str | None:
        if filename not in self._packages:
            self._packages[filename] = package(filename)
        return self._packages[filename]

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        if event != "call":
            return
        callee = self._package(frame.f_code.co_filename)
        if callee is None:
            return
        caller = frame.f_back
        while caller is not None and self._package(caller.f_code.co_filename) is None:
            caller = caller.f_back  # through a library (TRL calling azr's hooks back) to the azr frame below
        if caller is None or self._package(caller.f_code.co_filename) == callee:
            return
        chain: list[str] = []
        walk: FrameType | None = frame
        while walk is not None:
            name = self._package(walk.f_code.co_filename)
            if name is not None and (not chain or chain[-1] != name):
                chain.append(name)
            walk = walk.f_back
        key = tuple(reversed(chain))
        self.chains[key] += 1
        if key not in self.example:
            self.example[key] = f"{_where(caller)} -> {_where(frame)}"


def _where(frame: FrameType) -> str:
    return f"{frame.f_code.co_filename[len(ROOT) :]}:{frame.f_code.co_qualname}"


def reentries(chain: tuple[str, ...]) -> list[str]:
    """The packages `chain` enters again after leaving them, in order."""
    seen: set[str] = set()
    again = []
    for name in chain:
        if name in seen:
            again.append(name)
        seen.add(name)
    return again


def run_train(out: Path) -> None:
    from click.testing import CliRunner

    from azr.cli import azr as group

    model = out / "tiny-model"
    CliRunner().invoke(group, ["tiny-model", str(model)], catch_exceptions=False)
    args = ["train", "--config", str(RECIPE), "--output-dir", str(out / "run")]
    for item in [*OVERRIDES, f"model.name_or_path={model}"]:
        args += ["--set", item]
    result = CliRunner().invoke(group, args, catch_exceptions=False)
    if result.exit_code != 0:
        raise SystemExit(f"azr train exited {result.exit_code}: {result.output[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", action="store_true", help="print every chain that re-enters a package")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    opts = parser.parse_args()
    recorder = PathRecorder()
    with tempfile.TemporaryDirectory(prefix="azr-train-path-") as tmp:
        threading.setprofile(recorder)
        sys.setprofile(recorder)
        try:
            run_train(Path(tmp))
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
    looping = {c: reentries(c) for c in recorder.chains if reentries(c)}
    per_package = Counter(name for again in looping.values() for name in again)
    figures = {
        "chains": len(recorder.chains),
        "reentering_chains": len(looping),
        "most_reentries_in_one_chain": max((len(a) for a in looping.values()), default=0),
        "reentered": dict(per_package.most_common()),
    }
    if opts.json:
        shown = {" > ".join(c): recorder.example[c] for c in sorted(looping)}
        print(json.dumps(figures | ({"looping": shown} if opts.chains else {})))
        return
    print(f"package chains on the path of one `azr train`: {figures['chains']}")
    print(f"chains that re-enter a package: {figures['reentering_chains']}")
    print(f"most re-entries in one chain: {figures['most_reentries_in_one_chain']}")
    print("re-entered:", ", ".join(f"{k} {v}" for k, v in per_package.most_common()) or "none")
    if opts.chains:
        for chain in sorted(looping):
            print("  " + " > ".join(chain) + "    (first: " + recorder.example[chain] + ")")


if __name__ == "__main__":
    main()
