"""`azr.inputs.parse_json`: the one JSON reader of text azr did not write, bounded in nesting and integer digits."""

from __future__ import annotations

import math

import pytest

from azr.inputs import parse_json


def test_plain_json_reads_as_json_loads_reads_it():
    assert parse_json('{"a": [1, 2.5, "[[[", null], "b": -12}') == {"a": [1, 2.5, "[[[", None], "b": -12}
    assert math.isnan(parse_json("[NaN]")[0]) and parse_json(b"[Infinity]") == [math.inf]
    assert parse_json("[" * 100 + "]" * 100) is not None  # the default limit itself


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a": ' * 101 + "1" + "}" * 101])
def test_nesting_past_the_limit_is_a_one_line_value_error(text):
    with pytest.raises(ValueError, match=r"^nested more than 100 levels deep \(the limit; AZR_MAX_JSON_DEPTH=N"):
        parse_json(text)


def test_the_limit_is_raised_by_its_variable(monkeypatch):
    monkeypatch.setenv("AZR_MAX_JSON_DEPTH", "200")
    assert parse_json("[" * 150 + "]" * 150) is not None


@pytest.mark.parametrize("text", ["9" * 5000, '{"x": -' + "1" * 4301 + "}", "[" + "7" * 100_000 + "]"])
def test_an_integer_past_the_digit_limit_is_a_one_line_value_error(text):
    with pytest.raises(ValueError, match=r"^an integer of [0-9,]+ digits \(the limit is 4,300\)$"):
        parse_json(text)
    assert parse_json("9" * 4300) == int("9" * 4300)


def test_an_integer_in_another_base_is_held_to_the_same_number_of_decimal_digits():
    from azr.inputs import bounded_int

    assert bounded_int("ff", 16) == 255 and bounded_int("9" * 4300) == 10**4300 - 1
    with pytest.raises(ValueError, match=r"^an integer of more than 4,300 digits \(the limit\)$"):
        bounded_int("f" * 3600, 16)  # 4,335 decimal digits
