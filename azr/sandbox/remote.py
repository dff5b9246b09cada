"""The remote execution provider: programs graded on sandbox servers over HTTP (`sandbox.provider: remote`).

Speaks POST `/run_code` to `azr sandbox serve` (`api: azr`: azr's limits go out, its status and report channel come
back as extra fields; a batch of graded programs, `batch_size` of them, goes in one POST `/run_batch`, the HTTP cost
of one request) or to SandboxFusion (`api: sandboxfusion`: the program travels in azr's envelope, whose one
stdout line carries the report). A timeout, a 5xx, a refused or dropped connection is retried on another server; a
server failing `down_after` times in a row is left alone until its probe time. Results are keyed by job, one future
each, so a program retried elsewhere is counted once; one that no server could run ends as status `error` (an
infrastructure failure, masked by grading, never a zero) and is counted in `metrics()`; a program of a batch that
the server's own sandbox failed is run again alone.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from azr.config import RemoteSandboxConfig
from azr.errors import ConfigError
from azr.sandbox import envelope
from azr.sandbox.limits import ExecResult, Limits
from azr.sandbox.pool import reply_result

log = logging.getLogger(__name__)


class _Retry(Exception):
    """This attempt failed for the server's sake: try another."""


class _Refused(Exception):
    """The server refused the request itself (token, size, shape): no other server would do better."""


class _NoBatch(_Refused):
    """The server has no `/run_batch` (an azr server older than it): it takes one program a request."""


class _Lost(Exception):
    """No server answered this request, after every attempt: the last reason."""


class _Cancelled(Exception):
    """The caller went away before the request was sent again."""


@dataclasses.dataclass
class _Server:
    url: str
    failures: int = 0
    down_until: float = 0.0


def preload_digests(preload: Mapping[str, str]) -> dict[str, str]:
    """name -> sha256 of each preloaded module: how a server tells a client which harness its workers hold."""
    return {name: hashlib.sha256(source.encode()).hexdigest() for name, source in preload.items()}


