"""The API key of a vLLM server started outside azr (the Slurm job's), sent by TRL's server-mode client.

The job generates a key per run and hands it to the server and to every trainer in the environment
(`VLLM_API_KEY`, which `vllm serve` reads itself). TRL 1.16's `VLLMClient` sends no Authorization header, and vLLM
refuses its `/v1` requests without one; `send_server_key` gives the sessions that client opens the key. The key
never appears on a command line, in a log or in a file.
"""

from __future__ import annotations

import os
import types

from azr.secrets import register

KEY_ENV = "VLLM_API_KEY"


def send_server_key(key: str | None = None) -> bool:
    """Make TRL's vLLM client send `key` (default: $VLLM_API_KEY) as a bearer token; False when there is none."""
    key = key if key is not None else os.environ.get(KEY_ENV, "").strip()
    if not key:
        return False
    register(key)
    try:
        import requests
    except ImportError:  # TRL's client cannot run without it either, and says so itself
        return False
    from trl.generation import vllm_client

    class KeyedSession(requests.Session):
        def __init__(self) -> None:
            super().__init__()
            self.headers["Authorization"] = f"Bearer {key}"

    # Only this module's view of `requests` changes: every other user of requests.Session is left as it was.
    vllm_client.requests = types.SimpleNamespace(**{**vars(requests), "Session": KeyedSession})
    return True
