"""Usage accounting for remote models: one reply's token counts (`Usage`), read from either API's `usage` object,
and the thread-safe totals over a client's requests (`UsageTotals`) that usage logs and checkpoints carry."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Usage:
    """One reply's usage; reasoning tokens are part of completion_tokens, as the APIs count them."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0


@dataclass
class UsageTotals:
    """Totals over every request of one client, updated under a lock (requests run on several loops and threads)."""

    requests: int = 0
    failures: int = 0  # requests that failed for good
    retries: int = 0  # attempts beyond each request's first
    fast_failures: int = 0  # requests refused by the open circuit (also counted in failures)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0  # 0 unless prices were given
    latency_s: float = 0.0  # summed over requests
    in_flight: int = 0
    max_in_flight: int = 0  # measured: the most requests holding a concurrency slot at once

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["cost_usd"] = round(out["cost_usd"], 6)
        out["latency_s"] = round(out["latency_s"], 3)
        out["mean_latency_s"] = round(out["latency_s"] / out["requests"], 3) if out["requests"] else 0.0
        return out

    def carry(self, snapshot: dict[str, Any]) -> None:
        """Add the totals of an earlier `snapshot` (a resumed run's usage continues from its checkpoint)."""
        totals = {f.name: snapshot[f.name] for f in fields(self) if f.name in snapshot and "in_flight" not in f.name}
        self._add(snapshot.get("max_in_flight", 0), **totals)  # in flight: what runs now, never carried

    def _add(self, peak: int = 0, **counts: float) -> None:
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)
            self.max_in_flight = max(self.max_in_flight, self.in_flight, peak)

    def _record(self, reply: Any, prices: tuple[float, float] | None) -> None:
        u = reply.usage
        cost = (u.prompt_tokens * prices[0] + u.completion_tokens * prices[1]) / 1e6 if prices else 0.0
        self._add(requests=1, failures=int(not reply.ok), cost_usd=cost, latency_s=reply.latency_s, **asdict(u))


def usage_from(raw: Any) -> Usage:
    raw = raw if isinstance(raw, dict) else {}
    details = raw.get("completion_tokens_details") or raw.get("output_tokens_details") or {}
    prompt = raw.get("prompt_tokens", raw.get("input_tokens"))
    completion = raw.get("completion_tokens", raw.get("output_tokens"))
    return Usage(int(prompt or 0), int(completion or 0), int(details.get("reasoning_tokens") or 0))
