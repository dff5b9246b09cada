"""The one encoding of tests as strings, and the one place that reads it back: TRL's dataset columns hold a list
of strings per row, so a `Test` travels there as text. An assert snippet is its own source; any other test (or an
assert with its own tolerance) is a NUL byte, its kind, a colon and its body as a JSON object (NUL never occurs in
Python source, so no snippet is mistaken for one). Kinds are read off the `Test` union, so a new kind needs nothing
here. Task-level options (prelude, checker, tolerances) are columns of their own, never in a test's text.
"""

from __future__ import annotations

import functools
import json

from azr.data.tests_model import TEST_TYPES, AssertTest, Test
from azr.inputs import load_json

_NUL = "\x00"
_CLASSES = {kind: cls for cls in TEST_TYPES for kind in cls.kinds}
_NAMES = {"stdio": "stdin/stdout case", "call": "function-call case"}  # how errors name a kind
_CACHED_CHARS = 1 << 16  # grading decodes the same cells every step: small ones are remembered


def encode(test: Test) -> str:
    """A test as one string of a `tests` column."""
    if isinstance(test, AssertTest) and test.atol is None and test.rtol is None:
        return test.source
    return f"{_NUL}{test.kind}:" + json.dumps(test.body(), ensure_ascii=False)


def encode_all(tests: list[Test]) -> list[str]:
    return [encode(t) for t in tests]


def is_encoded(text: str) -> bool:
    """Whether a string is a tagged test (rather than an assert snippet)."""
    return text.startswith(_NUL)


def decode(text: str) -> Test:
    """The test a string of a `tests` column holds; ValueError (with the reason) for a tagged string that is
    malformed."""
    return _decoded(text) if len(text) <= _CACHED_CHARS else _decode(text)


def decode_all(texts: list[str]) -> list[Test]:
    return [decode(t) for t in texts]


@functools.lru_cache(maxsize=1 << 14)
def _decoded(text: str) -> Test:
    return _decode(text)


def _decode(text: str) -> Test:
    if not text.startswith(_NUL):
        return AssertTest(text)
    kind, sep, rest = text[1:].partition(":")
    if not sep or kind not in _CLASSES:
        raise ValueError(f"unknown test kind {kind[:40]!r}")
    body = load_json(rest)
    if not isinstance(body, dict):
        raise ValueError(f"a {kind} test's body is not a JSON object")
    try:
        return _CLASSES[kind].from_body(kind, body)
    except (KeyError, TypeError, AttributeError) as exc:
        why = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ValueError(f"a malformed {_NAMES.get(kind, kind + ' test')} ({why})") from None
