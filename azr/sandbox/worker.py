"""Sandbox worker: the fork server that runs inside the backend (bwrap, nsjail or a plain process).

Started once per pool slot as `python -I -S -c <this file> <settings-json>`; standard library only, because it runs
under the sandbox's interpreter with no site-packages. It speaks length-prefixed JSON frames on its stdin/stdout,
forks one child per program, and returns what the child wrote. It never runs program code itself: only children
do, after `setsid`, rlimits, a fresh working directory, closed descriptors and a fixed environment. A child runs
its program as CPython runs a script: a file in its working directory (beside the request's `files`) executed as
the `__main__` module, the request's stdin on descriptor 0, the exit code (or SIGINT death) CPython would give.
After every program it kills and reaps everything the program left behind, hands back the files asked for, and
wipes the scratch space, /dev/shm, /mnt and the message queues; keyring calls are refused by a seccomp filter it
installs on itself (`install_filter`). Modules the settings preload (the caller's code, never a program's) run
once here, at start: every program finds them imported.
"""

import atexit
import binascii
import builtins
import contextlib
import gc
import json
import os
import resource
import select
import signal
import stat
import struct
import sys
import time
import types

try:
    import ctypes

    _LIBC = ctypes.CDLL(None, use_errno=True)
except (ImportError, OSError):  # no ctypes: lose PDEATHSIG/subreaper/dumpable hardening, keep the rest
    _LIBC = None

# Imported once by the worker so that each forked child finds them warm: the usual imports of a coding task.
# Not `random`: it maps libcrypto (via hashlib), and every fork would pay for copying those page tables. Not
# `dataclasses` (no task or HumanEval solution imports it): with `inspect` it was two thirds of a worker's start.
WARM_MODULES = (
    "bisect",
    "collections",
    "functools",
    "heapq",
    "itertools",
    "math",
    "re",
    "string",
    "typing",
)
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_CHILD_SUBREAPER = 1, 4, 36
HEADER = struct.Struct(">I")
REPORT_FD = 3
CAPTURED = ("stdout", "stderr", "report")
_IPC_RMID = 0
_GUARD_POLL_S = 0.002
MQUEUE = "/dev/mqueue"  # the backend's private mqueue mount (bwrap --mqueue), wiped like /dev/shm
# Kernel state that outlives a program and no wipe can list: keyrings (add_key, request_key, keyctl; a key in the
# user keyring @u or a named session keyring stays for every later program of the same uid) and, where the worker
# has no private mqueue mount to wipe, POSIX message queues (mq_open). Denied with EPERM by a seccomp filter the
# worker installs on itself at start, so every program inherits it and none can lift it: one filter for every
# backend (bwrap, nsjail, process, the envelope on SandboxFusion), where a bwrap-only `--seccomp FD` would leave
# the others open and a fresh IPC/keyring namespace per program would cost a clone per run (and the worker has no
# capability to make one). audit arch -> ({call: number}, number bit of a foreign ABI to refuse whole, or 0).
_SYSCALLS = {
    0xC000003E: ({"add_key": 248, "request_key": 249, "keyctl": 250, "mq_open": 240}, 0x40000000),  # x86_64, x32
    0xC00000B7: ({"add_key": 217, "request_key": 218, "keyctl": 219, "mq_open": 180}, 0),  # aarch64
}
_MACHINES = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


def _prctl(option, value):
    if _LIBC is not None:
        _LIBC.prctl(option, value, 0, 0, 0)


def read_frame(fd):
    """One JSON frame from `fd`, or None at end of file."""
    header = _read_exactly(fd, HEADER.size)
    if header is None:
        return None
    body = _read_exactly(fd, HEADER.unpack(header)[0])
    if body is None:
        return None
    return json.loads(body)


def write_frame(fd, obj):
    body = json.dumps(obj).encode()
    data = HEADER.pack(len(body)) + body
    while data:
        data = data[os.write(fd, data) :]


