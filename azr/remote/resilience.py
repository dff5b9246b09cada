"""Failure policy for calls to remote services: Retry-After parsing, a circuit breaker, and secret redaction.

Owns the small, thread-safe pieces `azr.remote.clients` combines with its retry loop; knows nothing of HTTP libraries or
of any API's request format. `Secret` and `redact` are `azr.secrets`' (the one redaction), named here for the
clients that use them on what a server sends back.
"""

from __future__ import annotations

import email.utils
import threading
import time
from collections.abc import Mapping
from datetime import UTC

from azr.secrets import Secret, redact

__all__ = ["CircuitBreaker", "Secret", "parse_retry_after", "redact", "retry_after"]


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date); None when absent or unreadable."""
    if not value or not value.strip():
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value.strip())
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, seconds) if seconds == seconds else None  # NaN is unreadable


def retry_after(headers: Mapping[str, str]) -> float | None:
    """The server's requested wait from response headers: `Retry-After` (seconds or an HTTP date), else the
    millisecond `retry-after-ms` some APIs send; None when neither is readable."""
    after = parse_retry_after(headers.get("retry-after"))
    if after is None and headers.get("retry-after-ms"):
        after = (parse_retry_after(headers["retry-after-ms"]) or 0.0) / 1000
    return after


class CircuitBreaker:
    """Fails fast after `threshold` consecutive failed requests (0: never); after `cooldown_s` it lets one probe
    through (half-open): the probe's success closes the circuit, its failure opens it again."""

    def __init__(self, threshold: int, cooldown_s: float):
        self.threshold, self.cooldown_s = threshold, cooldown_s
        self._lock = threading.Lock()
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False

    def admit(self) -> str:
        """'closed' (go ahead), 'probe' (go ahead as the half-open probe) or 'open' (fail fast)."""
        with self._lock:
            if self._opened_at is None:
                return "closed"
            if self._probing or time.monotonic() - self._opened_at < self.cooldown_s:
                return "open"
            self._probing = True
            return "probe"

    def is_open(self) -> bool:
        with self._lock:
            return self._opened_at is not None

    def record(self, ok: bool, probe: bool) -> None:
        """The outcome of an admitted request; every probe must report, or the circuit stays half-open."""
        with self._lock:
            if probe:
                self._probing = False
            if ok:
                self._failures, self._opened_at = 0, None
                return
            self._failures += 1
            if self.threshold and (probe or self._failures >= self.threshold):
                self._opened_at = time.monotonic()
