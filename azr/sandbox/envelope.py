"""The envelope: a program wrapped so that all its sandbox would send back travels on stdout, for servers without
descriptor 3 (SandboxFusion's `/run_code`). It runs the program as azr's worker does (`worker.py`'s `Worker.run`,
shipped as source: fork, setsid, azr's rlimits and wall clock, captured stdout/stderr/report) and prints the reply as
one base64 line between tags holding a fresh nonce. Covered: the program's own output is captured, never the line.
Not covered: a server running programs as root without isolation (the program may reach the envelope itself).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Mapping, Sequence

from azr.sandbox.backends import WORKER_SOURCE, sandbox_env
from azr.sandbox.limits import Limits
from azr.sandbox.pool import program_request

_TEMPLATE = """import base64, json, os, signal, tempfile, types
_w = types.ModuleType("_azr_worker")
exec(compile({worker!r}, "<azr-worker>", "exec"), _w.__dict__)
_out = os.dup(1)
os.dup2(os.open(os.devnull, os.O_RDWR), 0)
_w._STREAMS = _w._make_streams()
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
_settings = {{"scratch": tempfile.mkdtemp(prefix="azr-"), "env": {env!r}, "host_pidns": _w.pid_namespace()}}
try:
    _reply = _w.Worker(_settings).run({request!r})
except Exception as exc:
    _reply = {{"status": "error", "note": "envelope: %s: %s" % (type(exc).__name__, exc)}}
_reply.pop("recycle", None)
os.write(_out, ({tag!r} + base64.b64encode(json.dumps(_reply).encode()).decode() + {tag!r} + "\\n").encode())
"""


def wrap(
    code: str,
    limits: Limits,
    stdin: str | None = None,
    files: Mapping[str, str] | None = None,
    fetch: Sequence[str] = (),
) -> tuple[str, str]:
    """(program, tag): `code` in its envelope under `limits` (with its stdin, files and files to fetch, as the
    pool's worker takes them), and the tag its reply line is framed by."""
    tag = f"@@azr-{os.urandom(16).hex()}@@"
    request = program_request(code, limits, stdin, files, fetch)
    source = _TEMPLATE.format(worker=WORKER_SOURCE.read_text(), env=sandbox_env(), request=request, tag=tag)
    return source, tag


def unwrap(stdout: str, tag: str) -> dict | None:
    """The worker's reply from the envelope's stdout; None when stdout is not exactly one such line (the envelope
    was killed before it could write it)."""
    line = stdout.strip()
    if not (line.startswith(tag) and line.endswith(tag) and len(line) > 2 * len(tag)):
        return None
    try:
        reply = json.loads(base64.b64decode(line[len(tag) : -len(tag)], validate=True))
    except (ValueError, binascii.Error):
        return None
    return reply if isinstance(reply, dict) else None
