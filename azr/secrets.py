"""Secrets: the one redaction applied to everything azr writes (files, logs, console, error messages). Covered: API
keys in the environment (`*KEY*`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`), keys registered by clients, bearer tokens,
URL credentials and credential parameters (`CREDENTIAL_PARAMS`), and whatever an endpoint echoes of them. Not
covered: a key split, encoded or transformed (base64, reversed) before it is written.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import urllib.parse
from typing import Any

REDACTED = "<redacted>"
_MIN_LENGTH = 8  # shorter values (`false`, `1`) are settings, not keys, and would redact ordinary text
_SECRET_NAME = re.compile(r"(?i)(key|token|secret|passw|credential)")
# No class below takes a backslash: text redacted here is often serialized JSON, where a key may end right before an
# escaped quote (`Bearer KEY\"`), and swallowing the backslash would unescape that quote and break the line.
_BEARER = re.compile(r"(?i)\b(bearer)\s+[^\s\"',\\]+")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@\"'<>\\]+@")
# The names of URL parameters that carry a credential, matched whole and case-insensitively, `-`/`_` optional
# between words: API keys (Azure's `subscription-key`, `x-api-key`), tokens (OAuth's, GitLab's `private_token`),
# client secrets, passwords, and presigned-URL signatures (AWS SigV4's `X-Amz-Credential` / `-Signature` /
# `-Security-Token`, GCS's `X-Goog-…`, Azure SAS's `sig`).
_SEP = r"[-_]?"
CREDENTIAL_PARAMS = (
    rf"(?:x{_SEP})?api{_SEP}key",
    r"key",
    rf"(?:ocp{_SEP}apim{_SEP})?subscription{_SEP}key",
    rf"(?:access|refresh|id|auth|private|session|security|bearer){_SEP}token",
    r"token",
    rf"client{_SEP}secret",
    r"secret",
    r"passw(?:or)?d",
    r"sig(?:nature)?",
    r"auth(?:orization)?",
    rf"x{_SEP}(?:amz|goog){_SEP}(?:credential|signature|security{_SEP}token)",
)
_PARAM_NAME = "|".join(CREDENTIAL_PARAMS)
_QUERY_KEY = re.compile(rf"(?i)([?&#](?:{_PARAM_NAME})=)[^&#\s\"'<>\\]+")
_PARAM = re.compile(rf"(?i)(?:{_PARAM_NAME})")
_registered: set[str] = set()
_lock = threading.Lock()


class Secret:
    """An API key whose repr and str never show it; `.value` is for the one header that needs it. Registered on
    creation, so the redaction knows it wherever it turns up."""

    __slots__ = ("value",)

    def __init__(self, value: str):
        self.value = value
        register(value)

    def __repr__(self) -> str:
        return REDACTED

    __str__ = __repr__


def register(value: str | None) -> None:
    """Add `value` (a key read from anywhere) to what is redacted from now on."""
    if value and len(value) >= _MIN_LENGTH:
        with _lock:
            _registered.add(value)


def known_secrets() -> list[str]:
    """Every secret value known now: registered ones and the environment's key-like variables, longest first."""
    found = {v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v.strip()) >= _MIN_LENGTH}
    with _lock:
        found |= _registered
    return sorted({v.strip() for v in found} | found, key=len, reverse=True)


def redact(text: str, secret: Secret | None = None, limit: int | None = None) -> str:
    """`text` without any secret: known keys, bearer tokens, URL credentials and key-like query parameters. With
    `limit`, also on one line and at most `limit` characters (for error messages)."""
    if secret is not None:
        register(secret.value)
    for value in known_secrets():
        if value in text:
            text = text.replace(value, REDACTED)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _USERINFO.sub(rf"\1{REDACTED}@", text)
    text = _QUERY_KEY.sub(rf"\1{REDACTED}", text)
    if limit is not None:
        text = " ".join(text.split())[:limit]
    return text


def redact_data(value: object) -> Any:
    """`value` (text, or JSON-shaped data: dicts, lists) with `redact` applied to every string in it, keys too."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_data(k): redact_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_data(v) for v in value]
    return value


def public_url(url: str) -> str:
    """`url` as it may be stored or shown: no user or password, key-like query parameters dropped. The credentials
    it held are registered, so they are redacted wherever else they appear."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return redact(url)
    register(parts.password)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{host}:{port}" if port else host
    query = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)]
    for key, value in query:
        if _PARAM.fullmatch(key):
            register(value)
    for key, _, value in (pair.partition("=") for pair in f"{parts.query}&{parts.fragment}".split("&")):
        if _PARAM.fullmatch(key):
            register(value)  # as written (`+`, `%2F`), since that is how it turns up in a log line
    kept = [(k, v) for k, v in query if not _PARAM.fullmatch(k)]
    fragment = _QUERY_KEY.sub(rf"\1{REDACTED}", f"#{parts.fragment}")[1:]  # `#access_token=…` (OAuth)
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, urllib.parse.urlencode(kept), fragment))


class RedactingFilter(logging.Filter):
    """A log handler's filter: the record's message, formatted, goes out redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True


def redact_logs(logger: logging.Logger | None = None) -> None:
    """Put the redacting filter on every handler of `logger` (the root logger by default); idempotent."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
