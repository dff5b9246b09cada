"""Reads of what azr did not write (a user's files, an endpoint's replies, a web page): bounded, and valid text.
A limit is a number of bytes with a name, and its refusal says how to raise it; bytes are decoded only with a real
text encoding and no string azr reads holds a surrogate (`valid_text`, the rule `azr.logs` writes by). `load_json`
is the one JSON reader of outside text, bounded in nesting and integer digits (docs/limits.md).
"""

from __future__ import annotations

import codecs
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, BinaryIO

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


_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
}


def irregular_kind(path: Path) -> str | None:
    """What `path` is ("a FIFO", "a directory"...) when it exists and is not a regular file; None when it is one (a
    link is followed) or is absent. The one test of "regular files only", for what azr reads and what it writes
    (`azr.logs.check_regular_file`); an OSError other than absence propagates."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    return None if stat.S_ISREG(mode) else _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def regular_file(path: Path, what: str, error: type[UserError] = UserError) -> None:
    """`error` (a UserError) unless `path` is a regular file (or missing: the caller's open says so): a device, a
    FIFO or a folder is never read as a user's file (`/dev/zero` would never end, a FIFO may never start)."""
    try:
        kind = irregular_kind(path)
    except OSError as exc:
        raise error(f"{what}: cannot read: {exc.strerror or exc}") from None
    if kind:
        raise error(f"{what}: {kind}, not a regular file")


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


# Python's names (codecs.lookup(...).name) of the encodings a page or a file may declare: the web's (WHATWG) text
# encodings that Python has. Not codecs that transform text (unicode_escape, rot13, hex) nor UTF-7.
TEXT_ENCODINGS = frozenset(
    {"utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be", "ascii"}
    | {f"iso8859-{n}" for n in (1, 2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)}
    | {f"cp{n}" for n in (874, 866, 932, 936, 949, 950, 1250, 1251, 1252, 1253, 1254, 1255, 1256, 1257, 1258)}
    | {"koi8-r", "koi8-u", "mac-roman", "mac-cyrillic", "tis-620", "shift_jis", "euc_jp", "iso2022_jp"}
    | {"gb2312", "gbk", "gb18030", "big5", "big5hkscs", "euc_kr"}
)
_SURROGATE = re.compile("[\ud800-\udfff]")
# An escaped backslash (kept, so the `u` after it is not read as an escape), a valid surrogate pair (kept), or the
# escape of a lone surrogate (replaced).
_JSON_SURROGATE = re.compile(
    r"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
)


def valid_text(text: str) -> str:
    """`text` as UTF-8 can hold it: every surrogate code point replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def text_encoding(charset: str | None) -> str:
    """The codec for a declared `charset` when it is a real text encoding (`TEXT_ENCODINGS`), else "utf-8"."""
    try:
        name = codecs.lookup(charset.strip()).name if charset else "utf-8"
    except (LookupError, ValueError):
        return "utf-8"
    return name if name in TEXT_ENCODINGS else "utf-8"


def decode_text(data: bytes, charset: str | None = None) -> str:
    """Bytes from outside as valid text: decoded with `charset` if it is a real text encoding, else as UTF-8, every
    byte that does not decode replaced by U+FFFD (never a surrogate)."""
    return valid_text(data.decode(text_encoding(charset), errors="replace"))


def _json_escape(match: re.Match) -> str:
    token = match.group()
    return token if len(token) != 6 else "\\ufffd"


def load_json(text: str | bytes, depth_limit: tuple[str, int] = MAX_JSON_DEPTH, **kwargs) -> Any:
    """`json.loads` of a text from outside: every string in the result valid text (the escape of a lone surrogate
    becomes U+FFFD; a valid pair stays the character it encodes), refused as a ValueError with a one-line reason when
    the text nests deeper than `depth_limit` (an environment variable and its default: AZR_MAX_JSON_DEPTH, 100) or
    holds an integer longer than MAX_INT_DIGITS; bad syntax is json.JSONDecodeError (a ValueError) as usual. NaN and
    Infinity are read as floats, as json.loads reads them."""
    if isinstance(text, bytes):
        text = decode_text(text)
    depth = env_limit(*depth_limit)
    if text.count("[") + text.count("{") > depth and json_depth(text) > depth:
        raise ValueError(f"nested more than {depth} levels deep (the limit; {depth_limit[0]}=N raises it)")
    return json.loads(_JSON_SURROGATE.sub(_json_escape, valid_text(text)), parse_int=bounded_int, **kwargs)