def _read_exactly(fd, n):
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _place_program(run_dir, code, files):
    """Write the request's files (name, base64 content) into the working directory, then the program beside them
    under a fresh name (as SandboxFusion's `tmpXXXXXXXX.py`); the program's path. A name must stay inside."""
    for name, content in files:
        path = os.path.normpath(os.path.join(run_dir, name))
        if os.path.isabs(name) or not path.startswith(run_dir + "/"):
            raise ValueError(f"files: {name!r} is outside the working directory")
        os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            _write_all(fd, binascii.a2b_base64(content))
        finally:
            os.close(fd)
    while True:
        script = os.path.join(run_dir, f"tmp{os.urandom(4).hex()}.py")
        try:
            fd = os.open(script, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            continue
        try:
            _write_all(fd, code.encode("utf-8", "surrogatepass"))
        finally:
            os.close(fd)
        return script


def _read_capped(fd, cap):
    """(text, truncated): the first `cap` bytes the child wrote to `fd`, decoded leniently."""
    data = os.pread(fd, cap + 1, 0)
    return data[:cap].decode("utf-8", errors="replace"), len(data) > cap


class Worker:
    def __init__(self, settings):
        self.scratch = settings["scratch"]  # private tmpfs inside a namespace; a private directory otherwise
        # The programs' whole environment, set here once: each child then only points HOME and TMPDIR at its own
        # directory (rebuilding os.environ in every child touched ~45 shared pages, a tenth of a child's cost).
        os.environ.clear()
        os.environ.update(settings["env"])
        # kill(-1) is a fast "everything but me and init" only inside a pid namespace of our own.
        own = pid_namespace()
        self.private_pids = own is not None and own != settings["host_pidns"]
        # Where a program can write: the scratch space, and /dev/shm, /mnt and the mqueue mount inside a namespace
        # (ours alone there; a queue is a file of the mqueue mount, so the same wipe removes it).
        private = [p for p in ("/dev/shm", "/mnt", MQUEUE) if self.private_pids and os.path.isdir(p)]
        self.places = [self.scratch, *private]
        self.seccomp = install_filter(denied_calls(MQUEUE in private))  # "" or why programs run without it
        # Where nothing else bounds process counts (root without a pids cgroup), count them ourselves: inside our own
        # pid namespace /proc lists only the sandbox's processes.
        self.process_guard = settings.get("process_guard") if self.private_pids else None
        self.count = 0
        self.dirty = False
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)  # orphans of a program come back to us, so none can escape cleanup
        _prctl(_PR_SET_DUMPABLE, 0)  # programs run as our uid: keep them out of our memory and descriptors
        if settings.get("die_with_parent"):
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != settings["parent_pid"]:
                os._exit(1)

    def run(self, request):
        self.count += 1
        for place in self.places:  # a program may have changed their modes; the next one still gets them
            os.chmod(place, 0o700)
        tag = f"{self.count}-{os.urandom(4).hex()}"  # unguessable: nothing can be planted for the next program
        run_dir = os.path.join(self.scratch, f"run-{tag}")
        os.mkdir(run_dir, 0o700)
        limits = request["limits"]
        # Opened here, beside the working directory, and read back through these descriptors: a program that
        # replaces the paths (FIFO, symlink) only changes names, never what the worker reads.
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        names = (*CAPTURED, "stdin") if request.get("stdin") else CAPTURED
        files = {
            name: os.open(
                os.path.join(self.scratch, f".{name}-{tag}"), flags | (os.O_APPEND if name == "report" else 0), 0o600
            )
            for name in names
        }
        for name in names:  # reachable through descriptors only: no program can open the report channel by name
            os.unlink(os.path.join(self.scratch, f".{name}-{tag}"))
        # Prepared before the fork: each page of the worker that the child touches is a page the child must copy.
        redirects = [(files["stdout"], 1), (files["stderr"], 2), (files["report"], REPORT_FD)]
        if "stdin" in files:  # a file read from its start, as a pipe would be; without stdin, 0 stays /dev/null
            _write_all(files["stdin"], request["stdin"].encode("utf-8", "surrogatepass"))
            os.lseek(files["stdin"], 0, os.SEEK_SET)
            redirects.append((files["stdin"], 0))
        rlimits = [(getattr(resource, name), (soft, hard)) for name, soft, hard in limits["rlimits"]]
        try:
            script = _place_program(run_dir, request["code"], request.get("files") or ())
        except BaseException:
            for fd in files.values():
                os.close(fd)
            raise
        started = time.monotonic()
        try:
            pid = os.fork()
            if pid == 0:
                _child(request["code"], script, redirects, rlimits, run_dir)  # never returns
            finished = self._wait_exit(pid, started + limits["wall_s"])
            # The child is still unreaped, so its pid (and process group id) cannot have been reused yet.
            self._kill_group(pid)
            wait_status = next(s for s in iter(lambda: os.waitpid(pid, 0)[1], None) if not os.WIFSTOPPED(s))
            duration = time.monotonic() - started
            self._reap_leftovers()
            cap = limits["output_bytes"]
            stdout, stdout_cut = _read_capped(files["stdout"], cap)
            stderr, stderr_cut = _read_capped(files["stderr"], cap)
            report, report_cut = _read_capped(files["report"], limits["report_bytes"])
            stderr_tail = os.pread(files["stderr"], 2000, max(0, os.fstat(files["stderr"]).st_size - 2000))
        finally:
            for fd in files.values():
                os.close(fd)
        # Every process of the program is gone: nothing can swap a file while it is read.
        fetched, note = self._fetch(run_dir, request.get("fetch") or (), limits.get("fetch_bytes", 0))
        self._wipe()
        code = sig = None
        if not finished:
            status = "timeout"
        elif os.WIFSIGNALED(wait_status):
            sig = os.WTERMSIG(wait_status)
            status = "timeout" if sig == signal.SIGXCPU else "signaled"
        else:
            code = os.WEXITSTATUS(wait_status)
            status = "memory" if code != 0 and b"MemoryError" in stderr_tail else "exited"
        reply = {
            "status": status,
            "exit_code": code,
            "signal": sig,
            "stdout": stdout,
            "stderr": stderr,
            "stdout_truncated": stdout_cut,
            "stderr_truncated": stderr_cut,
            "report": report,
            "report_truncated": report_cut,
            "duration_s": duration,
            "recycle": self.dirty,
        }
        if request.get("fetch"):
            reply["files"] = fetched
        if note:
            reply["note"] = note
        return reply

    def _fetch(self, run_dir, names, cap):
        """({name: base64} of the regular files asked for, note): a name is relative to the working directory or
        absolute, and must lie in a place programs write (what is elsewhere the caller can read itself); a missing
        file is left out, as SandboxFusion does, and so is one past the `cap` bytes left for all (named in the note)."""
        found, over = {}, []
        for name in names:
            path = os.path.realpath(os.path.join(run_dir, name))
            if not any(path.startswith(place.rstrip("/") + "/") for place in self.places):
                continue
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    continue
                if info.st_size > cap:
                    over.append(name)
                    continue
                data = os.pread(fd, info.st_size, 0)
            finally:
                os.close(fd)
            cap -= len(data)
            found[name] = binascii.b2a_base64(data, newline=False).decode()
        note = f"fetch_files: not returned, past the size cap: {', '.join(over)}" if over else ""
        return found, note

    def _wait_exit(self, pid, deadline):
        """True when the child exits before `deadline` (left unreaped; a traced stop is no exit); False at the limit."""
        try:
            pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            pidfd = None
        try:
            while True:
                info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                if info is not None and info.si_code in (os.CLD_EXITED, os.CLD_KILLED, os.CLD_DUMPED):
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                if self.process_guard and sum(name.isdigit() for name in os.listdir("/proc")) > self.process_guard:
                    self._kill_group(pid)  # over the process limit: the program ends as killed (crashed)
                    left = min(left, 0.001)
                poll = min(left, _GUARD_POLL_S) if self.process_guard else left
                if pidfd is not None:
                    select.select([pidfd], [], [], poll)
                else:
                    time.sleep(min(poll, 0.001))
        finally:
            if pidfd is not None:
                os.close(pidfd)

    def _kill_group(self, pid):
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(OSError):
                kill(pid, signal.SIGKILL)
        if self.private_pids:
            os.kill(-1, signal.SIGKILL)  # inside our own pid namespace: every process but init and us

    def _reap_leftovers(self):
        """Kill and reap whatever the program left running: as a subreaper, every orphan is our child."""
        while True:
            try:
                reaped, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return  # no children left means no descendants left
            if reaped == 0:
                for child in _children_of(os.getpid()):
                    for kill in (os.killpg, os.kill):
                        with contextlib.suppress(OSError):
                            kill(child, signal.SIGKILL)
                time.sleep(0.0005)

    def _wipe(self):
        """Remove everything the program could leave for the next one: files in every writable place and, inside
        our own namespaces, System V IPC objects (they would otherwise hold memory for as long as the worker)."""
        for place in self.places:
            try:
                os.chmod(place, 0o700)
                names = os.listdir(place)
            except OSError:
                self.dirty = True  # the pool replaces this worker, and with it the whole scratch space
                continue
            for name in names:
                try:
                    remove_tree(os.path.join(place, name))
                except OSError:
                    self.dirty = True
        if self.private_pids and _LIBC is not None:
            for kind in ("shm", "sem", "msg"):
                for ident in _ipc_ids(kind):
                    if _remove_ipc(kind, ident) != 0:
                        self.dirty = True


