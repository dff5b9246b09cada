"""The execution provider interface: what grading asks of whatever runs untrusted programs.

A *program* is Python source run as CPython runs a script (a file in a private, writable working directory under
`/tmp` in the sandbox, executed as the `__main__` module), with descriptor 3 open for writing as its report channel.
Grading gives it nothing else: no files and no stdin (a stdin/stdout task's cases travel inside the program, which
feeds them to child processes itself). A raw run (`azr sandbox serve`'s `/run_code`) may also give it `stdin` (its
descriptor 0), `files` (name -> base64 content, written into the working directory first) and ask files back
(`fetch`: names relative to the working directory or absolute, returned base64 in `ExecResult.files`), and
`cancel`: an event whose setting stops the program where it runs (the server's client went away).
Its *limits* are a `Limits` (wall clock, CPU, memory, file size, open files, processes, output and report caps).
What comes back is an `ExecResult`: how it ended (`ok`, `timeout`, `memory`, `crashed`, or `error` for the
provider's own failure, never a program's), its exit code or signal, its stdout and stderr (cut at the caps), what it
wrote on descriptor 3 (`report`), how long it took and a note. `preload` names modules (name -> source) the
provider's interpreters import before any program, so that a program may `import` them instead of carrying them;
a provider that cannot preload returns `{}` and programs carry their own copy (grading checks with
`azr.rewards.harness.preloads_harness`).

`isolation` says what the provider guarantees: "namespaces" (bwrap, nsjail: SPEC_FUNCTIONS.md section 1), "none"
(the `process` backend), or what a remote server reports of itself. `metrics` are counters for the run's logs.
Two implementations: `SandboxPool` (this machine) and `RemoteProvider` (`azr sandbox serve` or SandboxFusion over
HTTP); `open_provider(cfg.sandbox)` picks one from `sandbox.provider`, and callers are typed on this protocol only.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Protocol, runtime_checkable

from azr.sandbox.limits import ExecResult, Limits


@runtime_checkable
class ExecutionProvider(Protocol):
    """Runs untrusted programs under limits; see the module docstring for what each part means."""

    @property
    def preload(self) -> Mapping[str, str]:
        """Modules every program may import without carrying them (name -> source); empty when none."""
        ...

    @property
    def size(self) -> int:
        """How many programs it runs at once (a pool's workers, a remote provider's concurrent requests)."""
        ...

    @property
    def isolation(self) -> str:
        """What keeps programs apart from the host: "namespaces", "none", or a remote server's own word."""
        ...

    def metrics(self) -> Mapping[str, float]:
        """Counters since the provider opened (e.g. a remote provider's retries and lost programs); may be empty."""
        ...

    def run(
        self,
        code: str,
        limits: Limits | None = None,
        *,
        stdin: str | None = None,
        files: Mapping[str, str] | None = None,
        fetch: Sequence[str] = (),
        cancel: threading.Event | None = None,
    ) -> ExecResult:
        """One program; never raises for anything the program does. Once `cancel` is set, the program is stopped
        (or never started) and the result is `error`, noted "cancelled"."""
        ...

    def map(self, codes: Sequence[str], limits: Limits | Sequence[Limits] | None = None) -> list[ExecResult]:
        """Several programs, in parallel where the provider can; results in the order given."""
        ...

    def imap(self, jobs: Iterable[tuple[str, Limits | None]]) -> Iterator[ExecResult]:
        """(program, limits) pairs as they come, results in order as soon as each and those before it are done."""
        ...

    def close(self) -> None:
        """Release what the provider holds; idempotent."""
        ...
