"""TRL's server-mode client sends the job's vLLM key: against a real loopback server that refuses /v1 without it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

KEY = "job-key-0123456789abcdef"


class _Guarded(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        ok = self.path == "/health" or self.headers.get("Authorization") == f"Bearer {KEY}"
        body = json.dumps({"data": [{"id": "served"}]} if ok else {"error": "Unauthorized"}).encode()
        self.send_response(200 if ok else 401)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_trl_client_sends_the_key_from_the_environment(monkeypatch):
    # requests comes with vllm on a GPU box; the CPU install pins it so that this runs everywhere
    from trl.generation import vllm_client

    from azr.serving.auth import send_server_key

    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setattr(vllm_client, "is_vllm_available", lambda: True)  # the client itself needs only requests
    monkeypatch.setattr(vllm_client, "requests", vllm_client.requests)  # undone after the test
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Guarded)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(Exception, match="401"):
            vllm_client.VLLMClient(base_url=url)
        monkeypatch.setenv("VLLM_API_KEY", KEY)
        assert send_server_key() is True
        assert vllm_client.VLLMClient(base_url=url).model == "served"
    finally:
        server.shutdown()


def test_no_key_changes_nothing(monkeypatch):
    from azr.serving.auth import send_server_key

    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    assert send_server_key() is False
