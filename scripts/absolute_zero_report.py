"""Summarise an Absolute Zero run from its generation log: proposals by validity reason, the learnability of the
valid ones, and the solver's verdicts, per task type. Run: python scripts/absolute_zero_report.py RUN_DIR [--json]

Reads `RUN_DIR/generations/*.jsonl` (one record per trained row: its role, type, the proposal's reason and solve
rate, the answer's verdict) and prints one table per figure; docs/absolute-zero.md's tiny-run figures come from it.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

from azr.logs import read_jsonl_records


def summarise(run: Path) -> dict:
    rows = [r for path in sorted((run / "generations").glob("*.jsonl")) for r in read_jsonl_records(path)]
    if not rows or "role" not in rows[0]:
        raise SystemExit(f"{run}: no Absolute Zero generation log (generations/*.jsonl with a 'role')")
    reasons: dict[str, Counter] = defaultdict(Counter)
    learn: dict[str, Counter] = defaultdict(Counter)
    verdicts: dict[str, Counter] = defaultdict(Counter)
    rates: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        kind = row["type"]
        if row["role"] == "propose":
            reasons[kind][row.get("reason") or "valid"] += 1
            rate = row.get("solve_rate")
            if row.get("valid") and rate is not None:
                rates[kind].append(rate)
                learn[kind]["never solved" if rate == 0 else "always solved" if rate == 1 else "partly solved"] += 1
        else:
            verdicts[kind][row.get("verdict") or "not judged"] += 1
    steps = max(r["step"] for r in rows)
    return {
        "steps": steps,
        "proposals": {k: dict(c) for k, c in reasons.items()},
        "learnability": {k: dict(c) for k, c in learn.items()},
        "mean_solve_rate_of_valid_proposals": {k: sum(v) / len(v) for k, v in rates.items() if v},
        "solver_verdicts": {k: dict(c) for k, c in verdicts.items()},
    }


def _table(title: str, counts: dict[str, dict[str, int]]) -> None:
    print(f"\n{title}")
    for kind, found in sorted(counts.items()):
        total = sum(found.values())
        shares = ", ".join(f"{name} {n} ({n / total:.0%})" for name, n in sorted(found.items(), key=lambda x: -x[1]))
        print(f"  {kind:<10} {total:>4}: {shares}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the run's output_dir")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args(argv)
    figures = summarise(args.run)
    if args.json:
        print(json.dumps(figures, indent=1))
        return 0
    print(f"{args.run}: {figures['steps']} steps")
    _table("proposals by validity reason", figures["proposals"])
    _table("valid proposals by learnability (solve rate of their samples)", figures["learnability"])
    print(
        "  mean solve rate: "
        + ", ".join(f"{k} {v:.2f}" for k, v in figures["mean_solve_rate_of_valid_proposals"].items())
    )
    _table("solver answers by verdict", figures["solver_verdicts"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
