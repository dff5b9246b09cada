"""The triplet line format: what a buffer, a seed file and the checker read; malformed lines name file:line."""

from __future__ import annotations

import json
import re

import pytest

from azr.absolute_zero import Triplet, read_numbered, split_pairs, write_triplets
from azr.errors import DataError

SINGLE = {"program": "def f(a, b):\n    return a + b", "input": "1, 2", "output": "3"}
MANY = {"program": "def f(x):\n    return x", "inputs": ["1", "2"], "outputs": ["1", "2"], "message": "identity"}


def test_lines_round_trip(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(SINGLE) + "\n\n" + json.dumps(MANY) + "\n" + json.dumps({"program": "x", "input": ""}))
    (one, a), (three, b), (four, c) = read_numbered(path)
    assert (one, three, four) == (1, 3, 4)
    assert a == Triplet(SINGLE["program"], ("1, 2",), ("3",))
    assert b.many and b.outputs == ("1", "2") and b.message == "identity"
    assert c.outputs is None  # a proposal: its output is computed by the checker
    write_triplets(tmp_path / "again.jsonl", [a, b, c])
    assert [t for _, t in read_numbered(tmp_path / "again.jsonl")] == [a, b, c]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "invalid JSON"),
        ("[1]", "expected a JSON object"),
        ('{"input": "1"}', "expected one of 'program' (azr's lines) or 'snippet'"),
        ('{"program": "p", "snippet": "p", "input": "1"}', "expected one of 'program'"),
        ('{"snippet": "p", "input": "1", "imports": "import re"}', "field 'imports': expected a list"),
        ('{"snippet": "p", "input": "1", "composite_functions": ["p"]}', "field 'composite_functions'"),
        ('{"program": 1, "input": "1"}', "field 'program': expected a string"),
        ('{"program": "p"}', "exactly one of 'input'"),
        ('{"program": "p", "input": "1", "inputs": ["1"]}', "exactly one of 'input'"),
        ('{"program": "p", "input": 1}', "field 'input': expected a string"),
        ('{"program": "p", "inputs": ["1"], "outputs": ["1", "2"]}', "1 inputs but 2 outputs"),
        ('{"program": "p", "input": "1", "ouput": "1"}', "unknown field 'ouput' (did you mean 'output'?)"),
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(SINGLE) + "\n" + line + "\n")
    with pytest.raises(DataError, match=rf"bad.jsonl:2: .*{re.escape(message)}"):
        read_numbered(path)


def test_induction_pairs_split_into_shown_and_hidden():
    task = Triplet("p", ("1", "2", "3"), ("a", "b", "c"), many=True)
    assert split_pairs(task, 2) == ([("1", "a"), ("2", "b")], [("3", "c")])


# Absolute-Zero-Reasoner's own seed lines, in its shapes: a deduction/abduction row and an induction row.
NATIVE_SINGLE = {
    "snippet": "import collections\ndef f(xs):\n    return collections.Counter(xs).most_common(1)[0][0]",
    "input": "['a', 'b', 'a']",
    "output": "'a'",
    "imports": ["import collections"],
    "original_snippet": "import collections\ndef f(xs):\n    return collections.Counter(xs).most_common(1)[0][0]",
    "composite_functions": [],
    "_input_type": "list",
    "_output_type": "str",
}
NATIVE_MANY = {
    "snippet": "def f(input):\n    return input[::-1]",
    "inputs": ["'ab'", "[1, 2]"],
    "outputs": ["'ba'", "[2, 1]"],
    "message": "Reverse what you are given.",
    "imports": ["from math import gcd"],
    "_input_types": ["str", "list"],
    "_output_types": ["str", "list"],
}


def test_absolute_zero_reasoner_lines_read_as_they_are(tmp_path):
    path = tmp_path / "seed.jsonl"
    helper = {"snippet": "def g_0(x):\n    return x", "imports": []}
    composite = {
        "snippet": "def f(x):\n    return g_0(x)",
        "input": "1",
        "output": "1",
        "composite_functions": [helper],
    }
    path.write_text("".join(json.dumps(row) + "\n" for row in (NATIVE_SINGLE, NATIVE_MANY, composite)))
    (_, single), (_, many), (_, both) = read_numbered(path)
    assert single == Triplet(NATIVE_SINGLE["snippet"], ("['a', 'b', 'a']",), ("'a'",))  # its import already there
    assert many.many and many.inputs == ("'ab'", "[1, 2]") and many.outputs == ("'ba'", "[2, 1]")
    assert many.message == "Reverse what you are given."
    assert many.program == "from math import gcd\n" + NATIVE_MANY["snippet"]  # a missing import goes first
    assert both.program == "def g_0(x):\n    return x\ndef f(x):\n    return g_0(x)"  # judged with its helper
