"""Hostile programs against the sandbox: real runs on the `bwrap` and `process` backends, no mocks; on bwrap also with
numpy offered to programs (`sandbox.packages`), where it is installed.

Each test runs one hostile program (or a small batch) and asserts one property; the pool fixtures then check that
the same pool still serves a normal program correctly. Guarantees that need namespaces carry the `namespaces`
marker and are strict xfails on the `process` backend, which proves that the documented gap is real.
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from functools import cache
from pathlib import Path

import pytest

import azr.sandbox.pool as pool_module
from azr.sandbox import ExecResult, Limits, cgroups, open_pool

REPO = Path(__file__).resolve().parents[2]
NUMPY = "bwrap+numpy"  # bwrap with numpy (and what it needs) bound into the sandbox for programs to import
BACKENDS = ("bwrap", NUMPY, "process") if importlib.util.find_spec("numpy") else ("bwrap", "process")
TMP_MB = 32  # the namespaced backends' private /tmp; small so that filling it is quick
WALL = Limits(wall_s=1.0)  # runaway programs
QUICK = Limits(wall_s=5.0)  # programs that end by themselves: generous, so a loaded machine cannot fail them
NORMAL = "import sys\nprint(sum(range(10)))\nsys.stderr.write('e')\nopen(3, 'w').write('r')\n"
REPORT = "import json, os\n\ndef report(obj):\n    os.write(3, json.dumps(obj).encode())\n\n"


def prog(src: str, **values) -> str:
    """Program source: `report(obj)` writes JSON to the report channel; `values` become globals."""
    return REPORT + "".join(f"{k} = {v!r}\n" for k, v in values.items()) + textwrap.dedent(src)


def report(result: ExecResult):
    assert result.report, result
    return json.loads(result.report)


def assert_serves(pool) -> None:
    """The pool runs a normal program correctly: output, error output and report all come back."""
    r = pool.run(NORMAL, QUICK)
    assert (r.status, r.exit_code, r.stdout, r.stderr, r.report) == ("ok", 0, "45\n", "e", "r"), r


def gap(reason: str, when: bool | str = True) -> list:
    """Backends for a namespace guarantee: bwrap must hold it (with and without numpy offered); on process it is a
    strict xfail (when `when`)."""
    process = pytest.param("process", marks=pytest.mark.xfail(when, reason=reason, strict=True))
    return [*BACKENDS[:-1], process]


def open_backend(backend: str, **settings):
    """open_pool for a backend id of this module: `bwrap+numpy` is bwrap offering numpy to programs."""
    name, _, package = backend.partition("+")
    return open_pool(name, packages=(package,) if package else (), **settings)


@cache
def _host_online() -> bool:
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=1).close()
    except OSError:
        return False
    return True


def _has_cap(bit: int) -> bool:
    """Whether this process has capability `bit` (programs on the process backend inherit them)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> bit & 1)
    return False


CAP_SYS_PTRACE, CAP_SYS_RESOURCE = 19, 24


def _no_pids_cgroup() -> bool:
    """Without a pids cgroup (azr not root, or none writable) nothing finds processes that left their worker."""
    return os.geteuid() != 0 or "pids" not in cgroups.discover()


def marker() -> str:
    """A unique `sleep` argument: `sleep <marker>` finds its process on the host by command line."""
    return f"777.{uuid.uuid4().int % 10**12:012d}"


def host_pids_with(mark: str) -> list[int]:
    """Host processes running `sleep <mark>` (zombies have no command line, so they never match)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if Path(f"/proc/{name}/cmdline").read_bytes() == f"sleep\0{mark}\0".encode():
                    found.append(int(name))
            except OSError:
                pass
    return found


def host_descendants(root: int) -> set[int]:
    """Live (non-zombie) descendants of host process `root`."""
    parent, alive = {}, set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            parent[int(name)] = int(fields[1])
            if fields[0] != b"Z":
                alive.add(int(name))
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier} - found
        found |= frontier
    return found & alive


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] != b"Z"


def wait_for(predicate, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def kill_quietly(pids) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def pools():
    """Pools opened on first use and shared by the module: pools(backend, workers)."""
    opened = {}

    def get(backend: str, workers: int = 2):
        if (backend, workers) not in opened:
            opened[backend, workers] = open_backend(backend, workers=workers, tmp_size_mb=TMP_MB)
        return opened[backend, workers]

    yield get
    for pool in opened.values():
        pool.close()


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture
def pool(pools, backend):
    """The backend's shared two-worker pool; after the test it must still serve a normal program."""
    yield pools(backend)
    assert_serves(pools(backend))


@pytest.fixture
def solo(pools, backend):
    """The backend's one-worker pool: consecutive programs share a worker (and its scratch space)."""
    yield pools(backend, 1)
    assert_serves(pools(backend, 1))


