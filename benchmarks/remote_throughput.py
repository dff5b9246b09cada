"""Remote grading throughput (goal: one loopback `azr sandbox serve` at >= 0.9 of the local pool's programs/s).

The same N graded answers (a task's asserts against a right solution, as GRPO sends them) through (a) the local pool
with W workers, (b) one loopback server with W workers, the programs sent in batches (`sandbox.remote.batch_size`,
one POST /run_batch each) and (b1) one a request, (c) two loopback servers with W/2 workers each (the same cores),
and (d) one server spoken to as SandboxFusion (the envelope around each program); then the per-request
overhead: the median latency of one trivial program, one at a time, remote minus local. All arms run in this one
invocation, side by side; a rate counts only answers graded `passed`, and an arm with any other grade prints its
failures instead of a rate.

Usage: python benchmarks/remote_throughput.py [--n N] [--workers W] [--latency-n N] [--batch B] [--concurrency C]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from azr.config import RemoteSandboxConfig
from azr.data import Task
from azr.rewards import grade_many, harness_preload
from azr.sandbox import Limits, RemoteProvider, open_pool

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = "def f(x):\n    return x + 1\n"
LIMITS = Limits(wall_s=10.0)


def _pairs(n: int) -> list[tuple[Task, str]]:
    return [
        (Task(f"t{i}", "", [f"assert f({i}) == {i + 1}", f"assert f(-{i}) == {1 - i}"]), SOLUTION) for i in range(n)
    ]


def _rate(provider, pairs) -> tuple[float, list[str]]:
    grade_many(pairs[: 2 * 8], provider, LIMITS)  # warm: every worker started, connections open
    start = time.perf_counter()
    grades = grade_many(pairs, provider, LIMITS)
    elapsed = time.perf_counter() - start
    bad = [f"{g.status}: {'; '.join(g.failures)[:120]}" for g in grades if not g.passed]
    return (len(grades) - len(bad)) / elapsed, bad


def _latencies(providers: list, n: int) -> list[float]:
    """Median seconds of one trivial program, one at a time, on each provider: taken in turn, so that a change in
    the machine's load hits every provider alike."""
    times: list[list[float]] = [[] for _ in providers]
    for provider in providers:
        provider.run("pass", LIMITS)
    for _ in range(n):
        for provider, seen in zip(providers, times, strict=True):
            start = time.perf_counter()
            provider.run("pass", LIMITS)
            seen.append(time.perf_counter() - start)
    return [statistics.median(seen) for seen in times]


def _serve(workers: int, log: Path) -> tuple[subprocess.Popen, str]:
    argv = [sys.executable, "-m", "azr.cli", "sandbox", "serve", "--port", "0", "--workers", str(workers)]
    proc = subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT, env={**os.environ})
    deadline = time.monotonic() + 60
    while "serve: http://" not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the server did not start:\n{log.read_text()}")
        time.sleep(0.05)
    return proc, log.read_text().split("serve: ")[1].split()[0]


def _show(name: str, rate: float, bad: list[str], local: float | None) -> None:
    if bad:
        print(f"{name:<44} {len(bad)} answers not graded passed, e.g. {bad[0]}: no figure")
        return
    ratio = f"  ({rate / local:.2f} of local)" if local else ""
    print(f"{name:<44} {rate:8.1f} programs/s{ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=600, help="answers graded per arm")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--latency-n", type=int, default=50, help="trivial programs, one at a time, per latency")
    parser.add_argument("--batch", type=int, default=RemoteSandboxConfig().batch_size, help="programs per request")
    parser.add_argument("--concurrency", type=int, default=0, help="programs in flight (default: the recipe's)")
    args = parser.parse_args()
    pairs = _pairs(args.n)
    half = max(1, args.workers // 2)
    servers = []
    with tempfile.TemporaryDirectory() as folder:
        try:
            one = _serve(args.workers, Path(folder, "one.log"))
            servers.append(one[0])
            two = [_serve(half, Path(folder, f"two{i}.log")) for i in range(2)]
            servers += [p for p, _ in two]
            concurrency = args.concurrency or RemoteSandboxConfig().concurrency  # a recipe's default

            def remote(*urls: str, api: str = "azr", batch: int = args.batch) -> RemoteProvider:
                cfg = RemoteSandboxConfig(urls=list(urls), api=api, concurrency=concurrency, batch_size=batch)
                return RemoteProvider(cfg, harness_preload())

            print(f"{args.n} graded answers, {args.workers} workers in all, on {os.cpu_count()} cores")
            with open_pool("auto", workers=args.workers, preload=harness_preload()) as pool:
                local, bad = _rate(pool, pairs)
                _show(f"(a) local pool ({pool.backend.name})", local, bad, None)
            # the local pool is closed before the servers run: each arm has the cores to itself
            with remote(one[1]) as provider:
                rate, bad = _rate(provider, pairs)
                _show(f"(b) one loopback server, {args.batch} a request", rate, bad, local)
            with remote(one[1], batch=1) as provider:
                rate, bad = _rate(provider, pairs)
                _show("(b1) one loopback server, one a request", rate, bad, local)
            with remote(*(url for _, url in two)) as provider:
                rate, bad = _rate(provider, pairs)
                _show(f"(c) two loopback servers, {half} workers each", rate, bad, local)
            with remote(one[1], api="sandboxfusion") as provider:
                rate, bad = _rate(provider, pairs)
                _show("(d) one server as SandboxFusion (envelope)", rate, bad, local)
            with (
                open_pool("auto", workers=args.workers, preload=harness_preload()) as pool,
                remote(one[1]) as plain,
                remote(one[1], api="sandboxfusion") as fusion,
            ):
                local_latency, remote_latency, fusion_latency = _latencies([pool, plain, fusion], args.latency_n)
        finally:
            for proc in servers:
                proc.send_signal(signal.SIGTERM)
                proc.wait()
    print(f"latency of one trivial program: local {local_latency * 1e3:.2f} ms, remote {remote_latency * 1e3:.2f} ms")
    print(f"per-request overhead (remote - local): {(remote_latency - local_latency) * 1e3:.2f} ms")
    print(f"per-request overhead as SandboxFusion (envelope): {(fusion_latency - local_latency) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
