"""Atomic writes, append-and-flush JSONL, pruning and the generation log survive crashes and slow disks."""

from __future__ import annotations

import json
import os
import stat
import threading
import time

import pytest

from azr.errors import UserError
from azr.logs import GenerationLog, JsonlWriter, atomic_write_json, atomic_write_text, prune_jsonl, valid_text


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


# ------------------------------------------------------------------------------------------------- prune_jsonl
def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_prune_keeps_only_accepted_records_and_drops_a_torn_tail(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps({"step": s}) + "\n" for s in range(1, 6)) + '{"step": 6, "lo')
    dropped = prune_jsonl(path, lambda r: r["step"] <= 3)
    assert dropped == 2  # the torn line was never a record
    assert path.read_text().endswith("\n") and _lines(path) == [{"step": 1}, {"step": 2}, {"step": 3}]
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.jsonl"]  # no temp file left beside it
    assert prune_jsonl(tmp_path / "absent.jsonl", lambda r: True) == 0


def test_prune_that_fails_midway_leaves_the_old_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "metrics.jsonl"
    original = "".join(json.dumps({"step": s}) + "\n" for s in range(1, 4))
    path.write_text(original)

    def crash(*args):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk gone"):
        prune_jsonl(path, lambda r: r["step"] == 1)
    assert path.read_text() == original
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.jsonl"]


# ----------------------------------------------------------------------------------------------- GenerationLog
def _record(i: int) -> dict:
    return {"step": i, "completion": "x" * 80}


def _all_records(folder):
    return [json.loads(line) for path in sorted(folder.glob("generations-*.jsonl")) for line in path.open()]


def test_generation_log_rotates_by_size_and_close_writes_everything(tmp_path):
    folder = tmp_path / "generations"
    log = GenerationLog(folder, max_bytes=1000)
    log.put(_record(i) for i in range(100))
    log.close()
    log.close()  # a second close (atexit after the run's own) is harmless
    files = log.files()
    assert [p.name for p in files[:3]] == [
        "generations-00000.jsonl",
        "generations-00001.jsonl",
        "generations-00002.jsonl",
    ]
    assert len(files) >= 8
    one = len(json.dumps(_record(99))) + 1
    for path in files[:-1]:  # each full file passed max_bytes by less than one record
        assert 1000 <= path.stat().st_size < 1000 + one
    assert [r["step"] for r in _all_records(folder)] == list(range(100))
    assert (log.written, log.dropped) == (100, 0)


def test_generation_log_reopened_continues_in_its_last_file(tmp_path):
    folder = tmp_path / "generations"
    first = GenerationLog(folder, max_bytes=1000)
    first.put(_record(i) for i in range(15))
    first.close()
    before = [p.name for p in first.files()]
    last = first.files()[-1]
    with open(last, "a") as fh:
        fh.write('{"step": 99, "comp')  # a crash tore the last line
    again = GenerationLog(folder, max_bytes=1000)
    again.put([_record(15)])
    again.close()
    assert [p.name for p in again.files()] == before  # appended to the last file, not a new generations-00000
    assert json.loads(last.read_text().splitlines()[-1]) == _record(15)
    assert [r["step"] for r in _all_records(folder)] == list(range(16))


def test_generation_log_drops_instead_of_blocking_when_the_writer_is_stuck(tmp_path):
    log = GenerationLog(tmp_path / "generations", max_bytes=1 << 20, queue_size=2, put_timeout_s=0.05)
    release = threading.Event()
    real_write = log._write

    def stuck_write(record):  # fault injection: a disk that stops answering
        release.wait(30)
        real_write(record)

    log._write = stuck_write
    started = time.monotonic()
    log.put(_record(i) for i in range(10))
    assert time.monotonic() - started < 2  # one wait of put_timeout_s (0.05 s), then the rest are dropped at once
    assert 7 <= log.dropped <= 8  # one record in the writer (if it got there), two in the queue; the rest dropped
    release.set()
    log.close()
    assert log.written == 10 - log.dropped
    assert len(_all_records(tmp_path / "generations")) == log.written


# ------------------------------------------------------------------------------------------ any string, any target
SURROGATE = "bad " + chr(0xD800) + " end"


def test_every_writer_replaces_lone_surrogates_with_the_replacement_character(tmp_path):
    atomic_write_text(tmp_path / "a.txt", SURROGATE)
    atomic_write_json(tmp_path / "a.json", {SURROGATE: [SURROGATE]})
    with JsonlWriter(tmp_path / "a.jsonl") as log:
        log.write({"failure": SURROGATE, "pair": "\ud83d\ude00"})
    (tmp_path / "p.jsonl").write_text('{"x": 1}\n')
    prune_jsonl(tmp_path / "p.jsonl", lambda r: True)
    assert (tmp_path / "a.txt").read_bytes().decode("utf-8") == "bad \ufffd end"
    assert json.loads((tmp_path / "a.json").read_bytes().decode("utf-8")) == {"bad \ufffd end": ["bad \ufffd end"]}
    line = (tmp_path / "a.jsonl").read_bytes().decode("utf-8")  # strict: the file is valid UTF-8
    assert json.loads(line) == {"failure": "bad \ufffd end", "pair": "\ufffd\ufffd"}
    assert valid_text("plain \u00e9 \U0001f600") == "plain \u00e9 \U0001f600"  # real characters pass untouched