@pytest.fixture
def victim():
    """A process of the caller's: a sleeping child of the test process."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    proc.kill()
    proc.wait()


# --- runaway programs -----------------------------------------------------------------------------------------


def test_infinite_loop_times_out(pool):
    r = pool.run("while True:\n    pass\n", WALL)
    assert r.status == "timeout", r


def test_long_sleep_is_stopped_at_the_wall_limit(pool):
    r = pool.run("import time\ntime.sleep(1000)\nprint('woke')\n", WALL)
    assert r.status == "timeout" and "woke" not in r.stdout, r


def test_spinning_threads_that_ignore_signals_are_stopped(pool):
    code = """
        import signal, threading
        for sig in signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}:
            try:
                signal.signal(sig, signal.SIG_IGN)
            except (OSError, ValueError):
                pass
        def spin():
            while True:
                pass
        for _ in range(4):
            threading.Thread(target=spin, daemon=True).start()
        spin()
    """
    r = pool.run(prog(code), Limits(wall_s=1.0, cpu_s=30))  # the wall clock, not the CPU limit, must end it
    assert r.status == "timeout", r


def test_fork_bomb_is_contained(pool):
    for _ in range(pool.size):
        assert_serves(pool)  # every worker started, so that only the bomb's processes could be new
    before = host_descendants(os.getpid())
    code = """
        while True:
            try:
                os.fork()
            except OSError:
                pass
    """
    r = pool.run(prog(code), Limits(wall_s=1.5))
    assert r.status in ("timeout", "ok"), r
    assert wait_for(lambda: not host_descendants(os.getpid()) - before), "the bomb left processes on the host"


def test_bytearray_memory_bomb_hits_the_memory_limit(pool):
    r = pool.run("b = bytearray(1 << 20)\nwhile True:\n    b *= 2\n", Limits(wall_s=5.0, memory_mb=256))
    assert r.status == "memory", r


def test_list_memory_bomb_hits_the_memory_limit(pool):
    r = pool.run("hog = []\nwhile True:\n    hog.append(bytearray(1 << 20))\n", Limits(wall_s=5.0, memory_mb=256))
    assert r.status == "memory", r


# --- output ---------------------------------------------------------------------------------------------------


def test_huge_stdout_is_cut_at_output_bytes_and_marked(pool):
    r = pool.run("print('x' * 10**8)", Limits(wall_s=5.0, output_bytes=4096))
    assert r.stdout == "x" * 4096 and r.stdout_truncated, r


def test_huge_stderr_is_cut_at_output_bytes_and_marked(pool):
    r = pool.run("import sys\nsys.stderr.write('y' * 10**8)", Limits(wall_s=5.0, output_bytes=4096))
    assert r.stderr == "y" * 4096 and r.stderr_truncated, r


def test_non_utf8_output_is_decoded_leniently(pool):
    r = pool.run("import os\nos.write(1, b'\\xff\\xfe\\x80ok\\xc3')\nos.write(2, b'\\xc0\\xafbad')\n", QUICK)
    assert r.status == "ok" and "ok" in r.stdout and "\ufffd" in r.stdout and "bad" in r.stderr, r


def test_closing_stdout_only_loses_the_programs_own_output(pool):
    r = pool.run("import os\nos.close(1)\nprint('lost')\nos.write(2, b'still here')\n", QUICK)
    assert r.status == "ok" and r.stdout == "" and "still here" in r.stderr, r


# --- how programs end -----------------------------------------------------------------------------------------


def test_segfault_is_a_crash_with_sigsegv(pool):
    r = pool.run("import ctypes\nctypes.string_at(0)\n", QUICK)
    assert (r.status, r.signal) == ("crashed", signal.SIGSEGV), r


def test_os_exit_zero_is_ok(pool):
    r = pool.run("import os\nprint('unflushed', end='')\nos._exit(0)\n", QUICK)
    assert (r.status, r.exit_code) == ("ok", 0), r


def test_sys_exit_code_is_reported(pool):
    r = pool.run("import sys\nsys.exit(3)\n", QUICK)
    assert (r.status, r.exit_code) == ("ok", 3), r


def test_killing_its_own_process_group_ends_only_the_program(pool):
    r = pool.run("import os\nos.killpg(0, 9)\n", QUICK)
    assert (r.status, r.signal) == ("crashed", signal.SIGKILL), r


def test_program_that_kills_its_worker_is_blamed_and_the_worker_respawned(pool):
    lost = pool.stats["workers_lost"]
    r = pool.run("import os, time\nos.kill(os.getppid(), 9)\ntime.sleep(5)\n", QUICK)
    assert r.status == "crashed" and pool.stats["workers_lost"] == lost + 1, r


def test_program_that_stops_its_worker_times_out_and_the_worker_is_replaced(pool, monkeypatch):
    monkeypatch.setattr(pool_module, "REPLY_GRACE_S", 2.0)  # how long the pool waits past the wall limit
    lost = pool.stats["workers_lost"]
    r = pool.run("import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)\n", WALL)
    assert r.status == "timeout" and pool.stats["workers_lost"] == lost + 1, r


# --- leftovers between programs -------------------------------------------------------------------------------

SCAN_FOR_MARKER = """
    seen = []
    for name in os.listdir("/proc"):
        try:
            if MARKER.encode() in open("/proc/%s/cmdline" % name, "rb").read():
                seen.append(name)
        except OSError:
            pass
    report(seen)
