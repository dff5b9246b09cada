"""The pool's start-up and streaming: modules preloaded into every worker, workers started in the background before
the first program, programs queued as they are built with results in order, and a program cancelled by its
caller."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from azr.sandbox import Limits, open_pool

QUICK = Limits(wall_s=10.0)


def test_preloaded_modules_are_imported_in_every_program_and_changes_do_not_carry_over():
    with open_pool("bwrap", workers=1, preload={"shared_mod": "VALUE = [41]\n"}) as pool:
        changes = "import shared_mod\nshared_mod.VALUE.append(1)\nprint(len(shared_mod.VALUE), shared_mod.VALUE[0] + 1)"
        first = pool.run(changes, QUICK)
        again = pool.run("import shared_mod\nprint(len(shared_mod.VALUE))", QUICK)
    assert (first.status, first.stdout) == ("ok", "2 42\n")
    assert again.stdout == "1\n"  # each program runs in its own fork: what one changes, the next never sees


def test_a_pool_without_the_preload_has_no_such_module():
    with open_pool("bwrap", workers=1) as pool:
        r = pool.run("import shared_mod", QUICK)
    assert r.exit_code == 1 and "ModuleNotFoundError" in r.stderr


def test_start_brings_every_worker_up_before_the_first_program():
    with open_pool("bwrap", workers=2) as pool:
        started = time.monotonic()
        pool.start()
        assert time.monotonic() - started < 0.5  # it returns at once
        deadline = time.monotonic() + 60
        while pool.stats["spawns"] < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pool.stats["spawns"] == 2 and pool.stats["runs"] == 0
        assert [r.stdout for r in pool.map(["print(1)", "print(2)"], QUICK)] == ["1\n", "2\n"]
        assert pool.stats["spawns"] == 2  # the programs ran on the workers started in the background


def test_imap_runs_programs_while_they_are_still_being_built_and_keeps_their_order():
    built = []
    with open_pool("bwrap", workers=2) as pool:

        def jobs():
            for i in range(6):
                built.append(time.monotonic())
                if i == 3:
                    time.sleep(1.0)  # the caller is slow to build the rest: the first programs run meanwhile
                yield f"import time\nprint({i}, time.monotonic())", QUICK

        results = list(pool.imap(jobs()))
    assert [int(r.stdout.split()[0]) for r in results] == list(range(6))
    ran_first = float(results[0].stdout.split()[1])
    assert ran_first < built[4]  # program 0 had run before program 4 was built


def test_a_worker_always_goes_back_to_its_pool_whatever_a_request_raises():
    """One bad request per worker (a limit that fails its wire conversion, a program that is not text), then a good
    one: it still runs, on the same number of workers."""
    unwired = Limits(wall_s=5.0)
    object.__setattr__(unwired, "memory_mb", 0.5)  # what `Limits` now refuses at construction
    with ThreadPoolExecutor(1) as waiter, open_pool("bwrap", workers=2) as pool:  # closed first: wakes a waiter
        for bad in [("print(1)", unwired), (object(), QUICK)] * 2:  # in a thread: with no worker left, run waits
            with pytest.raises(TypeError):
                waiter.submit(pool.run, *bad).result(timeout=30)
        good = waiter.submit(pool.run, "print(3)", QUICK).result(timeout=30)
        assert good.stdout == "3\n" and pool._idle.qsize() == 2


def test_a_cancelled_program_stops_where_it_runs_and_one_cancelled_before_never_starts():
    cancel = threading.Event()
    with open_pool("bwrap", workers=1) as pool:
        threading.Timer(1.0, cancel.set).start()
        started = time.monotonic()
        stopped = pool.run("while True:\n    pass\n", Limits(wall_s=60.0), cancel=cancel)
        took = time.monotonic() - started
        never = pool.run("print(2)", QUICK, cancel=cancel)
        after = pool.run("print(3)", QUICK)  # a fresh worker in the killed one's place
    assert (stopped.status, stopped.note) == ("error", "cancelled: its caller went away") and took < 30
    assert (never.status, never.note, never.stdout) == ("error", "cancelled: its caller went away", "")
    assert after.stdout == "3\n" and pool.stats["cancelled"] == 2
    assert pool.stats["runs"] == 2  # the loop and print(3): print(2) never reached a worker
