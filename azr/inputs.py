"""Bounded reads of what a user hands azr: a file, a stream or a device read up to a limit, never to the end of it.

A limit is a number of bytes with a name; its refusal names the file, the limit and how to raise it (an environment
variable, or the field that sets it). Nothing here parses but `parse_json`, the one JSON reader of text azr did not
write: bounded in nesting (`json_depth` keeps a deep text away from the recursive parser) and in integer digits.
"""

from __future__ import annotations

import json
import os
import re
import stat
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


def regular_file(path: Path, what: str) -> None:
    """UserError unless `path` is a regular file (or missing: the caller's open says so): a device, a FIFO or a
    folder is never read as a user's file (`/dev/zero` would never end, a FIFO may never start)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UserError(f"{what}: cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "a device, FIFO or socket"
        raise UserError(f"{what}: {kind}, not a regular file")


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


MAX_JSON_DEPTH = ("AZR_MAX_JSON_DEPTH", 100)  # task rows, samples, logs and tool calls nest a handful of levels
MAX_INT_DIGITS = 4300  # Python's own default limit for int <-> str: a longer integer could not even be printed
_PAST_THE_LIMIT = 10**MAX_INT_DIGITS


def bounded_int(text: str, base: int = 10) -> int:
    """`int(text, base)` of a JSON or YAML integer, refused (ValueError, one line) past MAX_INT_DIGITS decimal
    digits, whatever its base (Python could neither print nor read back a longer one)."""
    digits = len(text.lstrip("+-"))
    if base == 10 and digits > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {digits:,} digits (the limit is {MAX_INT_DIGITS:,})")
    value = int(text, base)  # linear in a power-of-two base; a decimal one is bounded above
    if abs(value) >= _PAST_THE_LIMIT:
        raise ValueError(f"an integer of more than {MAX_INT_DIGITS:,} digits (the limit)")
    return value


def parse_json(text: str | bytes, max_depth: int | None = None, **kwargs) -> object:
    """`json.loads(text)`, refused as a ValueError with a one-line reason when the text nests deeper than `max_depth`
    (default AZR_MAX_JSON_DEPTH, 100) or holds an integer longer than MAX_INT_DIGITS; bad syntax is
    json.JSONDecodeError (a ValueError) as usual. NaN and Infinity are read as floats, as json.loads reads them."""
    depth = env_limit(*MAX_JSON_DEPTH) if max_depth is None else max_depth
    opening = text.count("[") + text.count("{") if isinstance(text, str) else text.count(b"[") + text.count(b"{")
    if opening > depth and json_depth(text) > depth:
        raise ValueError(f"nested more than {depth} levels deep (the limit; {MAX_JSON_DEPTH[0]}=N raises it)")
    return json.loads(text, parse_int=bounded_int, **kwargs)
