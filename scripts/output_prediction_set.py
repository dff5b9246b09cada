"""Build azr/data/output_prediction.jsonl, the output-prediction set `azr eval --dataset output-prediction` scores:
CRUXEval-style triplets (program + input -> output) made from the held-out split, which training never sees.

Each held-out task with a reference solution becomes its program with the entry point renamed `f`, and each test's
literal call arguments an input, exactly as Absolute Zero's seeds are made from the training split; the outputs are
computed in the sandbox by the mode's own validation, so every line passes `azr absolute-zero check`. Run from the
repository root: python scripts/output_prediction_set.py [--out PATH]. The same sandbox gives the same file.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from azr.absolute_zero import build_validator, task_candidates, write_triplets
from azr.config import AbsoluteZeroConfig, SandboxConfig
from azr.data import load_tasks

DEFAULT_OUT = Path("azr/data/output_prediction.jsonl")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where to write it [{DEFAULT_OUT}]")
    args = parser.parse_args(argv)
    tasks = load_tasks("held-out")
    singles, _ = task_candidates(tasks, n_inputs=1)
    singles = [dataclasses.replace(t, origin=t.origin.replace("seed:", "held-out:")) for t in singles]
    verdicts = build_validator(SandboxConfig(), AbsoluteZeroConfig()).validate(singles)
    valid = [v.triplet for v in verdicts if v.valid and v.triplet is not None]
    write_triplets(args.out, valid)
    print(f"{args.out}: {len(valid)} triplets from {len({t.program for t in valid})} of {len(tasks)} held-out tasks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
