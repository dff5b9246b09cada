"""The execution provider interface: what grading asks of whatever runs untrusted programs.

A *program* is Python source run as `__main__` by the provider's interpreter, with descriptor 3 open for writing as
its report channel; it gets no files but a private, empty, writable working directory (`/tmp` in the sandbox) and
no stdin (a stdin/stdout task's cases travel inside the program, which feeds them to child processes itself).
Its *limits* are a `Limits` (wall clock, CPU, memory, file size, open files, processes, output and report caps).
What comes back is an `ExecResult`: how it ended (`ok`, `timeout`, `memory`, `crashed`, or `error` for the
provider's own failure, never a program's), its exit code or signal, its stdout and stderr (cut at the caps), what it
wrote on descriptor 3 (`report`), how long it took and a note. `preload` names modules (name -> source) the
provider's interpreters import before any program, so that a program may `import` them instead of carrying them;
a provider that cannot preload returns `{}` and programs carry their own copy (grading checks with
`azr.rewards.harness.preloads_harness`).

`SandboxPool` (bwrap, nsjail or the process backend behind one worker pool) is the implementation azr ships.
Another one is a file away. A remote HTTP sandbox service, for instance, implements `run` as one POST of
`{"code", "limits": limits.to_wire() | {"memory_mb": ...}}` that returns the `ExecResult` fields as JSON (mapping
the service's own failures to status `error`), `map` and `imap` as the same requests sent over a thread pool, and
`preload` as `{}`; grading (`azr.rewards.grade_many(..., pool=provider)`), evaluation and Absolute Zero then run
on it unchanged, because they only use this interface. The service must keep the guarantees SPEC_FUNCTIONS.md
section 1 lists (no network, a fresh filesystem per program, the limits enforced from outside the program), since
every verdict rests on them.
"""

from __future__ import annotations

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

    def run(self, code: str, limits: Limits | None = None) -> ExecResult:
        """One program; never raises for anything the program does."""
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
