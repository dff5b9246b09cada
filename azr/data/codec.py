"""The one encoding of tests as strings, and the one place that reads it back: TRL's dataset columns hold a list
of strings per row, so a `Test` travels there as text. An assert snippet is its own source; any other test (or an
assert with its own tolerance) is a NUL byte, its kind, a colon and a JSON object (NUL never occurs in Python
source, so no snippet is mistaken for one). Also a test's row form, the object a user writes in a task file
(`row_form`). Task-level options (prelude, checker, tolerances) are columns of their own, never in a test's text.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from azr.data.tests_model import COMPARES, AssertTest, CallCase, ModuleTest, StdioCase, Test
from azr.inputs import load_json

_NUL = "\x00"
_CACHED_CHARS = 1 << 16  # grading decodes the same cells every step: small ones are remembered


def encode(test: Test) -> str:
    """A test as one string of a `tests` column."""
    if isinstance(test, AssertTest) and test.atol is None and test.rtol is None:
        return test.source
    kind, body = _body(test)
    return f"{_NUL}{kind}:" + json.dumps(body, ensure_ascii=False)


def _body(test: Test) -> tuple[str, dict[str, Any]]:
    if isinstance(test, AssertTest):
        return "assert", {"test": test.source, **_given(atol=test.atol, rtol=test.rtol)}
    if isinstance(test, StdioCase):
        compare = {"compare": test.compare} if test.compare != "lines" else {}
        return "stdio", {"input": test.input, "output": test.output, **compare, **_given(float_tol=test.float_tol)}
    if isinstance(test, CallCase):
        body: dict[str, Any] = {"call": test.call, "args": test.args, "output": test.output}
        body |= {"kwargs": test.kwargs} if test.kwargs else {}
        body |= {"any_class": True} if test.any_class else {}
        return "call", body | _given(atol=test.atol, rtol=test.rtol)
    body = {"module": test.module, "test": test.test}
    if test.test is not None:
        body["case"] = test.case
    body |= {"shared": True} if test.shared else {}
    body |= {"names": [[m, list(s)] for m, s in test.names]} if test.names else {}
    return test.style, body


def _given(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def encode_all(tests: list[Test]) -> list[str]:
    return [encode(t) for t in tests]


def is_encoded(text: str) -> bool:
    """Whether a string is a tagged test (rather than an assert snippet)."""
    return text.startswith(_NUL)


def decode(text: str) -> Test:
    """The test a string of a `tests` column holds; ValueError (with the reason) for a tagged string that is
    malformed."""
    return _decoded(text) if len(text) <= _CACHED_CHARS else _decode(text)


def decode_all(texts: list[str]) -> list[Test]:
    return [decode(t) for t in texts]


@functools.lru_cache(maxsize=1 << 14)
def _decoded(text: str) -> Test:
    return _decode(text)


def _decode(text: str) -> Test:
    if not text.startswith(_NUL):
        return AssertTest(text)
    kind, sep, rest = text[1:].partition(":")
    if not sep or kind not in _READERS:
        raise ValueError(f"unknown test kind {kind[:40]!r}")
    body = load_json(rest)
    if not isinstance(body, dict):
        raise ValueError(f"a {kind} test's body is not a JSON object")
    try:
        return _READERS[kind](kind, body)
    except (KeyError, TypeError, AttributeError) as exc:
        why = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ValueError(f"a malformed {_NAMES.get(kind, kind + ' test')} ({why})") from None


def _number(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, got {value!r:.40}")
    return float(value)


def _read_assert(kind: str, body: dict[str, Any]) -> Test:
    if not isinstance(body["test"], str):
        raise TypeError("test: expected a string")
    return AssertTest(body["test"], _number(body.get("atol")), _number(body.get("rtol")))


def _read_stdio(kind: str, body: dict[str, Any]) -> Test:
    compare = body.get("compare", "lines")
    if compare not in COMPARES:
        raise TypeError(f"compare: expected one of {', '.join(COMPARES)}")
    return StdioCase(str(body["input"]), str(body["output"]), compare, _number(body.get("float_tol")))


def _read_call(kind: str, body: dict[str, Any]) -> Test:
    args, kwargs = body.get("args", []), body.get("kwargs") or {}
    if not isinstance(body["call"], str) or not isinstance(args, list) or not isinstance(kwargs, dict):
        raise TypeError("call, args, kwargs: expected a string, a list and an object")
    return CallCase(
        body["call"],
        args,
        body["output"],
        kwargs,
        _number(body.get("atol")),
        _number(body.get("rtol")),
        body.get("any_class") is True,
    )


def _read_module(kind: str, body: dict[str, Any]) -> Test:
    test, case = body.get("test"), body.get("case")
    if not isinstance(body["module"], str) or not (test is None or isinstance(test, str)):
        raise TypeError("module, test: expected strings")
    return ModuleTest(
        kind,  # type: ignore[arg-type]
        body["module"],
        test,
        case if isinstance(case, int) and not isinstance(case, bool) else None,
        body.get("shared") is True,
        module_names(body.get("names")),
    )


def module_names(value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A module test's `names` ([module, [symbols]] pairs), the well-formed ones."""
    found = []
    for item in value if isinstance(value, list) else ():
        if isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and item[0].isidentifier():
            symbols = item[1] if isinstance(item[1], list) else []
            found.append((item[0], tuple(s for s in symbols if isinstance(s, str) and s.isidentifier())))
    return tuple(found)


_NAMES = {"stdio": "stdin/stdout case", "call": "function-call case"}
_READERS = {
    "assert": _read_assert,
    "stdio": _read_stdio,
    "call": _read_call,
    "pytest": _read_module,
    "unittest": _read_module,
}


def row_form(test: Test) -> Any:
    """A test as a user writes it in a task file: the string of an assert test (its own tolerance is the task's,
    shown once), the object of a stdin/stdout or call case, `{"pytest": MODULE}` for a module's test (a module's
    tests are shown once by `Task.to_json`)."""
    if isinstance(test, AssertTest):
        return test.source
    if isinstance(test, ModuleTest):
        return {test.style: test.module, **({"shared": True} if test.shared else {})}
    _, body = _body(test)
    body.pop("call", None)
    return body