class RemoteProvider:
    """An `ExecutionProvider` over sandbox servers. Thread-safe; `close()` releases its connections and threads."""

    def __init__(self, cfg: RemoteSandboxConfig, preload: Mapping[str, str] | None = None):
        import httpx2

        if not cfg.urls:
            raise ConfigError("sandbox.remote.urls: at least one server URL is needed")
        self.cfg = cfg
        token = None
        if cfg.token_env:
            token = os.environ.get(cfg.token_env)
            if not token:
                raise ConfigError(f"sandbox.remote.token_env: the environment variable {cfg.token_env} is not set")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx2.Client(headers=headers, limits=httpx2.Limits(max_connections=cfg.concurrency))
        self._servers = [_Server(url.rstrip("/")) for url in cfg.urls]
        self._turn = 0
        self._lock = threading.Lock()
        self._stats: Counter[str] = Counter()
        # Programs per request: many in one /run_batch to azr's servers, one to SandboxFusion's /run_code. The requests
        # in flight keep `concurrency` programs in flight, as one a request does.
        self._batch = cfg.batch_size if cfg.api == "azr" else 1
        self._unbatched: set[str] = set()  # servers that have no /run_batch
        self._dispatch = ThreadPoolExecutor(max(1, cfg.concurrency // self._batch), thread_name_prefix="azr-remote")
        self.size = cfg.concurrency
        self._wanted_preload = dict(preload or {})
        self._preload: dict[str, str] | None = None
        self._isolation = "sandboxfusion" if cfg.api == "sandboxfusion" else ""
        self._closed = False

    # What grading asks of a provider -----------------------------------------------------------------------------

    @property
    def preload(self) -> Mapping[str, str]:
        """The harness modules every server already holds (same source, by digest), so programs need not carry them;
        empty for SandboxFusion, or where a server differs or cannot be asked."""
        if self._preload is None:
            self._preload = {}
            if self.cfg.api == "azr" and self._wanted_preload:
                want = preload_digests(self._wanted_preload)
                healths = [self.health(s.url) for s in self._servers]
                if all(h is not None and h.get("preload") == want for h in healths):
                    self._preload = dict(self._wanted_preload)
        return self._preload

    @property
    def isolation(self) -> str:
        """The servers' own word ("namespaces", "none"); the weakest where they differ; "unknown" when none answers."""
        if not self._isolation:
            said = {h.get("isolation", "unknown") for h in map(self.health, (s.url for s in self._servers)) if h}
            self._isolation = "none" if "none" in said else said.pop() if len(said) == 1 else "unknown"
        return self._isolation

    def metrics(self) -> Mapping[str, float]:
        with self._lock:
            down = sum(s.down_until > time.monotonic() for s in self._servers)
            return {f"remote_{k}": float(v) for k, v in self._stats.items()} | {"remote_servers_down": float(down)}

    def run(
        self,
        code: str,
        limits: Limits | None = None,
        *,
        stdin: str | None = None,
        files: Mapping[str, str] | None = None,
        fetch: Sequence[str] = (),
        cancel: threading.Event | None = None,
    ) -> ExecResult:
        """One program on some server; status `error` (with the last reason) when none could run it. `cancel` is
        looked at before each try: a request already sent runs to its end on its server."""
        limits = limits or Limits()
        body, tag = self._body(code, limits, stdin, dict(files or {}), list(fetch))
        # The server queues a request until a worker is free and times the program from its start: the wait goes
        # on top, so that no overrun is mistaken for a lost request (and retried, then masked as an error).
        timeout = limits.wall_s + self.cfg.timeout_s + self.cfg.queue_timeout_s
        try:
            return self._exchange("/run_code", body, timeout, lambda answer: self._result(answer, tag), cancel)
        except _Refused as exc:
            self._count("refused")
            return ExecResult("error", backend="remote", note=f"{exc}")
        except _Cancelled:
            return ExecResult("error", backend="remote", note="cancelled: its caller went away")
        except _Lost as exc:
            return self._lost(str(exc))

    def _run_batch(self, jobs: Sequence[tuple[str, Limits | None]]) -> list[ExecResult]:
        """`jobs` in one `/run_batch` request to some server (each program run and timed on its own there), their
        results in order. A program the server's own sandbox could not run is run again alone, on any server; a
        server without the route gets each program alone, and no batch again."""
        limits = [one or Limits() for _, one in jobs]
        bodies = [self._body(code, one, None, {}, [])[0] for (code, _), one in zip(jobs, limits, strict=True)]
        # Each program's wall limit may pass one after another on a one-worker server: none is taken for lost.
        timeout = sum(one.wall_s for one in limits) + self.cfg.timeout_s + self.cfg.queue_timeout_s
        try:
            answers = self._exchange("/run_batch", {"requests": bodies}, timeout, lambda a: self._answers(a, len(jobs)))
        except _NoBatch as exc:
            with self._lock:
                if str(exc) not in self._unbatched:
                    log.info("sandbox: %s has no /run_batch (an older azr sandbox serve): one program a request", exc)
                self._unbatched.add(str(exc))
            return self._singly(jobs)
        except _Refused as exc:
            self._count("refused")
            return [ExecResult("error", backend="remote", note=f"{exc}") for _ in jobs]
        except _Lost as exc:
            return [self._lost(str(exc)) for _ in jobs]
        results = []
        for answer, (code, one) in zip(answers, jobs, strict=True):
            try:
                results.append(self._result(answer, ""))
            except _Retry:  # this program's run failed on that server's side: alone, on whichever server is next
                self._count("retries")
                results.append(self.run(code, one))
        return results

    def _singly(self, jobs: Sequence[tuple[str, Limits | None]]) -> list[ExecResult]:
        """`jobs` one a request, side by side (as many in flight as the batch would have been), their results in
        order: a batch a server would not take. Not on the dispatch pool this runs on, whose every thread may be
        waiting on such a batch."""
        if len(jobs) < 2:
            return [self.run(code, one) for code, one in jobs]
        with ThreadPoolExecutor(len(jobs), thread_name_prefix="azr-remote-single") as singles:
            return list(singles.map(lambda job: self.run(*job), jobs))

    def _answers(self, answer: dict[str, Any], count: int) -> list[dict[str, Any]]:
        results = answer.get("results")
        if not isinstance(results, list) or len(results) != count or not all(isinstance(r, dict) for r in results):
            raise _Retry(f"no {count} results in the answer")
        return results

    def _exchange(self, path: str, body: dict[str, Any], timeout: float, read, cancel: threading.Event | None = None):
        """`read(answer)` of the first server that answers `body` at `path` with something `read` takes (it raises
        _Retry for an answer that is not a result); a timeout, a 5xx, a lost connection or such an answer tries the
        next server, after a back-off. _Refused as the server said it; _Lost (the last reason) once every attempt
        failed; _Cancelled when `cancel` is set before an attempt."""
        reason = "no server tried"
        tried: list[_Server] = []
        for attempt in range(self.cfg.retries + 1):
            if cancel is not None and cancel.is_set():
                raise _Cancelled
            if attempt:
                self._count("retries")
                time.sleep(self.cfg.backoff_s * 2 ** (attempt - 1))
            server = self._pick(tried)
            tried.append(server)
            try:
                answer = self._post(server, path, body, timeout)
            except _Retry as exc:
                reason = f"{server.url}: {exc}"
                self._failed(server)
                continue
            except _NoBatch:
                raise
            except _Refused as exc:
                raise _Refused(f"{server.url}: {exc}") from None
            self._succeeded(server)
            try:
                return read(answer)
            except _Retry as exc:  # the server answered, but not with a result: its own failure
                reason = f"{server.url}: {exc}"
                self._failed(server)
        raise _Lost(reason)

    def _lost(self, reason: str) -> ExecResult:
        self._count("lost")
        log.warning("sandbox: a program could not be run on any server (%s)", reason)
        return ExecResult("error", backend="remote", note=f"no sandbox server could run this program: {reason}")

    def map(self, codes: Sequence[str], limits: Limits | Sequence[Limits] | None = None) -> list[ExecResult]:
        per_program = [limits] * len(codes) if limits is None or isinstance(limits, Limits) else list(limits)
        return list(self.imap(zip(codes, per_program, strict=True)))

    def imap(self, jobs: Iterable[tuple[str, Limits | None]]) -> Iterator[ExecResult]:
        jobs = list(jobs)
        size = self._batch if len(self._unbatched) < len(self._servers) else 1
        if size == 1:
            futures: list[Future] = [self._dispatch.submit(self.run, code, limits) for code, limits in jobs]
            for future in futures:  # one future per job: whatever was retried, each result is taken once
                yield future.result()
            return
        batches = [self._dispatch.submit(self._run_batch, jobs[i : i + size]) for i in range(0, len(jobs), size)]
        for batch in batches:  # one future per batch of jobs, each job's result taken once
            yield from batch.result()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._dispatch.shutdown(wait=False, cancel_futures=True)
        self._http.close()

    def __enter__(self) -> RemoteProvider:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def health(self, url: str) -> dict[str, Any] | None:
        """A server's `GET /health` answer; None when it gives none. A refused token is a one-line ConfigError."""
        import httpx2

        try:
            response = self._http.get(f"{url.rstrip('/')}/health", timeout=5.0)
        except httpx2.HTTPError:
            return None
        if response.status_code in (401, 403):
            raise ConfigError(f"sandbox.remote: {url} refused the token{self._token_source()} (HTTP 401)")
        if response.status_code != 200:
            return None
        try:
            answer = response.json()
        except ValueError:
            return None
        return answer if isinstance(answer, dict) else None

    # The wire ----------------------------------------------------------------------------------------------------

    def _body(
        self, code: str, limits: Limits, stdin: str | None, files: dict[str, str], fetch: list[str]
    ) -> tuple[dict[str, Any], str]:
        if self.cfg.api == "azr":
            body = {"code": code, "language": "python", "run_timeout": limits.wall_s, "memory_limit_MB": -1}
            body |= {"stdin": stdin, "files": files, "fetch_files": fetch}
            return body | {"limits": dataclasses.asdict(limits)}, ""
        program, tag = envelope.wrap(code, limits, stdin, files, fetch)
        # The envelope enforces azr's limits itself; the server's own limits only catch the envelope: room for both.
        memory = 4 * limits.memory_mb + 256
        return {
            "code": program,
            "language": "python",
            "compile_timeout": 10,
            "run_timeout": limits.wall_s + 5.0,
            "memory_limit_MB": memory,
            "stdin": "",
            "files": {},
        }, tag

    def _post(self, server: _Server, path: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        import httpx2

        self._count("requests")
        try:
            response = self._http.post(f"{server.url}{path}", json=body, timeout=timeout)
        except httpx2.TimeoutException:
            raise _Retry(f"no answer in {timeout:g}s") from None
        except httpx2.HTTPError as exc:  # refused, reset, the server died mid-answer
            raise _Retry(type(exc).__name__) from None
        status = response.status_code
        if status in (401, 403):
            raise _Refused(f"the server refused the token{self._token_source()} (HTTP {status})")
        if status == 413:
            raise _Refused("the request is larger than the server accepts (HTTP 413)")
        if status in (404, 405) and path == "/run_batch":
            raise _NoBatch(server.url)
        if status == 429 or status >= 500:
            raise _Retry(f"HTTP {status}")
        if status != 200:
            raise _Refused(f"HTTP {status}: {response.text[:200]}")
        try:
            answer = response.json()
        except ValueError:
            raise _Retry("the answer is not JSON") from None
        if not isinstance(answer, dict):
            raise _Retry("the answer is not a JSON object")
        return answer

    def _result(self, answer: dict[str, Any], tag: str) -> ExecResult:
        if self.cfg.api == "azr":
            fields = answer.get("azr")
            if not isinstance(fields, dict):
                raise _Retry(f"no result in the answer ({answer.get('message') or answer.get('status')})")
            known = {f.name for f in dataclasses.fields(ExecResult)} - {"files"}
            files = answer.get("files") if isinstance(answer.get("files"), dict) else {}
            result = ExecResult(**{k: v for k, v in fields.items() if k in known}, files=files)
            if result.status == "error":  # the server's own pool failed: another server may not
                raise _Retry(result.note or "the server's sandbox failed")
            return result
        if answer.get("status") == "SandboxError":
            raise _Retry(f"SandboxError: {str(answer.get('message', ''))[:200]}")
        run = answer.get("run_result") or {}
        if run.get("status") == "TimeLimitExceeded":
            return ExecResult("timeout", backend="sandboxfusion", note="the server's time limit ended the program")
        reply = envelope.unwrap(run.get("stdout") or "", tag)
        if reply is None:  # the envelope died before its line: the program took it down (a crash, as in the pool)
            note = f"the program ended its envelope (return code {run.get('return_code')})"
            return ExecResult("crashed", backend="sandboxfusion", note=note)
        if reply.get("status") == "error":
            raise _Retry(f"envelope: {reply.get('note', '')}")
        return reply_result(reply, "sandboxfusion")

    # Servers -----------------------------------------------------------------------------------------------------

    def _pick(self, tried: list[_Server]) -> _Server:
        """The next server in turn that is up and not yet tried for this job; else an up one; else the one whose
        probe comes first (a request to it is the probe)."""
        now = time.monotonic()
        with self._lock:
            order = self._servers[self._turn :] + self._servers[: self._turn]
            self._turn = (self._turn + 1) % len(self._servers)
            up = [s for s in order if s.down_until <= now]
            for candidates in ([s for s in up if s not in tried], up):
                if candidates:
                    return candidates[0]
            return min(self._servers, key=lambda s: s.down_until)

    def _failed(self, server: _Server) -> None:
        with self._lock:
            self._stats["failures"] += 1
            server.failures += 1
            if server.failures >= self.cfg.down_after:
                if server.down_until <= time.monotonic():
                    self._stats["marked_down"] += 1
                    log.warning("sandbox: %s marked down after %d failures in a row", server.url, server.failures)
                server.down_until = time.monotonic() + self.cfg.probe_interval_s

    def _succeeded(self, server: _Server) -> None:
        with self._lock:
            server.failures, server.down_until = 0, 0.0

    def _count(self, key: str) -> None:
        with self._lock:
            self._stats[key] += 1

    def _token_source(self) -> str:
        return (
            f" from ${self.cfg.token_env}" if self.cfg.token_env else " (none was sent: set sandbox.remote.token_env)"
        )
