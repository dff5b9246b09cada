"""`azr absolute-zero check FILE.jsonl [--json]`: each triplet's verdict and reason, exit 1 when one is invalid, exit 2
naming file:line for a malformed file; a line without an output is checked as a proposal."""

from __future__ import annotations

import json

LINES = [
    {"program": "def f(a, b):\n    return a + b", "input": "1, 2", "output": "3"},
    {"program": "def f(a, b):\n    return a + b", "input": "1, 2", "output": "4"},
    {"program": "import os\ndef f(x):\n    return x", "input": "1"},
    {"program": "def f(w):\n    return list(set(w))", "input": str([f"w{i}" for i in range(12)])},
    {"program": "def f(x):\n    return x * 2", "input": "21"},
    {"program": "def f(x):\n    return x * 2", "inputs": ["1", "'a'"], "outputs": ["2", "'aa'"], "message": "doubles"},
]


def test_json_verdicts_one_per_line(cli, write):
    path = write("t.jsonl", "\n".join(json.dumps(line) for line in LINES[:3]) + "\n\n" + json.dumps(LINES[3]) + "\n")
    code, out, err = cli("absolute-zero", "check", path, "--json", "--workers", "2")
    assert code == 1, err
    assert [json.loads(line) for line in out.splitlines()] == [
        {"line": 1, "valid": True, "reason": ""},
        {"line": 2, "valid": False, "reason": "output_mismatch"},
        {"line": 3, "valid": False, "reason": "banned_import"},
        {"line": 5, "valid": False, "reason": "nondeterministic"},
    ]


def test_the_summary_counts_invalid_triplets_by_reason(cli, write):
    rows = [LINES[1], LINES[0], LINES[2], LINES[1]]
    path = write("t.jsonl", "".join(json.dumps(line) + "\n" for line in rows))
    code, out, _ = cli("absolute-zero", "check", path, "--workers", "2")
    assert code == 1
    assert out.strip().endswith("4 triplets, 1 valid, 3 invalid (output_mismatch 2, banned_import 1)")


def test_all_valid_exits_0_and_shows_computed_outputs(cli, write):
    path = write("ok.jsonl", "".join(json.dumps(line) + "\n" for line in (LINES[0], LINES[4], LINES[5])))
    code, out, _ = cli("absolute-zero", "check", path, "--workers", "2")
    assert code == 0
    assert "line 2: valid (output 42)" in out and out.strip().endswith("3 triplets, 3 valid, 0 invalid")


def test_a_malformed_file_exits_2_naming_the_line(cli, write):
    path = write("bad.jsonl", json.dumps(LINES[0]) + "\n" + '{"program": "p", "input": 3}\n')
    code, out, err = cli("absolute-zero", "check", path)
    assert code == 2 and not out
    assert err.strip() == f"azr: error: {path}:2: field 'input': expected a string, got 3"
    code, _, err = cli("absolute-zero", "check", write("empty.txt", "").parent / "missing.jsonl")
    assert code == 2 and "file not found" in err


def test_absolute_zero_reasoner_seed_files_check_as_they_are(cli, write):
    """Its rows (`snippet`, `imports`, its bookkeeping fields) check like azr's; a parameter named `input` is the
    program's own value, while a call of the builtin `print` is still banned."""
    rows = [
        {
            "snippet": "def f(input):\n    return input + 1",
            "input": "1",
            "output": "2",
            "imports": [],
            "original_snippet": "def f(input):\n    return input + 1",
            "composite_functions": [],
            "_input_type": "int",
            "_output_type": "int",
        },
        {
            "snippet": "def f(s):\n    print(s)\n    return s",
            "input": "'a'",
            "output": "'a'",
            "imports": [],
            "original_snippet": "def f(s):\n    print(s)\n    return s",
            "composite_functions": [],
        },
        {
            "snippet": "import re\ndef f(vars):\n    return re.sub('a', 'b', vars)",
            "inputs": ["'a'", "'ca'"],
            "outputs": ["'b'", "'cb'"],
            "message": "Replace a letter.",
            "imports": ["import re"],
            "_input_types": ["str", "str"],
            "_output_types": ["str", "str"],
        },
    ]
    path = write("seed_io.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    code, out, err = cli("absolute-zero", "check", path, "--json", "--workers", "2")
    assert code == 1, err
    assert [json.loads(line)["reason"] for line in out.splitlines()] == ["", "banned_name", ""]
