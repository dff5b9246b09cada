"""A task's tests as typed values: the `Test` union of an assert snippet, a function-call case, a stdin/stdout case
and one test of a pytest- or unittest-style module. Task-level options (prelude, checker, float tolerances) live
once on the `Task`, never in a test; a test holds only what is its own. Strings with a kind tag are an encoding of
these values (`azr.data.codec`), never read anywhere else. A new kind is a class here, its planner
(`azr.rewards.plans.PLANNERS`) and its verdict rule (`azr.rewards.verdicts`). Nothing here runs code.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

Compare = Literal["lines", "tokens", "decimals"]
COMPARES: tuple[str, ...] = ("lines", "tokens", "decimals")


@dataclass(frozen=True)
class AssertTest:
    """A Python snippet run after the solution (`assert f(1) == 2`). Its own float tolerance, where it has one
    (EvalPlus's per-output rule), wins over the task's, name by name."""

    kind: ClassVar[str] = "assert"
    source: str
    atol: float | None = None
    rtol: float | None = None


@dataclass(frozen=True)
class StdioCase:
    """One stdin/stdout case: the program reads `input` on stdin and must print `output`.

    `compare` is how outputs are matched: `lines` (trailing whitespace of each line and of the whole ignored, as
    competitive-programming judges do) or `tokens` (whitespace-separated tokens); `float_tol` (absolute or
    relative) lets numeric tokens differ by that much, and implies `tokens`; `decimals` (LiveCodeBench's rule) is
    `lines` where a line that differs as text may still equal as decimals, token by token. A task's `checker`, when
    it has one, judges instead."""

    kind: ClassVar[str] = "stdio"
    input: str
    output: str
    compare: Compare = "lines"
    float_tol: float | None = None


@dataclass(frozen=True, eq=False)
class CallCase:
    """`call(*args, **kwargs)` must equal `output` as JSON compares (a tuple equals a list), floats within the
    case's own tolerance or else the task's. `call` is the entry point, `name` or `Class.method` (a fresh instance
    per case); with `any_class`, the method of the program's first class that defines it, else the function.
    Values came from JSON, so equality and hashing go by their JSON text (`[1]` and `[True]` are two cases)."""

    kind: ClassVar[str] = "call"
    call: str
    args: list[Any] = field(default_factory=list)
    output: Any = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    atol: float | None = None
    rtol: float | None = None
    any_class: bool = False

    @functools.cached_property
    def _key(self) -> str:
        return json.dumps(
            [self.call, self.args, self.output, self.kwargs, self.atol, self.rtol, self.any_class], ensure_ascii=False
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CallCase) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def expression(self) -> str:
        """The expression evaluated in the sandbox: `f(args)`, or `Class().method(args)`; with `any_class`
        (PrimeIntellect's verifier), the method `f` of a fresh instance of the program's first class that defines
        one, else the function `f`."""
        call = self.call
        if "." in call:
            cls, method = call.split(".", 1)
            call = f"{cls}().{method}"
        elif self.any_class:
            owner = (  # classes the program itself defined (the prelude's imports are of other modules), in its order
                "next((v for v in list(globals().values()) if isinstance(v, type) "
                f"and getattr(v, '__module__', None) == __name__ and {call!r} in vars(v)), None)"
            )
            call = f"(lambda c: {call} if c is None else c().{call})({owner})"
        pieces = [repr(a) for a in self.args]
        pieces += [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{call}({', '.join(pieces)})"


@dataclass(frozen=True)
class ModuleTest:
    """One test of a pytest- or unittest-style module: the module's source and the test's name (`test_f`,
    `TestC::test_m`, `Case.test_m`; None for a module that collected none: its verdict is `no tests ran`), the
    parametrized case (None: all of them), whether it runs in the solution's own namespace (`shared`, BigCodeBench)
    and the modules it imports from that may be the solution's (`names`: (module, symbols) pairs)."""

    kind: ClassVar[str] = "module"
    style: Literal["pytest", "unittest"]
    module: str
    test: str | None = None
    case: int | None = None
    shared: bool = False
    names: tuple[tuple[str, tuple[str, ...]], ...] = ()


Test = AssertTest | StdioCase | CallCase | ModuleTest
TEST_TYPES = (AssertTest, StdioCase, CallCase, ModuleTest)  # for isinstance: every class of the union


def test_kind(test: Test) -> str:
    """Which of `KINDS` a test is (a module test by its style)."""
    return test.style if isinstance(test, ModuleTest) else test.kind


test_kind.__test__ = False  # type: ignore[attr-defined]  # not a pytest test function where tests import it
KINDS: tuple[str, ...] = ("assert", "stdio", "call", "pytest", "unittest")  # what `test_kind` can answer
