"""Atomic writes and append-and-flush JSONL survive crashes."""

from __future__ import annotations

import json

from azr.logs import JsonlWriter, atomic_write_json


def test_atomic_write_replaces_whole_file(tmp_path):
    path = tmp_path / "sub" / "a.json"
    atomic_write_json(path, {"x": 1})
    atomic_write_json(path, {"x": 2})
    assert json.loads(path.read_text()) == {"x": 2}
    assert [p.name for p in path.parent.iterdir()] == ["a.json"]


def test_jsonl_writer_flushes_each_line_and_drops_a_torn_tail(tmp_path):
    path = tmp_path / "m.jsonl"
    with JsonlWriter(path) as log:
        log.write({"step": 1})
        assert path.read_text() == '{"step": 1}\n'  # visible before close
    with open(path, "a") as fh:
        fh.write('{"step": 2, "lo')  # a crash mid-line
    with JsonlWriter(path) as log:
        log.write({"step": 2})
    assert [json.loads(line) for line in path.read_text().splitlines()] == [{"step": 1}, {"step": 2}]
