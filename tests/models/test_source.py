"""Where the policy comes from, checked before it loads: local folders, and hub ids against a real HTTP server on
127.0.0.1 standing in for the hub (no test ever contacts a real hub)."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from azr.config import ModelConfig
from azr.errors import ConfigError
from azr.models import check_model


def test_a_local_model_folder_passes(tiny_model_dir):
    check_model(ModelConfig(name_or_path=str(tiny_model_dir)))


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("{tmp}/none", "model.name_or_path: no such directory: {tmp}/none$"),
        ("{tmp}/runs/tiny-model", "model.name_or_path: no such directory: {tmp}/runs/tiny-model; build the demo"),
        ("{tmp}/file", "model.name_or_path: not a directory: {tmp}/file$"),
        ("{tmp}", r"model.name_or_path: {tmp} holds no model \(no config.json or adapter_config.json\)$"),
        ("org/not-cached", "model.name_or_path: 'org/not-cached' is not in the local hub cache and the hub is off"),
        ("org//model", "model.name_or_path: 'org//model' is neither a local directory nor a hub id"),
    ],
)
def test_a_model_that_cannot_be_loaded_is_one_line(tmp_path, name, message):
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="^" + message.replace("{tmp}", str(tmp_path))):
        check_model(ModelConfig(name_or_path=name.replace("{tmp}", str(tmp_path))))


class _Hub(BaseHTTPRequestHandler):
    """The hub's model-info endpoint: one known model, 404 (RepoNotFound) for the rest, as the real hub answers."""

    def do_GET(self):
        known = self.path.split("?")[0].rstrip("/") == "/api/models/org/known"
        body = json.dumps({"id": "org/known", "sha": "0" * 40} if known else {"error": "Repository not found"})
        self.send_response(200 if known else 404)
        self.send_header("Content-Type", "application/json")
        if not known:
            self.send_header("X-Error-Code", "RepoNotFound")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def online(monkeypatch):
    """The hub on: offline switches cleared (at the env and in the library's constant, read at its import)."""
    from huggingface_hub import constants

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    return monkeypatch


@pytest.fixture
def hub(online, tmp_path):
    from huggingface_hub import constants

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    online.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    online.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))  # nothing cached
    yield
    server.shutdown()
    server.server_close()


def test_a_hub_id_the_hub_knows_passes(hub):
    check_model(ModelConfig(name_or_path="org/known"))


def test_an_unknown_hub_id_is_one_line(hub):
    with pytest.raises(ConfigError, match=r"^model\.name_or_path: the hub knows no model 'org/unknown' \(or it is"):
        check_model(ModelConfig(name_or_path="org/unknown"))


def test_a_hub_that_cannot_be_reached_is_one_line(online, tmp_path):
    from huggingface_hub import constants

    with socket.socket() as s:  # a port with nothing listening on it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    online.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    online.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    with pytest.raises(ConfigError) as err:
        check_model(ModelConfig(name_or_path="org/model"))
    message = str(err.value)
    assert message.startswith("model.name_or_path: the hub cannot be reached to look up 'org/model' (")
    assert message.endswith("); check the network (or HF_ENDPOINT), or give a local directory") and "\n" not in message
