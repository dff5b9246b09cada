"""Audit throughput: programs per second of `azr data audit` against `azr data validate`'s, on the same task file,
measured side by side in one run on one warm pool.

validate runs one program per task (the reference against its tests); the audit runs the reference, every mutant
and probe, the reference twice more for its outputs, and each survivor against the oracle: many programs per task.
Both go through the same grading path and pool, so programs/second should be close; the audit's time per task is
that rate times its programs per task (linear in tasks x mutants).

Usage: python benchmarks/audit_throughput.py [PATH] [--format NAME] [--workers W] [--max-mutants M] [--tasks N]
(PATH defaults to the shipped train split.)
"""

from __future__ import annotations

import argparse
import time

from azr.audit import audit_tasks
from azr.config import SandboxConfig
from azr.data import load_tasks
from azr.rewards import limits_from_config, pool_from_config, validate_references


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", default="train")
    parser.add_argument("--format", default=None)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--max-mutants", type=int, default=30)
    parser.add_argument("--tasks", type=int, default=None, help="the first N tasks only")
    args = parser.parse_args()
    tasks = load_tasks(args.path, None, args.format)[: args.tasks]
    cfg = SandboxConfig(workers=args.workers)
    pool, limits = pool_from_config(cfg), limits_from_config(cfg)
    pool.map(["pass"] * pool.size)  # every worker started, outside the timed parts

    runs = pool.stats["runs"]
    start = time.perf_counter()
    validate_references(tasks, pool, limits)
    validate_s, validate_n = time.perf_counter() - start, pool.stats["runs"] - runs

    runs = pool.stats["runs"]
    start = time.perf_counter()
    audits = audit_tasks(tasks, pool, limits, args.max_mutants)
    audit_s, audit_n = time.perf_counter() - start, pool.stats["runs"] - runs

    print(f"{len(tasks)} tasks from {args.path}, {pool.size} workers, backend {pool.backend.name}")
    print(f"validate: {validate_n} programs in {validate_s:.2f} s = {validate_n / validate_s:.1f} programs/s")
    print(f"audit:    {audit_n} programs in {audit_s:.2f} s = {audit_n / audit_s:.1f} programs/s")
    mutants = sum(a.mutants for a in audits)
    print(
        f"audit/validate rate ratio {audit_n / audit_s / (validate_n / validate_s):.2f}; "
        f"{audit_n / max(1, len(tasks)):.1f} programs and {mutants / max(1, len(tasks)):.1f} mutants per task; "
        f"wall time ratio {audit_s / validate_s:.1f}x"
    )


if __name__ == "__main__":
    main()
