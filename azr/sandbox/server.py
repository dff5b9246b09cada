"""`azr sandbox serve`: a local provider (azr's pool) behind HTTP, speaking SandboxFusion's POST `/run_code`.

A request in SandboxFusion's shape (`code`, `language` python or pytest, `stdin`, `run_timeout`, `memory_limit_MB`,
`files`, `fetch_files`; `compile_timeout` accepted) is run as SandboxFusion runs it, a script in a fresh working
directory, and gets its answer's shape (`status` Success/Failed/SandboxError, `run_result` {`status`
Finished/TimeLimitExceeded/Error, `return_code`, `stdout`, `stderr`, `execution_time`}, `files`); one that also
carries azr's `limits` gets the pool's own `ExecResult` back as `azr` (its status and report channel). What is not
offered (other languages, `/run_jupyter`) is a 4xx naming the field. azr's own clients may send many programs in one
POST `/run_batch` (`{"requests": [...]}`, each a `/run_code` body; `{"results": [...]}` back, in order), each run as
`/run_code` runs it: one request's HTTP cost for many programs. `GET /health` says the isolation, queue and
programs/s. Guards: a token (constant-time compare, `Authorization: Bearer` in any case) on every route when one is
set; a connection cap and time-outs for a request's headers and body (slow clients are closed, never waited on); a
size cap; 422 for every malformed body (deep nesting, odd keys, numbers past any limit, limits of the wrong type);
limit and file ceilings; a queue cap past which requests get 503 (the client tries another server). A request waits
in the queue until a worker is free and is dropped, never run, when its client goes away first (or past
`max_queue_s`, 503): its program's time starts when it runs, so an overrun is the program's `timeout` however long
it queued.
"""

from __future__ import annotations

import base64
import binascii
import collections
import dataclasses
import functools
import hmac
import math
import os
import threading
import time
from collections.abc import Collection
from typing import Any

from azr.inputs import load_json
from azr.sandbox.limits import ExecResult, Limits
from azr.sandbox.provider import ExecutionProvider
from azr.sandbox.remote import preload_digests

LOOPBACK = ("127.0.0.1", "::1", "localhost")
LANGUAGES = ("python", "pytest")
# SandboxFusion's pytest mode is `pytest FILE` in the working directory: the code goes in as a file, this runs it.
_PYTEST_DRIVER = "import sys\nimport pytest\n\nsys.argv[1:] = [{name!r}]\nraise SystemExit(pytest.console_main())\n"
_UNOFFERED = (
    "not offered by azr sandbox serve: only Python runs here ('python', 'pytest'); other languages need their "
    "toolchains in the sandbox (docs/sandbox-and-rewards.md)"
)


@dataclasses.dataclass(frozen=True)
class RunRequest:
    """One `/run_code` request, checked: what the provider is asked to run, and whether azr's result goes back."""

    code: str
    limits: Limits
    stdin: str | None = None
    files: dict[str, str] = dataclasses.field(default_factory=dict)  # name -> base64, as SandboxFusion sends them
    fetch: tuple[str, ...] = ()
    as_azr: bool = False


@dataclasses.dataclass
class ServeLimits:
    """What one server accepts."""

    max_request_bytes: int = 16 << 20
    max_queue: int = 256  # requests waiting beyond those running
    max_wall_s: float = 120.0
    max_memory_mb: int = 8192
    max_files: int = 1000  # `files` entries and `fetch_files` names, each
    max_files_mb: int = 16  # `files` decoded, all together; and files fetched back, all together
    max_path_chars: int = 1024
    max_output_bytes: int = 64 << 20  # the largest stdout, stderr or report cap a request may ask for
    max_connections: int = 1024  # open at once; one past it is closed as it is accepted
    header_timeout_s: float = 10.0  # a request's headers must arrive within this of its first byte (or connection)
    body_timeout_s: float = 60.0  # and its body within this of its headers
    max_queue_s: float = 300.0  # longest a request waits for a worker before it gets 503
    max_batch: int = 256  # programs in one `/run_batch` request


# Ceilings of the limits a request may set that no ServeLimits names: past any real program, short of overflowing
# an rlimit; each refused with 422 naming it.
_CEILINGS = {"file_size_mb": 1 << 20, "open_files": 1 << 20, "processes": 1 << 22}
_LIMIT_FIELDS = frozenset(f.name for f in dataclasses.fields(Limits))


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


