"""A finished (or killed) run's files as the tests read them: JSONL logs, the generation log, the phases done; and
the demo recipe's whole run, which two tests make."""

from __future__ import annotations

import json
from pathlib import Path

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


def train_demo(cli, out: Path, overrides: list[str], recipe: Path = DEMO_RECIPE) -> dict:
    """`azr train` of `recipe` (examples/tiny.yaml) into `out` with `--set` `overrides`; it must exit 0. Its
    summary.json."""
    sets = [x for o in overrides for x in ("--set", o)]
    code, _, err = cli("train", "--config", recipe, "--output-dir", out, *sets)
    assert code == 0, err
    return json.loads((out / "summary.json").read_text())