def denied_calls(private_mqueue):
    """The calls every program is refused: the keyring's always; mq_open where no private mqueue mount is wiped."""
    calls = ("add_key", "request_key", "keyctl")
    return calls if private_mqueue else (*calls, "mq_open")


def seccomp_filter(arch, calls):
    """A classic-BPF seccomp program (bytes of struct sock_filter) for audit architecture `arch`: `calls` and every
    call of another ABI (i386 through int 0x80, x32) fail with EPERM; everything else is allowed."""
    numbers, foreign_bit = _SYSCALLS[arch]
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JGE|K, BPF_RET|K
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    checks = [(jge, foreign_bit)] if foreign_bit else []
    checks += [(jeq, numbers[name]) for name in calls]
    program = [(ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, deny), (ld, 0, 0, 0)]  # seccomp_data.arch, .nr
    for i, (op, k) in enumerate(checks):
        program.append((op, len(checks) - i, 0, k))  # matched: jump over the rest and the allow, to the deny
    program += [(ret, 0, 0, allow), (ret, 0, 0, deny)]
    return b"".join(struct.pack("HBBI", *insn) for insn in program)


def install_filter(calls):
    """Refuse `calls` to this process and all it forks from now on (no_new_privs first, as the kernel requires of an
    unprivileged filter); '' when installed, else the reason it could not be."""
    arch = _MACHINES.get(os.uname().machine)
    if arch is None:
        return f"no seccomp filter for {os.uname().machine}"
    if _LIBC is None:
        return "no ctypes"
    code = seccomp_filter(arch, calls)
    insns = ctypes.create_string_buffer(code, len(code))

    class _Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = _Prog(len(code) // 8, ctypes.addressof(insns))
    zero = ctypes.c_ulong(0)
    if _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), zero, zero, zero) != 0:
        return f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}"
    mode = ctypes.c_ulong(_SECCOMP_MODE_FILTER)
    if _LIBC.prctl(_PR_SET_SECCOMP, mode, ctypes.byref(prog), zero, zero) != 0:
        return f"prctl(PR_SET_SECCOMP): {os.strerror(ctypes.get_errno())}"
    return ""