"""


def _leaves_nothing_behind(solo, code: str) -> None:
    """Run `code` (which starts a `sleep MARKER` that outlives it); the next program and the host see none."""
    mark = marker()
    r = solo.run(prog(code, MARKER=mark), QUICK)
    assert r.status == "ok", r
    try:
        assert report(solo.run(prog(SCAN_FOR_MARKER, MARKER=mark), QUICK)) == []
        assert host_pids_with(mark) == []
    finally:
        kill_quietly(host_pids_with(mark))


def test_background_subprocess_is_gone_before_the_next_program(solo):
    _leaves_nothing_behind(solo, "import subprocess\nsubprocess.Popen(['sleep', MARKER])\n")


DETACH = """
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execvp("sleep", ["sleep", MARKER])
        os._exit(0)
    os.wait()
"""


def test_detached_grandchild_in_its_own_session_is_gone_before_the_next_program(solo):
    _leaves_nothing_behind(solo, DETACH)


def test_scratch_files_are_invisible_to_the_next_program(solo):
    mark = marker()
    code = """
        import tempfile
        for place in {os.getcwd(), tempfile.gettempdir(), os.environ["HOME"]}:
            with open(os.path.join(place, "secret-" + MARKER), "w") as f:
                f.write(MARKER)
    """
    assert solo.run(prog(code, MARKER=mark), QUICK).status == "ok"
    look = """
        found = []
        for root, dirs, files in os.walk(os.path.dirname(os.getcwd())):
            found += [os.path.join(root, name) for name in files if MARKER in name]
        report(found)
    """
    assert report(solo.run(prog(look, MARKER=mark), QUICK)) == []


DEEP_TREE = """
        top = os.getcwd()
        for _ in range(3000):  # deeper than PATH_MAX allows to name in one path
            os.mkdir("d")
            os.chdir("d")
        open("leaf", "w").write("x")
        for _ in range(1500):
            os.chdir("..")
        os.chmod("d", 0)
        os.chdir(top)
        os.chmod("d", 0)
        os.mkdir("locked")
        open("locked/f", "w").write("x")
        os.chmod("locked", 0)
        os.chmod(top, 0)
    """


def test_deep_unreadable_tree_does_not_break_the_next_program(solo):
    assert solo.run(prog(DEEP_TREE), QUICK).status == "ok"
    own = "('run-', '.stdout-', '.stderr-', '.report-')"  # this run's working directory and capture files
    look = f"report(sorted(n for n in os.listdir(os.path.dirname(os.getcwd())) if not n.startswith({own})))"
    r = solo.run(prog(look), QUICK)
    assert r.status == "ok" and report(r) == [], r


def test_chmod_of_the_scratch_root_does_not_break_the_next_program(solo):
    code = "os.chmod(os.path.dirname(os.getcwd()), 0)\nos.chmod(os.getcwd(), 0)\n"  # /tmp itself under bwrap
    assert solo.run(prog(code), QUICK).status == "ok"


def test_file_size_limit_stops_a_program_filling_the_disk(pool):
    code = """
        written = 0
        try:
            with open("fill", "wb", buffering=0) as f:
                while True:
                    written += f.write(b"\\0" * (1 << 20))
        except OSError as exc:
            os.unlink("fill")
            report({"errno": exc.errno, "written": written})
    """
    r = pool.run(prog(code), Limits(wall_s=5.0, file_size_mb=4))
    assert report(r) == {"errno": errno.EFBIG, "written": 4 << 20}, r


def test_open_files_are_capped(pool):
    code = """
        fds = []
        try:
            while True:
                fds.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as exc:
            report({"errno": exc.errno, "highest": max(fds)})
    """
    got = report(pool.run(prog(code), Limits(wall_s=5.0, open_files=32)))
    assert got["errno"] == errno.EMFILE and got["highest"] < 32, got


@pytest.mark.namespaces
@pytest.mark.parametrize(
    "backend",
    gap("process: CAP_SYS_RESOURCE (held here) lets programs raise hard limits", "_has_cap(CAP_SYS_RESOURCE)"),
)
def test_hard_rlimits_cannot_be_raised(pool):
    code = """
        import resource
        raised = []
        for name in ("RLIMIT_NOFILE", "RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_CPU", "RLIMIT_NPROC"):
            which = getattr(resource, name)
            try:
                resource.setrlimit(which, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
                raised.append(name)
            except (OSError, ValueError):
                pass
        report(raised)
    """
    assert report(pool.run(prog(code), QUICK)) == []


# --- namespaces: network --------------------------------------------------------------------------------------

CONNECT = """
    import socket
    try:
        socket.create_connection((HOST, PORT), timeout=1).sendall(b"hello")
        report("connected")
    except OSError as exc:
        report(repr(exc))
"""


@pytest.mark.namespaces
@pytest.mark.parametrize("backend", gap("process: programs share the host's network, loopback included"))
def test_no_connection_to_a_host_loopback_listener(pool):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        result = report(pool.run(prog(CONNECT, HOST="127.0.0.1", PORT=server.getsockname()[1]), QUICK))
        server.settimeout(0.1)
        with pytest.raises(OSError):
            server.accept()[0].close()
    assert result != "connected"


@pytest.mark.namespaces
@pytest.mark.parametrize("backend", gap("process: programs share the host's network", "_host_online()"))
def test_no_external_network(pool):
    code = """
        import socket
        reached = []
        try:
            socket.create_connection(("1.1.1.1", 53), timeout=1).close()
            reached.append("1.1.1.1:53")
        except OSError:
            pass
        try:
            socket.getaddrinfo("example.com", 443)
            reached.append("dns")
        except OSError:
            pass
        report(reached)
    """
    assert report(pool.run(prog(code), QUICK)) == []


# --- namespaces: the host's filesystem ------------------------------------------------------------------------

WRITE = """
    try:
        os.makedirs(os.path.dirname(TARGET), exist_ok=True)
        with open(TARGET, "w") as f:
            f.write("owned")
        report("written")
    except OSError as exc:
        report(repr(exc))
"""
WRITE_DIRS = {"repository": REPO, "tmp_path": None, "usr": Path("/usr"), "root": Path("/")}


@pytest.mark.namespaces
@pytest.mark.parametrize(
    ("where", "backend"),
    [
        pytest.param(
            where,
            backend,
            marks=[
                pytest.mark.xfail(
                    backend == "process" and (path is None or os.access(path, os.W_OK)),
                    reason="process: programs write wherever the caller may",
                    strict=True,
                )
            ],
        )
        for where, path in WRITE_DIRS.items()
        for backend in BACKENDS
    ],
)
def test_cannot_write_to_the_host_filesystem(pool, where, tmp_path):
    target = (WRITE_DIRS[where] or tmp_path) / f"azr-hostile-{uuid.uuid4().hex}"
    try:
        pool.run(prog(WRITE, TARGET=str(target)), QUICK)
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)


READ = """
    try:
        report(open(TARGET).read())
    except OSError as exc:
        report(repr(exc))
"""


def _assert_unreadable(pool, path: Path, secret: str) -> None:
    r = pool.run(prog(READ, TARGET=str(path)), QUICK)
    assert secret not in r.report + r.stdout + r.stderr, r


def _assert_planted_file_unreadable(pool, directory: Path, prefix: str) -> None:
    secret = uuid.uuid4().hex
    path = directory / f"{prefix}{secret}"
    path.write_text(secret)
    try:
        _assert_unreadable(pool, path, secret)
    finally:
        path.unlink()


@pytest.mark.namespaces
@pytest.mark.parametrize("backend", gap("process: programs read the caller's home"))
def test_cannot_read_the_callers_home(pool):
    _assert_planted_file_unreadable(pool, Path.home(), ".azr-hostile-")


@pytest.mark.namespaces
@pytest.mark.parametrize("backend", gap("process: programs read the repository"))
def test_cannot_read_the_repository(pool):
    _assert_unreadable(pool, REPO / "pyproject.toml", "[project]")


@pytest.mark.namespaces
@pytest.mark.parametrize("backend", gap("process: programs read the host's /tmp"))
def test_cannot_read_the_hosts_tmp(pool):
    _assert_planted_file_unreadable(pool, Path(tempfile.gettempdir()), "azr-hostile-")


@pytest.mark.namespaces
@pytest.mark.parametrize("backend", gap("process: the host's /etc is visible"))
def test_cannot_read_etc_passwd(pool):
    _assert_unreadable(pool, Path("/etc/passwd"), "root:")


@pytest.mark.namespaces
@pytest.mark.parametrize(
    "backend", gap("process: /etc/shadow is readable by the caller", "os.access('/etc/shadow', os.R_OK)")
)
def test_cannot_read_etc_shadow(pool):
    _assert_unreadable(pool, Path("/etc/shadow"), "root:")


@pytest.mark.namespaces
@pytest.mark.parametrize("backend", gap("process: /tmp is the host's, shared by every program"))
def test_tmp_is_private_and_wiped_between_programs(solo):
    name = f"azr-hostile-{uuid.uuid4().hex}"
    try:
        assert solo.run(prog("open('/tmp/' + NAME, 'w').write('x')", NAME=name), QUICK).status == "ok"
        seen = report(solo.run(prog("report(os.path.exists('/tmp/' + NAME))", NAME=name), QUICK))
        assert not seen and not (Path("/tmp") / name).exists()
    finally:
        (Path("/tmp") / name).unlink(missing_ok=True)


@pytest.mark.namespaces
@pytest.mark.parametrize("backend", gap("process: /dev/shm is the host's, shared by every program"))
def test_dev_shm_is_private_and_wiped_between_programs(solo):
    name = f"azr-hostile-{uuid.uuid4().hex}"
    host = Path("/dev/shm") / name
    try:
        solo.run(prog("open('/dev/shm/' + NAME, 'w').write('x')", NAME=name), QUICK)
        seen = report(solo.run(prog("report(os.path.exists('/dev/shm/' + NAME))", NAME=name), QUICK))
        assert not seen and not host.exists()
    finally:
        host.unlink(missing_ok=True)


@pytest.mark.namespaces
@pytest.mark.parametrize("backend", gap("process: scratch space is on the host's disk, bounded only per file"))
def test_private_tmp_size_bounds_total_disk_use(pool):
    code = """
        names, result = [], None
        try:
            for i in range(3 * TMP_MB // 8):
                names.append("fill-%d" % i)
                with open(names[-1], "wb", buffering=0) as f:
                    for _ in range(8):
                        f.write(b"\\0" * (1 << 20))
        except OSError as exc:
            result = exc.errno
        for name in names:
            os.unlink(name)
        report(result)
    """
    assert report(pool.run(prog(code, TMP_MB=TMP_MB), Limits(wall_s=5.0, file_size_mb=8))) == errno.ENOSPC


# --- namespaces: the caller's processes and secrets -----------------------------------------------------------

FIND_KEYS = """
    found = []
    def scan(where, data):
        for entry in data.split(b"\\0"):
            if b"sk-" in entry or b"API_KEY" in entry:
                found.append([where, entry.decode("latin-1")])
    print(dict(os.environ))
    scan("os.environ", "\\0".join("%s=%s" % item for item in os.environ.items()).encode())
    paths = []
    for path in PATHS:  # "*": every process; PPID: the worker
        if path == "*":
            paths += ["/proc/%s/environ" % pid for pid in os.listdir("/proc") if pid.isdigit()]
        else:
            paths.append(path.replace("PPID", str(os.getppid())))
    for path in paths:
        try:
            with open(path, "rb") as f:
                scan(path, f.read())
        except OSError:
            pass
    print(found)
    report(found)
"""


def test_api_keys_are_absent_from_the_programs_environment(backend, monkeypatch):
    key = f"sk-azr-fake-{uuid.uuid4().hex}"
    monkeypatch.setenv("AZR_FAKE_API_KEY", key)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    with open_backend(backend, workers=1, tmp_size_mb=TMP_MB) as fresh:
        code = prog(FIND_KEYS, PATHS=["/proc/self/environ", "/proc/PPID/environ"])
        r = fresh.run(code, QUICK)
        assert r.status == "ok" and "PATH" in r.stdout, r
        assert key not in r.stdout + r.stderr + r.report, r


@pytest.mark.namespaces
@pytest.mark.parametrize("backend", gap("process: programs read other processes' /proc/<pid>/environ"))
def test_api_keys_of_the_callers_processes_are_invisible(backend, monkeypatch):
    key = f"sk-azr-fake-{uuid.uuid4().hex}"
    monkeypatch.setenv("AZR_FAKE_API_KEY", key)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # holds the key
    try:
        with open_backend(backend, workers=1, tmp_size_mb=TMP_MB) as fresh:
            code = prog(FIND_KEYS, PATHS=["/proc/1/environ", "*"])
            r = fresh.run(code, QUICK)
            assert r.status == "ok", r
            assert key not in r.stdout + r.stderr + r.report, r
    finally:
        helper.kill()
        helper.wait()


@pytest.mark.namespaces
@pytest.mark.parametrize("backend", gap("process: programs see the host's /proc"))
def test_the_callers_process_is_invisible(pool):
    code = """
        mine = "/proc/%d/cmdline" % HOST_PID
        seen = [os.path.exists(mine) and open(mine, "rb").read() == HOST_CMDLINE]
        for name in os.listdir("/proc"):
            try:
                seen.append(open("/proc/%s/cmdline" % name, "rb").read() == HOST_CMDLINE)
            except OSError:
                pass
        report(any(seen))
    """
    cmdline = Path("/proc/self/cmdline").read_bytes()
    assert report(pool.run(prog(code, HOST_PID=os.getpid(), HOST_CMDLINE=cmdline), QUICK)) is False


@pytest.mark.namespaces
@pytest.mark.parametrize("backend", gap("process: programs may signal every process of the caller's uid"))
def test_cannot_signal_the_callers_processes(pool, backend, victim):
    """SIGTERM and SIGKILL by pid at the test process and a child of it. On `process` the test's own pid is left
    out of the targets: proving that gap would kill the test run."""
    targets = [victim.pid] + ([os.getpid()] if backend != "process" else [])
    code = """
        import signal
        delivered = []
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in TARGETS:
                try:
                    os.kill(pid, sig)
                    delivered.append(pid)
                except OSError:
                    pass
        report(delivered)
    """
    delivered = report(pool.run(prog(code, TARGETS=targets), QUICK))
    time.sleep(0.2)
    assert victim.poll() is None and delivered == []


@pytest.mark.namespaces
@pytest.mark.parametrize(
    "backend",
    [
        *BACKENDS[:-1],
        pytest.param(
            "process",
            marks=pytest.mark.xfail(run=False, reason="process: kill(-1) would kill every process on the host"),
        ),
    ],
)
def test_kill_of_every_process_spares_the_caller(pool, victim):
    r = pool.run("import os, time\nos.kill(-1, 9)\ntime.sleep(5)\n", QUICK)
    time.sleep(0.2)
    assert r.status == "crashed" and victim.poll() is None, r  # it took its worker (and itself) down


@pytest.mark.namespaces
@pytest.mark.parametrize(
    "backend",
    gap("process: CAP_SYS_PTRACE (held here) overrides the non-dumpable flag", "_has_cap(CAP_SYS_PTRACE)"),
)
def test_cannot_read_the_workers_memory(pool):
    code = """
        worker, got = os.getppid(), None
        try:
            for line in open("/proc/%d/maps" % worker):
                span, perms = line.split()[:2]
                if perms.startswith("r"):
                    with open("/proc/%d/mem" % worker, "rb") as mem:
                        mem.seek(int(span.split("-")[0], 16))
                        got = len(mem.read(64))
                    break
        except OSError:
            pass
        report(got)
    """
    assert report(pool.run(prog(code), QUICK)) is None


# --- pool lifecycle -------------------------------------------------------------------------------------------

LINGER = (
    DETACH
    + """
    import time
    time.sleep(60)
"""
)


@pytest.mark.parametrize(
    "backend",
    gap(
        "process: a detached descendant leaves its worker's session; only the pids cgroup finds it", "_no_pids_cgroup()"
    ),
)
def test_close_leaves_no_worker_or_program_process(backend):
    """pool.close() while a program runs kills its worker, the program and a sleeper it detached (setsid)."""
    mark = marker()
    before = host_descendants(os.getpid())
    pool = open_backend(backend, workers=2, tmp_size_mb=TMP_MB)
    results = []
    runner = threading.Thread(target=lambda: results.append(pool.run(prog(LINGER, MARKER=mark), Limits(wall_s=60))))
    runner.start()
    try:
        assert wait_for(lambda: host_pids_with(mark), 20), "the program never started its sleeper"
        started = host_descendants(os.getpid()) - before
        pool.close()
        runner.join(20)
        assert results and results[0].status == "crashed", results
        assert wait_for(lambda: not host_pids_with(mark) and not any(alive(p) for p in started)), [
            (p, Path(f"/proc/{p}/cmdline").read_bytes()[:80]) for p in started if alive(p)
        ]
    finally:
        pool.close()
        kill_quietly(host_pids_with(mark))


PARENT = """
import sys
from azr.sandbox import Limits, open_pool
name, _, package = sys.argv[1].partition("+")
pool = open_pool(name, workers=1, tmp_size_mb=32, packages=(package,) if package else ())
print(pool.run(sys.argv[2], Limits(wall_s=60)), flush=True)
"""


@pytest.mark.namespaces
@pytest.mark.parametrize(
    "backend", gap("process: a detached descendant outlives its SIGKILLed worker; no one is left to empty its cgroup")
)
def test_death_of_the_caller_leaves_no_worker_or_program_process(backend, tmp_path):
    """SIGKILL of the process that opened the pool takes its workers, their program and its detached sleeper."""
    mark = marker()
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, backend, prog(LINGER, MARKER=mark)],
        cwd=REPO,
        env={**os.environ, "TMPDIR": str(tmp_path)},  # the pool's files, which a killed caller cannot remove
        stderr=subprocess.DEVNULL,
    )
    started: set[int] = set()
    try:
        assert wait_for(lambda: host_pids_with(mark), 20), "the program never started its sleeper"
        started = host_descendants(parent.pid)
        parent.kill()
        parent.wait()
        assert wait_for(lambda: not host_pids_with(mark) and not any(alive(p) for p in started)), [
            (p, Path(f"/proc/{p}/cmdline").read_bytes()[:80]) for p in started if alive(p)
        ]
    finally:
        parent.kill()
        parent.wait()
        kill_quietly(host_pids_with(mark) + [p for p in started if alive(p)])
        roots = cgroups.discover() if os.geteuid() == 0 else {}
        for root in roots.values():  # the killed caller could not remove its workers' cgroups: empty ones go now
            for group in root.glob(f"w{parent.pid}-*"):
                wait_for(lambda group=group: _removed(group))


def _removed(path: Path) -> bool:
    try:
        path.rmdir()
    except FileNotFoundError:
        return True
    except OSError:  # still busy: its last processes are dying
        return False
    return True


def test_mixed_hostile_batch_gets_a_result_each_and_the_pool_recovers(pool):
    codes = [
        "while True:\n    pass\n",
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        "b = bytearray(1 << 20)\nwhile True:\n    b *= 2\n",
        "import os, time\nos.kill(os.getppid(), 9)\ntime.sleep(5)\n",
        "print('fine')",
    ]
    results = pool.map(codes, Limits(wall_s=1.5, memory_mb=256))
    assert [r.status for r in results][:1] + [r.status for r in results][2:] == ["timeout", "memory", "crashed", "ok"]
    assert results[1].status in ("timeout", "ok") and results[4].stdout == "fine\n", results
    again = pool.map([f"print({i} * 2)" for i in range(6)], QUICK)
    assert [(r.status, r.stdout) for r in again] == [("ok", f"{i * 2}\n") for i in range(6)], again


# --- found in review: cross-program interference and resource bounds ---------------------------------------------


def test_scratch_made_unlistable_neither_breaks_nor_leaks_into_the_next_program(solo):
    """chmod 0o300 (write and search, no read) on the scratch root hid its files from the wipe."""
    code = """
        scratch = os.path.dirname(os.getcwd())
        open(os.path.join(scratch, "left-" + MARKER), "w").write(MARKER)
        os.chmod(scratch, 0o300)
    """
    mark = marker()
    assert solo.run(prog(code, MARKER=mark), QUICK).status == "ok"
    look = "report([n for n in os.listdir(os.path.dirname(os.getcwd())) if MARKER in n])"
    r = solo.run(prog(look, MARKER=mark), QUICK)
    assert r.status == "ok" and report(r) == [], r


def test_the_report_channel_has_no_name_a_program_can_open(pool):
    """The capture files are unlinked once opened: descriptor 3 is the only way to the report, so a process that
    closed it (a stdin/stdout case) cannot reopen it by name, and no capture file can be swapped for a FIFO that
    would stall the worker (it reads through the descriptors it opened)."""
    code = """
        scratch = os.path.dirname(os.getcwd())
        report(sorted(n for n in os.listdir(scratch) if n.startswith((".stdout-", ".stderr-", ".report-"))))
    """
    r = pool.run(prog(code), QUICK)
    assert r.status == "ok" and report(r) == [], r


SHM_GET = """
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    ident = libc.shmget(0, 1 << 20, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT
    report(ident)
"""


@pytest.mark.namespaces
@pytest.mark.parametrize("backend", gap("process: System V IPC objects are the host's, left in place"))
def test_sysv_shared_memory_does_not_outlive_its_program(solo):
    ident = report(solo.run(prog(SHM_GET), QUICK))
    assert ident >= 0
    try:
        look = "report([int(r.split()[1]) for r in open('/proc/sysvipc/shm').read().splitlines()[1:]])"
        assert ident not in report(solo.run(prog(look), QUICK))
    finally:
        if ident not in (None, -1) and os.path.exists("/proc/sysvipc/shm"):  # process backend: clean the host
            subprocess.run(["ipcrm", "-m", str(ident)], capture_output=True)


MQ = """
    import ctypes, ctypes.util
    libc = ctypes.CDLL(None, use_errno=True)
    rt = ctypes.CDLL(ctypes.util.find_library("rt") or None, use_errno=True)
    rt.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
    rt.mq_send.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint]
    rt.mq_receive.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p]
    rt.mq_receive.restype = ctypes.c_ssize_t
"""
MQ_STASH = """
    fd = rt.mq_open(NAME.encode(), os.O_CREAT | os.O_WRONLY, 0o666, None)
    sent = fd >= 0 and rt.mq_send(fd, b"hidden", 6, 0) == 0
    report([sent, ctypes.get_errno(), os.listdir("/dev/mqueue") if os.path.isdir("/dev/mqueue") else None])
"""
MQ_READ = """
    fd = rt.mq_open(NAME.encode(), os.O_RDONLY | os.O_NONBLOCK, 0, None)
    buf = ctypes.create_string_buffer(1 << 16)
    got = rt.mq_receive(fd, buf, len(buf), None) if fd >= 0 else -1
    report([buf.raw[: max(got, 0)].decode(), os.listdir("/dev/mqueue") if os.path.isdir("/dev/mqueue") else []])
"""


def test_a_message_queue_does_not_outlive_its_program(solo, backend):
    """A POSIX message queue is a file of the worker's private mqueue mount, wiped like /dev/shm; where there is no
    such mount (the process backend: the host's queues) mq_open is refused."""
    name = f"/azr-hostile-{uuid.uuid4().hex[:16]}"
    sent, why, listed = report(solo.run(prog(MQ + MQ_STASH, NAME=name), QUICK))
    if backend == "process":
        assert not sent and why == errno.EPERM
    else:
        assert sent and listed == [name[1:]]  # a program still has message queues of its own
    assert report(solo.run(prog(MQ + MQ_READ, NAME=name), QUICK)) == ["", []]


KEYS = """
    import ctypes, platform
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    ADD_KEY, REQUEST_KEY, KEYCTL = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}[platform.machine()]
    def call(*args):
        done = libc.syscall(*args)
        return done if done >= 0 else -ctypes.get_errno()
    found = {}
    for ring in (-3, -4, -5):  # @s, @u, @us
        found[ring] = call(ADD_KEY, b"user", b"azr-stash", b"hidden", 6, ctypes.c_int(ring))
    found["join"] = call(KEYCTL, 1, b"azr-stash-ring")  # KEYCTL_JOIN_SESSION_KEYRING: a named keyring
    found["request"] = call(REQUEST_KEY, b"user", b"azr-stash", None, ctypes.c_int(0))
    if platform.machine() == "x86_64":  # the same calls through the x32 ABI's numbers
        found["x32"] = call(0x40000000 | ADD_KEY, b"user", b"azr-stash", b"hidden", 6, ctypes.c_int(-4))
    report(sorted(set(found.values())))
"""


def test_keyring_calls_are_refused_so_no_key_reaches_the_next_program(solo):
    """Keyrings outlive programs (the user keyring is the uid's for as long as the namespace lives) and no wipe can
    list them: add_key, request_key and keyctl fail with EPERM, in every ABI, on every backend."""
    assert report(solo.run(prog(KEYS), QUICK)) == [-errno.EPERM]
    assert report(solo.run(prog(KEYS), QUICK)) == [-errno.EPERM]


@pytest.mark.namespaces
@pytest.mark.parametrize("backend", gap("process: /dev/shm is the host's, unbounded by azr"))
def test_dev_shm_is_bounded_like_tmp(pool):
    size = report(pool.run(prog("st = os.statvfs('/dev/shm')\nreport(st.f_blocks * st.f_frsize)"), QUICK))
    assert size <= TMP_MB << 20


def test_memory_error_after_long_stderr_is_still_reported_as_memory(pool):
    code = "import sys\nsys.stderr.write('x' * 70000)\nblob = bytearray(1 << 30)\n"
    r = pool.run(code, Limits(wall_s=5.0, memory_mb=256))
    assert r.status == "memory" and r.stderr_truncated, r


@pytest.mark.parametrize(
    "bad",
    [
        *({"wall_s": float("inf")}, {"cpu_s": 0}, {"report_bytes": 0}, {"memory_mb": -1}, {"wall_s": 10**401}),
        *({"memory_mb": 0.5}, {"file_size_mb": 0.5}, {"output_bytes": 1e18}, {"processes": True}, {"wall_s": True}),
    ],
)
def test_limits_must_be_finite_and_positive(bad):
    """Each limit as the type it is: a float size or count is refused here, never in the wire conversion."""
    with pytest.raises(ValueError, match=r"must be a (finite positive number|positive integer)"):
        Limits(**bad)


def test_close_during_map_gives_error_results_not_an_exception(backend):
    pool = open_backend(backend, workers=2, tmp_size_mb=TMP_MB)
    threading.Timer(0.5, pool.close).start()
    results = pool.map(["import time\ntime.sleep(3)"] * 6, Limits(wall_s=10.0))
    assert len(results) == 6 and {r.status for r in results} <= {"error", "crashed", "timeout"}
    assert any(r.status == "error" and "closed" in r.note for r in results)


def test_fork_bomb_is_contained_by_polling_where_root_has_no_pids_cgroup(monkeypatch):
    """Docker mounts /sys/fs/cgroup read-only: as root there, the worker counts its namespace's processes itself."""
    if os.geteuid() != 0:
        pytest.skip("only root is exempt from RLIMIT_NPROC; other users are bounded by the rlimit")
    monkeypatch.setattr(cgroups, "discover", dict)  # as if no cgroup hierarchy were writable
    before = host_descendants(os.getpid())
    with open_pool("bwrap", workers=1, tmp_size_mb=TMP_MB, max_processes=16) as pool:
        assert not pool._cgroups
        assert_serves(pool)
        bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
        r = pool.run(bomb, Limits(wall_s=3.0, processes=16))
        assert r.status in ("crashed", "timeout"), r
        assert_serves(pool)
    assert wait_for(lambda: not host_descendants(os.getpid()) - before), "the bomb left processes on the host"


def test_close_removes_the_pools_files_whatever_a_program_left(backend):
    """On `process` the scratch is on the host: a tree deeper than PATH_MAX must still go when the pool closes."""
    pool = open_backend(backend, workers=1, tmp_size_mb=TMP_MB)
    assert pool.run(prog(DEEP_TREE), QUICK).status == "ok"
    pool.close()
    assert not pool._home.exists()


# --- stopped and traced programs; new namespaces -----------------------------------------------------------------


def test_a_program_that_stops_itself_is_a_timeout(pool):
    r = pool.run("import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\n", WALL)
    assert r.status == "timeout", r


def test_a_traced_program_that_stops_itself_is_a_timeout_not_a_crash(pool):
    """PTRACE_TRACEME makes the worker its tracer, whose wait then sees the stop: only an exit ends the wait."""
    code = (
        "import ctypes, os, signal\nctypes.CDLL(None).ptrace(0, 0, None, None)\nos.kill(os.getpid(), signal.SIGSTOP)\n"
    )
    r = pool.run(code, WALL)
    assert r.status == "timeout", r


@pytest.mark.namespaces
@pytest.mark.parametrize("backend", gap("process: programs may make namespaces as the host allows"))
def test_no_new_user_or_network_namespace(pool):
    code = """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        report([name for name, flag in (("user", 0x10000000), ("net", 0x40000000)) if libc.unshare(flag) == 0])
    """
    assert report(pool.run(prog(code), QUICK)) == []


# --- packages offered to programs ------------------------------------------------------------------------------
NO_NUMPY = pytest.mark.skipif(NUMPY not in BACKENDS, reason="numpy is not installed here")


@NO_NUMPY
@pytest.mark.namespaces
@pytest.mark.parametrize(
    "backend",
    [
        NUMPY,
        pytest.param(
            "process+numpy",
            marks=pytest.mark.xfail(strict=True, reason="process: programs read every host file, this venv included"),
        ),
    ],
)
def test_offered_packages_are_read_only_and_nothing_else_of_the_environment_is_visible(pool):
    code = """
        import os, sys
        import numpy
        seen = {"numpy": numpy.arange(3).sum().item()}
        try:
            open(os.path.join(os.path.dirname(numpy.__file__), "azr-probe"), "w")
            seen["wrote"] = True
        except OSError:
            seen["wrote"] = False
        for name in ("azr", "click", "yaml", "pytest"):
            try:
                __import__(name)
                seen[name] = True
            except ImportError:
                seen[name] = False
        seen["venv"] = os.path.exists(VENV)
        report(seen)
    """
    r = pool.run(prog(code, VENV=sys.prefix), Limits(wall_s=20.0))
    hidden = {"azr": False, "click": False, "yaml": False, "pytest": False, "venv": False}
    assert report(r) == {"numpy": 3, "wrote": False, **hidden}, r
