"""A real OpenAI-compatible HTTP server on 127.0.0.1 for the client tests, with scripted faults.

Happy path: /chat/completions, /completions and /responses answer `echo: <last input>` with fixed usage. Faults are
queued per request (`stub.script(...)`), chosen from the request (`stub.fault_for`) or set for every request
(`stub.always`); the stub records each request it
received and measures how many it was serving at once.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PROMPT_TOKENS, COMPLETION_TOKENS, REASONING_TOKENS = 11, 7, 3


@dataclass
class Fault:
    status: int = 200
    body: str | None = None  # raw body instead of the happy-path JSON (malformed JSON, error bodies)
    headers: dict[str, str] = field(default_factory=dict)
    hang_s: float = 0.0  # sleep before answering
    truncate: bool = False  # announce a longer body than is sent, then close the connection
    echo_auth: bool = False  # put the request's Authorization header into the body, as careless servers do


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class StubServer:
    def __init__(self, delay_s: float = 0.0):
        self.delay_s = delay_s  # happy-path latency, so that concurrency can be observed
        self.always: Fault | None = None
        self.fault_for: Callable[[Received], Fault | None] | None = None  # e.g. fail the same prompts on every retry
        self.received: list[Received] = []
        self.in_flight = self.max_in_flight = 0
        self._queue: list[Fault] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False  # hung handlers must not hold up shutdown
        self._httpd.request_queue_size = 128
        self._httpd.stub = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def script(self, *faults: Fault) -> None:
        """Faults for the next requests, one each, in order; then the happy path (or `always`)."""
        with self._lock:
            self._queue.extend(faults)

    def __enter__(self) -> StubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _admit(self, received: Received) -> Fault | None:
        with self._lock:
            self.received.append(received)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if self._queue:
                return self._queue.pop(0)
            chosen = self.fault_for(received) if self.fault_for else None
            return chosen or self.always

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1


def happy_payload(path: str, body: dict[str, Any]) -> dict[str, Any]:
    if path.endswith("/chat/completions"):
        text = "echo: " + str(body["messages"][-1]["content"])
        usage = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS}
        message = {"role": "assistant", "content": text, "reasoning_content": "let me think"}
        return {
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {**usage, "completion_tokens_details": {"reasoning_tokens": REASONING_TOKENS}},
        }
    if path.endswith("/completions"):
        usage = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS}
        return {
            "object": "text_completion",
            "choices": [{"index": 0, "text": "echo: " + body["prompt"]}],
            "usage": usage,
        }
    # /responses: the raw API shape (no output_text; a reasoning item before the message)
    last = body["input"] if isinstance(body["input"], str) else body["input"][-1]["content"]
    message = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "echo: " + last}]}
    return {
        "object": "response",
        "status": "completed",
        "output": [{"type": "reasoning", "summary": [{"type": "summary_text", "text": "hmm"}]}, message],
        "usage": {
            "input_tokens": PROMPT_TOKENS,
            "output_tokens": COMPLETION_TOKENS,
            "output_tokens_details": {"reasoning_tokens": REASONING_TOKENS},
        },
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers; a truncated body is then detectable

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        stub: StubServer = self.server.stub
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        received = Received(self.path, dict(self.headers), json.loads(raw or b"{}"))
        fault = stub._admit(received) or Fault()
        try:
            time.sleep(fault.hang_s or stub.delay_s)
        finally:
            stub._leave()  # before answering: once answered, the client may send its next request at once
        try:
            self._answer(fault, received)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout); nothing to answer
            self.close_connection = True

    def _answer(self, fault: Fault, received: Received) -> None:
        if fault.echo_auth:
            body = json.dumps({"error": {"message": f"bad key: {received.headers.get('Authorization')}"}})
        elif fault.body is not None:
            body = fault.body
        elif fault.status >= 400:
            body = json.dumps({"error": {"message": f"stub error {fault.status}"}})
        else:
            body = json.dumps(happy_payload(received.path, received.body))
        data = body.encode()
        self.send_response(fault.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data) + 100 if fault.truncate else len(data)))
        for name, value in fault.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data[: len(data) // 2] if fault.truncate else data)
        self.wfile.flush()
        if fault.truncate:
            self.close_connection = True


def fast_client(url: str, model: str, **kw):
    """A ChatClient for tests: the fake key's variable, millisecond backoffs, a 5 s timeout (override any)."""
    from azr.remote.clients import ChatClient

    settings = {"api_key_env": "AZR_FAKE_KEY", "backoff_s": 0.01, "backoff_max_s": 0.02, "timeout_s": 5, **kw}
    return ChatClient(url, model, **settings)


def use_fake_key(monkeypatch, key: str) -> None:
    """Put `key` in AZR_FAKE_KEY (what `fast_client` reads) and keep loopback requests off any proxy."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("AZR_FAKE_KEY", key)


@contextlib.contextmanager
def serving(monkeypatch, payload):
    """A StubServer whose happy path answers with `payload(request_body)`."""
    monkeypatch.setattr(sys.modules[__name__], "happy_payload", payload)
    with StubServer() as server:
        yield server


def stub_fixtures(key: str, payload: Callable[[str, dict], dict]):
    """A test module's two fixtures, to assign as `_env, stub = stub_fixtures(KEY, payload)`: `_env` (autouse) puts
    `key` in AZR_FAKE_KEY, and `stub` is a StubServer answering with `payload`."""
    import pytest

    @pytest.fixture(autouse=True)
    def _env(monkeypatch):
        use_fake_key(monkeypatch, key)

    @pytest.fixture
    def stub(monkeypatch):
        with serving(monkeypatch, payload) as server:
            yield server

    return _env, stub
