"""Text from outside is valid text before azr uses it (real text encodings only, lone surrogates never), and
`azr.inputs.load_json`, the one JSON reader of text azr did not write, is bounded in nesting and integer digits."""

from __future__ import annotations

import json
import math

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


def test_plain_json_reads_as_json_loads_reads_it():
    assert load_json('{"a": [1, 2.5, "[[[", null], "b": -12}') == {"a": [1, 2.5, "[[[", None], "b": -12}
    assert math.isnan(load_json("[NaN]")[0]) and load_json(b"[Infinity]") == [math.inf]
    assert load_json("[" * 100 + "]" * 100) is not None  # the default limit itself


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a": ' * 101 + "1" + "}" * 101])
def test_nesting_past_the_limit_is_a_one_line_value_error(text):
    with pytest.raises(ValueError, match=r"^nested more than 100 levels deep \(the limit; AZR_MAX_JSON_DEPTH=N"):
        load_json(text)


def test_the_limit_is_raised_by_its_variable(monkeypatch):
    monkeypatch.setenv("AZR_MAX_JSON_DEPTH", "200")
    assert load_json("[" * 150 + "]" * 150) is not None


@pytest.mark.parametrize("text", ["9" * 5000, '{"x": -' + "1" * 4301 + "}", "[" + "7" * 100_000 + "]"])
def test_an_integer_past_the_digit_limit_is_a_one_line_value_error(text):
    with pytest.raises(ValueError, match=r"^an integer of [0-9,]+ digits \(the limit is 4,300\)$"):
        load_json(text)
    assert load_json("9" * 4300) == int("9" * 4300)


def test_an_integer_in_another_base_is_held_to_the_same_number_of_decimal_digits():
    from azr.inputs import bounded_int

    assert bounded_int("ff", 16) == 255 and bounded_int("9" * 4300) == 10**4300 - 1
    with pytest.raises(ValueError, match=r"^an integer of more than 4,300 digits \(the limit\)$"):
        bounded_int("f" * 3600, 16)  # 4,335 decimal digits
