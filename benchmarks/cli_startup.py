"""Wall time of `azr --help` (goal: under 0.3 s), against a bare `python -c pass` measured in the same run.

Usage: python benchmarks/cli_startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def _time(argv: list[str], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    bare = _time([sys.executable, "-c", "pass"], runs)
    cli = _time([sys.executable, "-c", "from azr.cli import main; main()", "--help"], runs)
    print(f"python -c pass : {bare * 1000:7.1f} ms (median of {runs})")
    print(
        f"azr --help     : {cli * 1000:7.1f} ms (median of {runs}); goal < 300 ms: {'met' if cli < 0.3 else 'MISSED'}"
    )
    print(f"azr's own share: {(cli - bare) * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
