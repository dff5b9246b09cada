"""A finished (or killed) run's files as the tests read them: JSONL logs, the generation log, the phases done; the
demo recipe's whole run; a run made once per test session, whichever worker asks first (`once_per_session`); and a
run folder that continues another run's warm start (`continue_warm_start`)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

DEMO_RECIPE = Path(__file__).resolve().parents[1] / "examples" / "tiny.yaml"


def read_jsonl(path: Path) -> list[dict]:
    """Every line of `path`, each of which must parse as a JSON object."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert all(isinstance(r, dict) for r in records), path
    return records


def read_generations(out: Path) -> list[dict]:
    """Every record of the run's generation log (generations/generations-*.jsonl), in file order."""
    return [r for path in sorted((out / "generations").glob("generations-*.jsonl")) for r in read_jsonl(path)]


def read_phases(out: Path) -> list[str]:
    """The phases state.json says are done, in order."""
    return list(json.loads((out / "state.json").read_text())["phases"])


def train_demo(cli, out: Path, overrides: list[str], recipe: Path = DEMO_RECIPE, resume: bool = False) -> dict:
    """`azr train` of `recipe` (examples/tiny.yaml) into `out` with `--set` `overrides` (and `--resume-from latest`
    if `resume`); it must exit 0. Its summary.json."""
    sets = [x for o in overrides for x in ("--set", o)] + (["--resume-from", "latest"] if resume else [])
    code, _, err = cli("train", "--config", recipe, "--output-dir", out, *sets)
    assert code == 0, err
    return json.loads((out / "summary.json").read_text())


def once_per_session(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], object]) -> Path:
    """`make(folder)` run once for the whole test session, its folder returned to every caller. Under pytest-xdist a
    session fixture is set up once per worker, so the folder lies in the session's temp root, which the workers
    share, and a file lock makes the others wait for the first; a make that failed fails its later callers at once,
    pointing at the first."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # pytest-of-<user>/pytest-<n>/, beside each worker's popen-gw<k>/
    folder, done, failed = root / name, root / f"{name}.done", root / f"{name}.failed"
    with open(root / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if failed.exists():
            pytest.fail(f"{name}: the session's one make of it failed in another test ({failed.read_text()})")
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a killed worker left
            try:
                make(folder)
            except BaseException as exc:  # a failed assertion or a timeout alike: the others must not wait for it again
                failed.write_text(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
                raise
            done.touch()
    return folder


def continue_warm_start(run: Path, out: Path) -> None:
    """Make `out` the run `run` was when its warm start and the pass rate before GRPO had finished: its marker, its
    warm start (`sft/`: the final model and the near misses), state.json with those two phases and their records in
    metrics.jsonl. `azr train --resume-from latest` on `out` then goes on with GRPO, under its own recipe."""
    from azr.config.recipe import RUN_MARKER

    kept = ("sft", "eval_before")
    out.mkdir(parents=True)
    shutil.copy2(run / RUN_MARKER, out / RUN_MARKER)
    shutil.copytree(run / "sft", out / "sft", ignore=shutil.ignore_patterns("checkpoints"))
    phases = json.loads((run / "state.json").read_text())["phases"]
    (out / "state.json").write_text(json.dumps({"phases": {p: phases[p] for p in kept}}))
    records = [r for r in read_jsonl(run / "metrics.jsonl") if r.get("phase") in kept]
    (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