def build_app(
    provider: ExecutionProvider,
    workers: int,
    token: str | None = None,
    caps: ServeLimits | None = None,
    offered: Collection[str] = (),
):
    """The Starlette app over `provider`, `workers` programs at a time; `offered` names the packages its programs
    may import (`language: pytest` needs pytest among them)."""
    import anyio
    from starlette.applications import Starlette
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    caps = caps or ServeLimits()
    turns = anyio.CapacityLimiter(workers)  # a request holds one while its program runs
    threads = anyio.CapacityLimiter(workers)  # the threads those runs block (anyio's default would be 40)
    meter = _Meter()
    state = {"in": 0}
    digests = preload_digests(provider.preload)
    expected = token.encode() if token else None

    def refused(request: Request) -> JSONResponse | None:
        if expected is None:
            return None
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        # RFC 7235: the scheme is case-insensitive
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), expected):
            return None
        return JSONResponse({"detail": "missing or wrong token"}, status_code=401)

    async def read_body(request: Request) -> bytes | None:
        """The whole body, or None past the size cap."""
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > caps.max_request_bytes:
                return None
        return body

    async def disconnected(request: Request, gone: threading.Event, scope: anyio.CancelScope | None = None) -> None:
        """Set `gone` (and cancel `scope`) when the client goes away: once the body is read, the next message a
        request receives is its client's disconnect."""
        while (await request.receive())["type"] != "http.disconnect":
            pass
        gone.set()
        if scope is not None:
            scope.cancel()

    async def wait_turn(request: Request, gone: threading.Event) -> str:
        """'' once this task holds a turn on a worker; else why not: its client went away while it queued (it is
        dropped, never run), or it queued past `max_queue_s`."""
        try:
            turns.acquire_nowait()
            return ""
        except anyio.WouldBlock:
            pass
        held = False
        with anyio.move_on_after(caps.max_queue_s):
            async with anyio.create_task_group() as group:
                group.start_soon(disconnected, request, gone, group.cancel_scope)
                await turns.acquire()
                held = True
                group.cancel_scope.cancel()
        if held and not gone.is_set():
            return ""
        if held:
            turns.release()
        return "the client went away" if gone.is_set() else f"queued over {caps.max_queue_s:g} s"

    async def run_program(request: Request, job: functools.partial, gone: threading.Event) -> ExecResult:
        """`job` on a worker thread; a client that goes away meanwhile cancels its program (`gone` is the job's
        cancel event), so an abandoned infinite loop does not hold a worker to its wall limit."""
        async with anyio.create_task_group() as group:
            group.start_soon(disconnected, request, gone)
            try:
                return await anyio.to_thread.run_sync(job, limiter=threads)
            finally:
                group.cancel_scope.cancel()

    async def read_checked(request: Request) -> object:
        """The request's JSON body, or the JSONResponse that refuses it: a wrong token, a body past the size cap or
        late, a client gone, a body that is not JSON."""
        if (denied := refused(request)) is not None:
            return denied
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > caps.max_request_bytes):
            return JSONResponse({"detail": f"request over {caps.max_request_bytes} bytes"}, status_code=413)
        try:
            with anyio.fail_after(caps.body_timeout_s):
                body = await read_body(request)
        except TimeoutError:
            late = f"request body not received within {caps.body_timeout_s:g} s"
            return JSONResponse({"detail": late}, status_code=408, headers={"Connection": "close"})
        except ClientDisconnect:
            return JSONResponse({"detail": "the client went away"}, status_code=400)
        if body is None:
            return JSONResponse({"detail": f"request over {caps.max_request_bytes} bytes"}, status_code=413)
        try:
            return load_json(body)
        except (ValueError, TypeError, RecursionError, OverflowError) as exc:
            return malformed(exc)

    def malformed(exc: BaseException) -> JSONResponse:
        detail = str(exc)[:300].encode("utf-8", "backslashreplace").decode()
        return JSONResponse({"detail": detail}, status_code=422)

    def job_of(run: RunRequest, gone: threading.Event) -> functools.partial:
        return functools.partial(
            provider.run, run.code, run.limits, stdin=run.stdin, files=run.files, fetch=run.fetch, cancel=gone
        )

    def answer_of(run: RunRequest, result: ExecResult) -> dict[str, Any]:
        answer = fusion_answer(result)
        if run.as_azr:  # the fetched files travel once, in SandboxFusion's `files`
            answer["azr"] = {k: v for k, v in dataclasses.asdict(result).items() if k != "files"}
        return answer

    async def run_code(request: Request) -> JSONResponse:
        body = await read_checked(request)
        if isinstance(body, JSONResponse):
            return body
        try:
            run = parse_request(body, caps, offered)
        except (ValueError, TypeError, RecursionError, OverflowError) as exc:  # every malformed body, named
            return malformed(exc)
        if state["in"] >= workers + caps.max_queue:
            return JSONResponse({"detail": "queue full"}, status_code=503)
        state["in"] += 1
        gone = threading.Event()
        try:
            why = await wait_turn(request, gone)
            if why:
                return JSONResponse({"detail": f"not run: {why}"}, status_code=503)
            try:
                result = await run_program(request, job_of(run, gone), gone)
            finally:
                turns.release()
        finally:
            state["in"] -= 1
        meter.add()
        return JSONResponse(answer_of(run, result))

    async def run_batch(request: Request) -> JSONResponse:
        """azr's own route: `{"requests": [<a /run_code body>, ...]}`, each program run as `/run_code` runs it (its
        own turn on a worker, its time from its own start), side by side as workers free up; `{"results": [<its
        answer>, ...]}` in order. One request for many programs: the HTTP cost of one. A program that queued past
        `max_queue_s` comes back as a SandboxError (the client runs it again elsewhere); a client that goes away
        cancels the programs running and drops the ones queued."""
        body = await read_checked(request)
        if isinstance(body, JSONResponse):
            return body
        try:
            runs = parse_batch(body, caps, offered)
        except (ValueError, TypeError, RecursionError, OverflowError) as exc:
            return malformed(exc)
        if state["in"] + len(runs) > workers + caps.max_queue:
            return JSONResponse({"detail": "queue full"}, status_code=503)
        state["in"] += len(runs)
        gone = threading.Event()
        results: list[ExecResult | None] = [None] * len(runs)

        async def one(i: int, run: RunRequest) -> None:
            held = False
            with anyio.move_on_after(caps.max_queue_s):  # the wait only: a program's time starts when it runs
                await turns.acquire()
                held = True
            if not held:
                results[i] = ExecResult("error", note=f"not run: queued over {caps.max_queue_s:g} s")
                return
            try:
                results[i] = await anyio.to_thread.run_sync(job_of(run, gone), limiter=threads)
            finally:
                turns.release()
            meter.add()

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(disconnected, request, gone, group.cancel_scope)
                async with anyio.create_task_group() as programs:
                    for i, run in enumerate(runs):
                        programs.start_soon(one, i, run)
                group.cancel_scope.cancel()  # every program ended: stop listening for the client
        finally:
            state["in"] -= len(runs)
        if gone.is_set():
            return JSONResponse({"detail": "the client went away"}, status_code=400)
        return JSONResponse({"results": [answer_of(run, result) for run, result in zip(runs, results, strict=True)]})

    async def run_jupyter(request: Request) -> JSONResponse:
        if (denied := refused(request)) is not None:
            return denied
        detail = "/run_jupyter: not offered by azr sandbox serve (no Jupyter kernel runs in its sandbox); use /run_code"
        return JSONResponse({"detail": detail}, status_code=404)

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

    posts = {"/run_code": run_code, "/run_batch": run_batch, "/run_jupyter": run_jupyter}
    routes = [Route(path, route, methods=["POST"]) for path, route in posts.items()]
    return Starlette(routes=[*routes, Route("/health", health)])