def test_generation_log_writes_a_record_with_a_surrogate(tmp_path):
    log = GenerationLog(tmp_path / "generations", max_bytes=1 << 20)
    log.put([{"step": 1, "reason": f"ValueError: {chr(0xDC80)}"}, _record(2)])
    log.close()
    assert (log.written, log.dropped, log.error) == (2, 0, None)
    assert [r["reason"] if r["step"] == 1 else r["step"] for r in _all_records(tmp_path / "generations")] == [
        "ValueError: \ufffd",
        2,
    ]


def test_generation_log_that_cannot_write_says_why_and_counts_the_loss(tmp_path):
    log = GenerationLog(tmp_path / "generations", max_bytes=1 << 20)

    def broken(record):  # any error, not only OSError: the thread goes on and the loss is counted
        raise TypeError("cannot serialise this record")

    log._write = broken
    log.put(_record(i) for i in range(3))
    log.close()
    assert (log.written, log.dropped) == (0, 3)
    assert log.failed and log.error == "TypeError: cannot serialise this record"
    assert log.summary() == {"written": 0, "dropped": 3, "error": "TypeError: cannot serialise this record"}


def test_generation_log_whose_thread_died_never_blocks_put_or_close(tmp_path):
    log = GenerationLog(tmp_path / "generations", max_bytes=1 << 20, queue_size=2, put_timeout_s=30, close_timeout_s=1)

    def die(record):
        raise SystemExit("the writer thread is gone")  # not an Exception: it ends the thread

    log._write = die
    log.put([_record(0)])
    log._thread.join(5)
    assert not log._thread.is_alive()
    started = time.monotonic()
    log.put(_record(i) for i in range(1, 10))  # a full queue and no reader: dropped at once, not put_timeout_s each
    log.close()
    assert time.monotonic() - started < 5
    assert log.written == 0 and log.dropped == 10 and log.failed and "SystemExit" in log.error


def test_generation_log_close_returns_while_the_writer_is_stuck(tmp_path):
    log = GenerationLog(
        tmp_path / "generations", max_bytes=1 << 20, queue_size=2, put_timeout_s=0.05, close_timeout_s=1
    )
    release = threading.Event()
    log._write = lambda record: release.wait(30)
    log.put(_record(i) for i in range(3))
    started = time.monotonic()
    log.close()
    release.set()
    assert time.monotonic() - started < 5
    assert log.failed and "did not finish within 1 s" in log.error and log.dropped >= 2


@pytest.mark.parametrize("kind", ["fifo", "folder", "socket"])
def test_writers_refuse_a_target_that_is_not_a_regular_file(tmp_path, kind):
    import socket

    target = tmp_path / "out"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "folder":
        target.mkdir()
    else:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(target))
    for write in (lambda: atomic_write_text(target, "x"), lambda: JsonlWriter(target)):
        with pytest.raises(UserError, match=r"out is a (FIFO|directory|socket); azr writes only regular files"):
            write()
    assert not stat.S_ISREG(os.lstat(target).st_mode)  # still what it was, nothing renamed over it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temp file left


def test_a_link_to_a_regular_file_is_written_and_a_dangling_one_replaced(tmp_path):
    (tmp_path / "real").write_text("old")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    atomic_write_text(tmp_path / "link", "new")
    assert (tmp_path / "link").read_text() == "new"


def test_a_link_is_never_replaced_its_target_is(tmp_path):
    (tmp_path / "real").write_text("old")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    atomic_write_text(tmp_path / "link", "new")
    assert (tmp_path / "link").is_symlink() and (tmp_path / "real").read_text() == "new"
    (tmp_path / "dangling").symlink_to(tmp_path / "absent")
    atomic_write_text(tmp_path / "dangling", "made")
    assert (tmp_path / "dangling").is_symlink() and (tmp_path / "absent").read_text() == "made"


def test_data_files_are_written_verbatim_and_logs_redacted(tmp_path):
    from azr.logs import write_data_file

    text = "assert f('Bearer abcdefgh12345') == 'http://user:pw@host/x?key=0123456789'\n"
    assert write_data_file(tmp_path / "tasks.jsonl", text).read_text() == text
    assert "<redacted>" in atomic_write_text(tmp_path / "log.txt", text).read_text()
