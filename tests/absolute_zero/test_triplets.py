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
        ('{"input": "1"}', "missing field 'program'"),
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