def parse_request(request: object, caps: ServeLimits, offered: Collection[str] = ()) -> RunRequest:
    """A `/run_code` body as a `RunRequest`; ValueError naming the field at fault."""
    if not isinstance(request, dict):
        raise ValueError("the body must be a JSON object")
    code, language = request.get("code"), request.get("language", "python")
    if not isinstance(code, str):
        raise ValueError("code: expected a string")
    if language not in LANGUAGES:
        raise ValueError(f"language: {str(language)[:40]!r} is {_UNOFFERED}")
    if language == "pytest" and "pytest" not in offered:
        raise ValueError("language: 'pytest' needs pytest offered to programs (azr sandbox serve --package pytest)")
    for name in ("run_timeout", "compile_timeout"):  # compile_timeout: nothing is compiled apart from the run
        value = request.get(name, 10)
        ceiling = caps.max_wall_s if name == "run_timeout" else math.inf  # compared exactly: an int of any length
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not (number and 0 < value <= ceiling and value < math.inf):
            raise ValueError(f"{name}: expected a positive number of seconds, got {str(value)[:40]!r}")
    if "limits" in request:
        given = request["limits"]
        if not isinstance(given, dict):
            raise ValueError("limits: expected an object")
        for key in given:
            if key not in _LIMIT_FIELDS:
                raise ValueError(f"limits: unknown field {key!r:.60} (expected {', '.join(sorted(_LIMIT_FIELDS))})")
        limits = Limits(**given)  # each checked as the type it is
    else:
        memory = request.get("memory_limit_MB", -1)
        if isinstance(memory, bool) or not isinstance(memory, int):
            raise ValueError("memory_limit_MB: expected an integer (-1: the default)")
        # SandboxFusion caps no output; an envelope's one line carries a whole reply (report included)
        limits = Limits(
            wall_s=float(request.get("run_timeout", 10)),
            output_bytes=64 << 20,
            file_size_mb=64,
            fetch_bytes=caps.max_files_mb << 20,
        )
        if memory > 0:
            limits = dataclasses.replace(limits, memory_mb=memory)
    _check_ceilings(limits, caps)
    stdin = request.get("stdin")
    if stdin is not None and not isinstance(stdin, str):
        raise ValueError("stdin: expected a string")
    if stdin and not _encodes(stdin):
        raise ValueError("stdin: not encodable as UTF-8 (a lone surrogate)")
    files = _files(request.get("files"), caps)
    fetch = _fetch_files(request.get("fetch_files"), caps)
    if language == "pytest":
        name = f"tmp{os.urandom(4).hex()}.py"  # SandboxFusion's `pytest FILE`, under a name like its own
        files[name] = base64.b64encode(code.encode("utf-8", "surrogatepass")).decode()
        code = _PYTEST_DRIVER.format(name=name)
    return RunRequest(code, limits, stdin or None, files, fetch, "limits" in request)


