"""Bounded reads of what a user hands azr: a file, a stream or a device read up to a limit, never to the end of it.

A limit is a number of bytes with a name; its refusal names the file, the limit and how to raise it (an environment
variable, or the field that sets it). Nothing here parses but `json_depth`, the scan
that keeps a deeply nested JSON text away from the recursive parser.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import BinaryIO

from azr.errors import UserError


def env_limit(name: str, default: int) -> int:
    """The limit in environment variable `name` (a whole number of bytes or items), else `default`."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(float(text))
    except ValueError:
        raise UserError(f"{name}: expected a whole number, got {text!r}") from None
    if value < 1:
        raise UserError(f"{name}: expected a number >= 1, got {text!r}")
    return value


def read_stream(stream: BinaryIO, limit: int, what: str, raise_with: str) -> bytes:
    """At most `limit` bytes of `stream`; UserError (naming `what`, the limit and `raise_with`) if there is more."""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise UserError(f"{what}: larger than the limit of {limit:,} bytes ({raise_with})")
    return data


def read_bounded_text(path: Path, limit: int, what: str, raise_with: str) -> str:
    """The UTF-8 text of `path`, refused past `limit` bytes; FileNotFoundError and OSError propagate, a file that is
    not UTF-8 is a UserError naming it."""
    with open(path, "rb") as stream:
        data = read_stream(stream, limit, what, raise_with)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{what}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


_JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[{\]}]')


def json_depth(text: str | bytes) -> int:
    """How deep the brackets of a JSON text nest, strings skipped: a linear scan, where json.loads would recurse
    (and fail with RecursionError on 100,000 levels)."""
    data = text.encode() if isinstance(text, str) else text
    depth = deepest = 0
    for match in _JSON_TOKEN.finditer(data):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        elif token in (b"]", b"}"):
            depth -= 1
    return deepest
