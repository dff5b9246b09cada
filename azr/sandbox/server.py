"""`azr sandbox serve`: a local provider (azr's pool) behind HTTP, speaking SandboxFusion's POST `/run_code`.

A request in SandboxFusion's shape (`code`, `language: python`, `stdin`, `run_timeout`, `memory_limit_MB`) gets its
answer's shape (`status` Success/Failed/SandboxError, `run_result` {`status` Finished/TimeLimitExceeded/Error,
`return_code`, `stdout`, `stderr`, `execution_time`}); one that also carries azr's `limits` gets the pool's own
`ExecResult` back as `azr` (its status and report channel). `GET /health` says the isolation, queue and programs/s.
Guards: a token (constant-time compare) on every route when one is set, a request-size cap, limit ceilings, and
a queue cap past which requests get 503 (the client tries another server).
"""

from __future__ import annotations

import collections
import dataclasses
import hmac
import json
import time
from typing import Any

from azr.sandbox.limits import ExecResult, Limits
from azr.sandbox.provider import ExecutionProvider
from azr.sandbox.remote import preload_digests

LOOPBACK = ("127.0.0.1", "::1", "localhost")
# stdin for a SandboxFusion-style request: the program runs on an in-memory stdin, under its own file name, so its
# tracebacks read as they would without the wrapper.
_STDIN_WRAPPER = """import io as _io, sys as _sys
_sys.stdin = _io.StringIO({stdin!r})
exec(compile({code!r}, "<program>", "exec"), {{"__name__": "__main__", "__builtins__": __builtins__}})
"""


@dataclasses.dataclass
class ServeLimits:
    """What one server accepts."""

    max_request_bytes: int = 16 << 20
    max_queue: int = 256  # requests waiting beyond those running
    max_wall_s: float = 120.0
    max_memory_mb: int = 8192


class _Meter:
    """Programs finished over the last minute, for programs/s."""

    def __init__(self) -> None:
        self.done: collections.deque[float] = collections.deque()
        self.total = 0

    def add(self) -> None:
        now = time.monotonic()
        self.done.append(now)
        self.total += 1
        while self.done and self.done[0] < now - 60:
            self.done.popleft()

    def rate(self) -> float:
        if len(self.done) < 2:
            return 0.0
        return len(self.done) / max(time.monotonic() - self.done[0], 1e-3)


def build_app(provider: ExecutionProvider, workers: int, token: str | None = None, caps: ServeLimits | None = None):
    """The Starlette app over `provider`, `workers` programs at a time."""
    import anyio
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    caps = caps or ServeLimits()
    limiter = anyio.CapacityLimiter(workers)
    meter = _Meter()
    state = {"in": 0}
    digests = preload_digests(provider.preload)
    expected = f"Bearer {token}".encode() if token else None

    def refused(request: Request) -> JSONResponse | None:
        if expected is None:
            return None
        given = request.headers.get("authorization", "").encode()
        if hmac.compare_digest(given, expected):
            return None
        return JSONResponse({"detail": "missing or wrong token"}, status_code=401)

    async def run_code(request: Request) -> JSONResponse:
        if (denied := refused(request)) is not None:
            return denied
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > caps.max_request_bytes):
            return JSONResponse({"detail": f"request over {caps.max_request_bytes} bytes"}, status_code=413)
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > caps.max_request_bytes:
                return JSONResponse({"detail": f"request over {caps.max_request_bytes} bytes"}, status_code=413)
        try:
            code, limits, as_azr = _parse(json.loads(body), caps)
        except (ValueError, TypeError) as exc:
            return JSONResponse({"detail": str(exc)[:300]}, status_code=422)
        if state["in"] >= workers + caps.max_queue:
            return JSONResponse({"detail": "queue full"}, status_code=503)
        state["in"] += 1
        try:
            result = await anyio.to_thread.run_sync(provider.run, code, limits, limiter=limiter)
        finally:
            state["in"] -= 1
        meter.add()
        answer = fusion_answer(result)
        if as_azr:
            answer["azr"] = dataclasses.asdict(result)
        return JSONResponse(answer)

    async def health(request: Request) -> JSONResponse:
        if (denied := refused(request)) is not None:
            return denied
        running = min(state["in"], workers)
        return JSONResponse(
            {
                "status": "ok",
                "isolation": provider.isolation,
                "workers": workers,
                "running": running,
                "queued": state["in"] - running,
                "programs": meter.total,
                "programs_per_s": round(meter.rate(), 2),
                "preload": digests,
            }
        )

    return Starlette(routes=[Route("/run_code", run_code, methods=["POST"]), Route("/health", health)])


def _parse(request: Any, caps: ServeLimits) -> tuple[str, Limits, bool]:
    """(program, limits, azr-shaped?) from a request body; ValueError naming the field at fault."""
    if not isinstance(request, dict):
        raise ValueError("the body must be a JSON object")
    code, language = request.get("code"), request.get("language", "python")
    if not isinstance(code, str):
        raise ValueError("code: expected a string")
    if language != "python":
        raise ValueError(f"language: only 'python' is served here, got {language!r}")
    if request.get("files"):
        raise ValueError("files: not offered by azr sandbox serve (programs get an empty working directory)")
    if "limits" in request:
        if not isinstance(request["limits"], dict):
            raise ValueError("limits: expected an object")
        limits = Limits(**request["limits"])
    else:
        memory = request.get("memory_limit_MB", -1)
        # SandboxFusion caps no output; an envelope's one line carries a whole reply (report included)
        limits = Limits(wall_s=float(request.get("run_timeout", 10)), output_bytes=64 << 20, file_size_mb=64)
        if isinstance(memory, int) and memory > 0:
            limits = dataclasses.replace(limits, memory_mb=memory)
    if limits.wall_s > caps.max_wall_s or limits.memory_mb > caps.max_memory_mb:
        raise ValueError(f"limits: at most {caps.max_wall_s:g} s and {caps.max_memory_mb} MiB here")
    stdin = request.get("stdin")
    if stdin:
        if not isinstance(stdin, str):
            raise ValueError("stdin: expected a string")
        code = _STDIN_WRAPPER.format(stdin=stdin, code=code)
    return code, limits, "limits" in request


def fusion_answer(result: ExecResult) -> dict[str, Any]:
    """An `ExecResult` in SandboxFusion's RunCodeResponse shape."""
    if result.status == "error":
        run_status, return_code = "Error", None
    elif result.status == "timeout":
        run_status, return_code = "TimeLimitExceeded", None
    else:
        run_status = "Finished"
        return_code = -result.signal if result.signal else result.exit_code  # a signal as subprocess reports it
    status = "SandboxError" if run_status == "Error" else "Success" if return_code == 0 else "Failed"
    run = {
        "status": run_status,
        "execution_time": round(result.duration_s, 4),
        "return_code": return_code,
        "stdout": result.stdout,
        "stderr": result.stderr,
    }
    message = result.note if status == "SandboxError" else ""
    return {"status": status, "message": message, "compile_result": None, "run_result": run, "files": {}}


def serve(
    provider: ExecutionProvider, host: str, port: int, workers: int, token: str | None, caps: ServeLimits, ready
) -> None:
    """Serve until interrupted; `ready(port)` is called once the socket listens (port 0 picks a free one)."""
    import socket

    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: without it a small answer waits on the client's delayed ACK (~40 ms).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(1024)
    ready(sock.getsockname()[1])
    app = build_app(provider, workers, token, caps)
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_keep_alive=30)
    uvicorn.Server(config).run(sockets=[sock])