def parse_batch(request: object, caps: ServeLimits, offered: Collection[str] = ()) -> list[RunRequest]:
    """A `/run_batch` body (`{"requests": [...]}`, each a `/run_code` body) as its `RunRequest`s; ValueError naming
    the request and the field at fault."""
    if not isinstance(request, dict) or set(request) != {"requests"}:
        raise ValueError('the body must be a JSON object {"requests": [...]}')
    given = request["requests"]
    if not isinstance(given, list) or not 0 < len(given) <= caps.max_batch:
        raise ValueError(f"requests: expected a list of 1 to {caps.max_batch} /run_code bodies")
    runs = []
    for i, one in enumerate(given):
        try:
            runs.append(parse_request(one, caps, offered))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"requests[{i}]: {exc}") from None
    return runs


def _files(given: object, caps: ServeLimits) -> dict[str, str]:
    """`files`: name -> base64 content, written into the working directory; as in SandboxFusion, a null content
    or a name holding IGNORE_THIS_FILE is skipped. Names are relative, stay inside, and are bounded."""
    if given is None:
        return {}
    if not isinstance(given, dict):
        raise ValueError("files: expected an object of name -> base64 content")
    if len(given) > caps.max_files:
        raise ValueError(f"files: at most {caps.max_files} files here")
    kept, total = {}, 0
    for name, content in given.items():
        _check_path(name, "files", caps, relative=True)
        if content is None or "IGNORE_THIS_FILE" in name:
            continue
        if not isinstance(content, str):
            raise ValueError(f"files[{name!r}]: expected base64 text")
        try:
            total += len(base64.b64decode(content, validate=True))
        except (binascii.Error, ValueError):
            raise ValueError(f"files[{name!r}]: not base64") from None
        if total > caps.max_files_mb << 20:
            raise ValueError(f"files: over {caps.max_files_mb} MiB in all")
        kept[name] = content
    paths = {os.path.normpath(name): name for name in kept}
    for path, name in paths.items():
        if path == ".":
            raise ValueError(f"files: {name[:80]!r} names the working directory, a directory, not a file")
        for parent in _parents(path):
            if parent in paths:
                raise ValueError(f"files: {paths[parent][:80]!r} is a file and the directory of {name[:80]!r}")
    return kept