def _remove_ipc(kind, ident):
    if kind == "sem":
        return _LIBC.semctl(ident, 0, _IPC_RMID)
    return (_LIBC.shmctl if kind == "shm" else _LIBC.msgctl)(ident, _IPC_RMID, None)


def _ipc_ids(kind):
    """Identifiers of the System V IPC objects of one kind in our IPC namespace. Raw reads: this runs after every
    program, and Python's io stack cost more than the reads themselves."""
    chunks = []
    try:
        fd = os.open(f"/proc/sysvipc/{kind}", os.O_RDONLY | os.O_CLOEXEC)
        try:
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
        finally:
            os.close(fd)
    except OSError:
        return []
    rows = (row.split() for row in b"".join(chunks).split(b"\n")[1:])
    return [int(fields[1]) for fields in rows if len(fields) > 1]


def remove_tree(path):
    """Remove a file or tree the program made, whatever permissions and depth it gave it."""
    if not os.path.isdir(path) or os.path.islink(path):
        os.unlink(path)
        return
    stack, seen = [path], []
    while stack:  # iterative: a program can nest directories deeper than the recursion limit
        directory = stack.pop()
        seen.append(directory)
        os.chmod(directory, 0o700)
        with os.scandir(directory) as entries:
            for entry in entries:
                (stack.append if entry.is_dir(follow_symlinks=False) else os.unlink)(entry.path)
    for directory in reversed(seen):  # children were found after their parents
        os.rmdir(directory)


def _children_of(ppid):
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            if int(fields[1]) == ppid:
                found.append(int(name))
    return found


