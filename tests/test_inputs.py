"""Text from outside is valid text before azr uses it: real text encodings only, lone surrogates never."""

from __future__ import annotations

import json

import pytest

from azr.inputs import TEXT_ENCODINGS, decode_text, load_json, text_encoding, valid_text


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        (r'{"id": "t\ud800"}', {"id": "t\ufffd"}),  # a lone high surrogate's escape
        (r'["\udc00\ud800"]', ["\ufffd\ufffd"]),  # a low one, then a high one without its pair
        (r'["\ud83d\ude00"]', ["\U0001f600"]),  # a valid pair is the character it encodes
        (r'["\\ud800"]', ["\\ud800"]),  # an escaped backslash, then plain text
        (r'["\\\ud800"]', ["\\\ufffd"]),  # an escaped backslash, then an escape
        ('["t\ud800"]', ["t\ufffd"]),  # a raw surrogate in the text itself
        (b'{"b": "\\ud800 \xff"}', {"b": "\ufffd \ufffd"}),  # bytes: undecodable ones replaced too
    ],
)
def test_load_json_never_returns_a_surrogate(raw, parsed):
    assert load_json(raw) == parsed
    json.dumps(load_json(raw), ensure_ascii=False).encode("utf-8")  # strict: it can be written as it is


def test_load_json_raises_what_json_raises():
    with pytest.raises(json.JSONDecodeError):
        load_json('{"a": ')


@pytest.mark.parametrize(
    ("charset", "codec"),
    [
        ("UTF-8", "utf-8"),
        ("latin1", "iso8859-1"),
        ("windows-1252", "cp1252"),
        ("Shift_JIS", "shift_jis"),
        ("unicode_escape", "utf-8"),
        ("raw_unicode_escape", "utf-8"),
        ("rot13", "utf-8"),
        ("base64", "utf-8"),
        ("utf-7", "utf-8"),
        ("idna", "utf-8"),
        ("nonsense", "utf-8"),
        ("", "utf-8"),
        (None, "utf-8"),
    ],
)
def test_only_real_text_encodings_are_used(charset, codec):
    assert text_encoding(charset) == codec and codec in TEXT_ENCODINGS


def test_decode_text_is_always_valid_text():
    assert decode_text(b"\\x1b \\ud800", "unicode_escape") == "\\x1b \\ud800"  # not ESC, not a surrogate
    assert decode_text(b"\xed\xa0\x80 surrogate bytes") == "\ufffd\ufffd\ufffd surrogate bytes"
    assert decode_text("\ud800".encode("utf-16-le", "surrogatepass"), "utf-16-le") == "\ufffd"
    assert valid_text("a\udfffb") == "a\ufffdb"
