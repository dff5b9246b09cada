"""A task's tests as typed values: the `Test` union of an assert snippet, a function-call case, a stdin/stdout case
and one test of a pytest- or unittest-style module. Task-level options (prelude, checker, float tolerances) live
once on the `Task`, never in a test; a test holds only what is its own. Each class gives its fields as a JSON
object (`body`, read back by `from_body`) and its task-file form (`row`); the tagged string that carries a body
through dataset columns is `azr.data.codec`'s alone. A new kind is a class here, its planner
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

    kinds: ClassVar[tuple[str, ...]] = ("assert",)
    kind: ClassVar[str] = "assert"
    source: str
    atol: float | None = None
    rtol: float | None = None

    def body(self) -> dict[str, Any]:
        return {"test": self.source, **_given(atol=self.atol, rtol=self.rtol)}

    @classmethod
    def from_body(cls, kind: str, body: dict[str, Any]) -> AssertTest:
        return cls(_text(body["test"], "test"), _number(body.get("atol")), _number(body.get("rtol")))

    def row(self) -> Any:
        return self.source  # its own tolerance is shown once, as the task's (`atol`, `rtol`)


@dataclass(frozen=True)
class StdioCase:
    """One stdin/stdout case: the program reads `input` on stdin and must print `output`.

    `compare` is how outputs are matched: `lines` (trailing whitespace of each line and of the whole ignored, as
    competitive-programming judges do) or `tokens` (whitespace-separated tokens); `float_tol` (absolute or
    relative) lets numeric tokens differ by that much, and implies `tokens`; `decimals` (LiveCodeBench's rule) is
    `lines` where a line that differs as text may still equal as decimals, token by token. A task's `checker`, when
    it has one, judges instead."""

    kinds: ClassVar[tuple[str, ...]] = ("stdio",)
    kind: ClassVar[str] = "stdio"
    input: str
    output: str
    compare: Compare = "lines"
    float_tol: float | None = None

    def body(self) -> dict[str, Any]:
        compare = {"compare": self.compare} if self.compare != "lines" else {}
        return {"input": self.input, "output": self.output, **compare, **_given(float_tol=self.float_tol)}

    @classmethod
    def from_body(cls, kind: str, body: dict[str, Any]) -> StdioCase:
        compare = body.get("compare", "lines")
        if compare not in COMPARES:
            raise TypeError(f"compare: expected one of {', '.join(COMPARES)}")
        return cls(str(body["input"]), str(body["output"]), compare, _number(body.get("float_tol")))

    def row(self) -> Any:
        return self.body()


@dataclass(frozen=True, eq=False)
class CallCase:
    """`call(*args, **kwargs)` must equal `output` as JSON compares (a tuple equals a list), floats within the
    case's own tolerance or else the task's. `call` is the entry point, `name` or `Class.method` (a fresh instance
    per case); with `any_class`, the method of the program's first class that defines it, else the function.
    Values came from JSON, so equality and hashing go by their JSON text (`[1]` and `[True]` are two cases)."""

    kinds: ClassVar[tuple[str, ...]] = ("call",)
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
        return json.dumps(self.body(), ensure_ascii=False)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CallCase) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"call": self.call, "args": self.args, "output": self.output}
        body |= {"kwargs": self.kwargs} if self.kwargs else {}
        body |= {"any_class": True} if self.any_class else {}
        return body | _given(atol=self.atol, rtol=self.rtol)

    @classmethod
    def from_body(cls, kind: str, body: dict[str, Any]) -> CallCase:
        args, kwargs = body.get("args", []), body.get("kwargs") or {}
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise TypeError("args, kwargs: expected a list and an object")
        atol, rtol = _number(body.get("atol")), _number(body.get("rtol"))
        return cls(_text(body["call"], "call"), args, body["output"], kwargs, atol, rtol, body.get("any_class") is True)

    def row(self) -> Any:
        return {k: v for k, v in self.body().items() if k != "call"}  # the entry point is the task's

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
    """One test of a pytest- or unittest-style module (its `kind` is the style): the module's source and the
    test's name (`test_f`, `TestC::test_m`, `Case.test_m`; None for a module that collected none: its verdict is
    `no tests ran`), the parametrized case (None: all of them), whether it runs in the solution's own namespace
    (`shared`, BigCodeBench) and the modules it imports from that may be the solution's (`names`: (module,
    symbols) pairs)."""

    kinds: ClassVar[tuple[str, ...]] = ("pytest", "unittest")
    style: Literal["pytest", "unittest"]
    module: str
    test: str | None = None
    case: int | None = None
    shared: bool = False
    names: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def kind(self) -> str:
        return self.style

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"module": self.module, "test": self.test}
        if self.test is not None:
            body["case"] = self.case
        body |= {"shared": True} if self.shared else {}
        return body | ({"names": [[m, list(s)] for m, s in self.names]} if self.names else {})

    @classmethod
    def from_body(cls, kind: str, body: dict[str, Any]) -> ModuleTest:
        test, case = body.get("test"), body.get("case")
        if not (test is None or isinstance(test, str)):
            raise TypeError("test: expected a string")
        case = case if isinstance(case, int) and not isinstance(case, bool) else None
        style = "pytest" if kind == "pytest" else "unittest"
        return cls(style, _text(body["module"], "module"), test, case, body.get("shared") is True, _names(body))

    def row(self) -> Any:
        return {self.style: self.module, **({"shared": True} if self.shared else {})}  # one per module (to_json)


def _names(body: dict[str, Any]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A module test's `names` ([module, [symbols]] pairs), the well-formed ones."""
    found = []
    value = body.get("names")
    for item in value if isinstance(value, list) else ():
        if isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and item[0].isidentifier():
            symbols = item[1] if isinstance(item[1], list) else []
            found.append((item[0], tuple(s for s in symbols if isinstance(s, str) and s.isidentifier())))
    return tuple(found)


def _given(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _number(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, got {value!r:.40}")
    return float(value)


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected a string")
    return value


Test = AssertTest | StdioCase | CallCase | ModuleTest
TEST_TYPES: tuple[type, ...] = (AssertTest, StdioCase, CallCase, ModuleTest)  # for isinstance: the union's classes
KINDS: tuple[str, ...] = tuple(kind for cls in TEST_TYPES for kind in cls.kinds)  # what `test_kind` can answer


def test_kind(test: Test) -> str:
    """Which of `KINDS` a test is."""
    return test.kind


test_kind.__test__ = False  # type: ignore[attr-defined]  # not a pytest test function where tests import it