def pid_namespace():
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def _child(code, script, redirects, rlimits, run_dir):
    """In the forked child: confine, then run the program as CPython runs `python script`. Never returns."""
    exit_code, interrupted = 1, False
    try:
        os.setsid()
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        _prctl(_PR_SET_DUMPABLE, 1)
        for fd, target in redirects:
            os.dup2(fd, target)  # dup2 clears O_CLOEXEC on the copies
        os.closerange(REPORT_FD + 1, 1 << 16)
        os.chdir(run_dir)
        for which, both in rlimits:
            resource.setrlimit(which, both)
        os.environ["HOME"] = os.environ["TMPDIR"] = run_dir  # the rest was set by the worker, from fixed values
        sys.argv = [script]
        sys.path.insert(0, run_dir)  # the script's directory, as for `python script`: its own modules import
        sys.stdin, sys.stdout, sys.stderr = _STREAMS  # made once by the worker, on descriptors just redirected
        # A real module named __main__ with a file behind it: pickle and multiprocessing find the program's own
        # objects, unittest.main() and doctest.testmod() its tests, inspect and tracebacks its source.
        main = types.ModuleType("__main__")
        main.__file__, main.__cached__, main.__builtins__ = script, None, builtins
        main.__loader__ = _SourceFileLoader("__main__", script)
        sys.modules["__main__"] = main  # the worker's own functions keep their globals (a dict, never cleared)
        compiled = compile(code, script, "exec")
        exit_code = 0
        exec(compiled, main.__dict__)
    except SystemExit as exc:
        exit_code = _exit_code(exc.code)
    except BaseException as exc:
        exit_code, interrupted = 1, isinstance(exc, KeyboardInterrupt)
        with contextlib.suppress(BaseException):  # as the interpreter prints it: from the program's frame on
            exc.__traceback__ = exc.__traceback__.tb_next
            sys.excepthook(type(exc), exc, exc.__traceback__)
    _finalize()
    if interrupted:  # CPython ends an uncaught KeyboardInterrupt by SIGINT, which callers see as -2
        with contextlib.suppress(BaseException):
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
    os._exit(exit_code)


def _finalize():
    """What the interpreter does at exit before it flushes: wait for non-daemon threads, run atexit handlers. Plain
    try blocks: this runs after every program, and each object it makes or touches is a page the child copies."""
    threading = sys.modules.get("threading")
    if threading is not None:
        try:  # noqa: SIM105 (no suppress object to make and touch after every program)
            threading._shutdown()
        except BaseException:
            pass
    try:  # noqa: SIM105
        atexit._run_exitfuncs()
    except BaseException:
        pass
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass


def _exit_code(value):
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    with contextlib.suppress(BaseException):
        print(value, file=sys.stderr)
    return 1


def _make_streams():
    """The programs' sys.stdin/stdout/stderr, built once in the worker (each child inherits a copy and never
    pays for building them): they name descriptors 0-2, which every child points at its own files first."""
    # Held for the worker's whole life and closed by os._exit in each child: not a scoped resource.
    return (
        open(0, closefd=False),
        open(1, "w", closefd=False, encoding="utf-8", errors="backslashreplace"),
        open(2, "w", closefd=False, encoding="utf-8", errors="backslashreplace", buffering=1),
    )


_STREAMS = None
_SourceFileLoader = sys.modules["_frozen_importlib_external"].SourceFileLoader  # always loaded: no import cost


def main():
    global _STREAMS
    settings = json.loads(sys.argv[1])
    builtins.exit = builtins.quit = sys.exit  # normally added by `site`, which -S skips
    sys.path += settings.get("path") or []  # the packages offered to programs, if any (read-only)
    for name in WARM_MODULES:
        __import__(name)
    for name, source in (settings.get("preload") or {}).items():  # the caller's code, run once, shared by forks
        sys.modules[name] = module = types.ModuleType(name)
        exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    compile("pass", "<warm>", "exec")  # the first compile in a process sets the compiler up: no program pays for it
    _STREAMS = _make_streams()
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # inherited: a write past the file limit fails instead of killing
    gc.freeze()  # children then never walk (and so never copy-on-write) the worker's objects in a collection
    proto_in, proto_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)  # nothing the worker prints by accident can corrupt the protocol; programs inherit 0
    worker = Worker(settings)
    hello = {"ready": True, "pid": os.getpid(), "private_pids": worker.private_pids, "seccomp": worker.seccomp}
    write_frame(proto_out, hello)
    while True:
        request = read_frame(proto_in)
        if request is None:
            return
        try:
            reply = worker.run(request)
        except Exception as exc:  # the worker's own fault: the pool reports it as an infrastructure error
            reply = {"status": "error", "note": f"worker: {type(exc).__name__}: {exc}"}
        write_frame(proto_out, reply)


if __name__ == "__main__":
    main()