def _parents(path: str) -> list[str]:
    """ "a/b/c" -> ["a", "a/b"]."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _fetch_files(given: object, caps: ServeLimits) -> tuple[str, ...]:
    """`fetch_files`: names relative to the working directory, or absolute (SandboxFusion's own tests fetch
    `/mnt/b`); only files in places programs write come back (their working directory, /tmp, /mnt, /dev/shm)."""
    if given is None:
        return ()
    if not isinstance(given, list) or not all(isinstance(name, str) for name in given):
        raise ValueError("fetch_files: expected a list of file names")
    if len(given) > caps.max_files:
        raise ValueError(f"fetch_files: at most {caps.max_files} names here")
    for name in given:
        _check_path(name, "fetch_files", caps, relative=False)
    return tuple(dict.fromkeys(given))


def _check_path(name: object, field: str, caps: ServeLimits, relative: bool) -> None:
    if not isinstance(name, str) or not name or len(name) > caps.max_path_chars:
        raise ValueError(f"{field}: a name must be a string of 1 to {caps.max_path_chars} characters")
    shown = repr(name[:80])
    if "\x00" in name or not _encodes(name):
        raise ValueError(f"{field}: {shown}: a name holds a NUL or a lone surrogate")
    parts = name.split("/")
    if relative and (name.startswith("/") or ".." in parts):
        raise ValueError(f"{field}: {shown}: names are relative to the working directory, without '..'")
    if relative and not parts[-1]:
        raise ValueError(f"{field}: {shown}: names a directory, not a file")
    if any(len(part.encode()) > 255 for part in parts):
        raise ValueError(f"{field}: {shown}: a path component is over 255 bytes")


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_ceilings(limits: Limits, caps: ServeLimits) -> None:
    """ValueError naming the first limit past what this server runs: no request holds (or retires) a worker for
    a limit no program needs, such as a 10^18-byte output cap."""
    ceilings = {"wall_s": caps.max_wall_s, "cpu_s": caps.max_wall_s, "memory_mb": caps.max_memory_mb}
    ceilings |= {"output_bytes": caps.max_output_bytes, "report_bytes": caps.max_output_bytes, **_CEILINGS}
    ceilings["fetch_bytes"] = caps.max_files_mb << 20
    for name, ceiling in ceilings.items():
        value = getattr(limits, name)
        if value is not None and value > ceiling:
            raise ValueError(f"limits.{name}: at most {ceiling} here, got {value!r:.40}")


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
    message = result.note if status == "SandboxError" or result.note.startswith("fetch_files:") else ""
    answer = {"status": status, "message": message, "compile_result": None, "run_result": run}
    return answer | {"executor_pod_name": None, "files": dict(result.files)}


def serve(
    provider: ExecutionProvider,
    host: str,
    port: int,
    workers: int,
    token: str | None,
    caps: ServeLimits,
    ready,
    offered: Collection[str] = (),
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
    app = build_app(provider, workers, token, caps, offered)
    protocol = _guarded_protocol(caps)
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_keep_alive=30, http=protocol)
    uvicorn.Server(config).run(sockets=[sock])


def _guarded_protocol(caps: ServeLimits):
    """uvicorn's HTTP protocol with what it lacks against slow clients: a connection past `max_connections` is
    closed as it is accepted, and one whose request headers have not all arrived `header_timeout_s` after the
    connection opened (or after the first byte of its next request) is closed; bodies are timed by the handler."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    class GuardedProtocol(AutoHTTPProtocol):
        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._header_timer = None
            if len(self.connections) > caps.max_connections:
                transport.close()
                return
            self._expect_headers()

        def data_received(self, data: bytes) -> None:
            if self._header_timer is None and (self.cycle is None or self.cycle.response_complete):
                self._expect_headers()  # the first bytes of the next request on a kept-alive connection
            super().data_received(data)

        def connection_lost(self, exc) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None
            super().connection_lost(exc)

        def _expect_headers(self) -> None:
            waiting_after = self.cycle  # a new request replaces it once its headers are in

            def expire() -> None:
                self._header_timer = None
                if self.cycle is waiting_after and not self.transport.is_closing():
                    self.transport.close()

            self._header_timer = self.loop.call_later(caps.header_timeout_s, expire)

    return GuardedProtocol
