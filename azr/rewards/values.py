"""Typed values, the outside half: what `azr.rewards.runner` encodes in the sandbox is decoded here into values of
trusted types (plain data; Fraction, Decimal, dates and times, range and numpy values rebuilt from validated fields;
an `Opaque` record for anything else), so every comparison a verdict rests on runs on azr's objects, never on the
program's. Why that is as safe as comparing plain data: SPEC_FUNCTIONS.md section 5.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

MAX_HASHED_ITEMS = 10_000


def decode_value(encoded: Any) -> Any:
    """Plain data from the harness's typed encoding; raises (ValueError, TypeError, IndexError) on anything else."""
    if not isinstance(encoded, list) or not encoded or not isinstance(encoded[0], str):
        raise ValueError(f"malformed value {encoded!r:.80}")
    kind, rest = encoded[0], encoded[1:]
    simple = {"N": lambda: None, "b": lambda: bool(rest[0]), "i": lambda: int(rest[0], 16)}
    simple |= {"f": lambda: float(rest[0]), "s": lambda: str(rest[0]), "y": lambda: bytes.fromhex(rest[0])}
    simple |= {"c": lambda: complex(float(rest[0][0]), float(rest[0][1]))}
    if kind in simple:
        return simple[kind]()
    containers = {"l": list, "t": tuple, "S": set, "F": frozenset}
    if kind in ("S", "F", "d"):
        check_hashed_size(len(rest[0]))
    if kind in containers:
        return containers[kind](decode_value(x) for x in rest[0])
    if kind == "d":
        return {decode_value(k): decode_value(v) for k, v in rest[0]}
    if kind in _KNOWN:
        return _KNOWN[kind](*rest)
    raise ValueError(f"unknown value kind {kind!r}")


class Opaque:
    """A value that is not plain data nor a known value type (an `re.Match`, a generator, an object of the
    solution's own class), as it came back: its type's name and its truth. It is equal to nothing but itself, as
    an object without its own `__eq__` is in Python; an object's own `__eq__` is never trusted here."""

    __slots__ = ("own_eq", "truth", "type_name")

    def __init__(self, type_name: Any, truth: Any, own_eq: Any) -> None:
        if not isinstance(type_name, str) or not isinstance(truth, (bool, str, type(None))):
            raise ValueError("malformed opaque value")
        self.type_name, self.truth, self.own_eq = type_name[:100], truth, own_eq is True

    def __bool__(self) -> bool:
        if isinstance(self.truth, bool):
            return self.truth
        raise TypeError(self.truth or f"the truth of a {self.type_name} inside a container was not sent")

    def __eq__(self, other: object) -> bool:
        return other is self

    def __ne__(self, other: object) -> bool:
        return other is not self

    __hash__ = object.__hash__

    def __lt__(self, other: object) -> bool:
        raise TypeError(f"'<' not supported between instances of {self.type_name!r} and {type(other).__name__!r}")

    __le__ = __gt__ = __ge__ = __lt__

    def __repr__(self) -> str:
        return f"<{self.type_name} object>"


_MAX_RATIONAL_DIGITS = 4096  # hex digits of a Fraction's terms: building one takes a gcd, quadratic in their size
_NUMPY_DTYPE = re.compile(r"[<>|=]?[biufcmMSU][0-9]{1,4}(\[[0-9]*[a-zA-Z]{1,3}\])?")


def _fraction(numerator: str, denominator: str) -> Any:
    from fractions import Fraction

    if len(numerator) > _MAX_RATIONAL_DIGITS or len(denominator) > _MAX_RATIONAL_DIGITS:
        raise ValueError("a Fraction too large to compare")
    return Fraction(int(numerator, 16), int(denominator, 16))


def _decimal(text: str) -> Any:
    from decimal import Decimal

    if not isinstance(text, str):
        raise ValueError("malformed Decimal")
    return Decimal(text)


def _datetime(name: str, fields: Any) -> Any:
    import datetime

    if name == "timedelta":
        days, seconds, microseconds = (int(n, 16) for n in fields)
        return datetime.timedelta(days=days, seconds=seconds, microseconds=microseconds)
    if name not in ("datetime", "date", "time") or not isinstance(fields, str):
        raise ValueError(f"malformed {name} value")
    return getattr(datetime, name).fromisoformat(fields)


def _range(fields: Any) -> range:
    start, stop, step = (int(n, 16) for n in fields)
    return range(start, stop, step)


def _numpy(dtype: str, shape: Any, data: str, scalar: Any) -> Any:
    """An array (or numpy scalar) rebuilt from its dtype, shape and bytes; numpy is imported only when one comes."""
    if not isinstance(dtype, str) or not _NUMPY_DTYPE.fullmatch(dtype) or not isinstance(shape, list):
        raise ValueError("malformed numpy value")
    try:
        import numpy
    except ImportError:
        raise ValueError("a numpy value came back, and numpy is not installed here to compare it") from None
    dims = tuple(int(n, 16) for n in shape)
    raw = bytes.fromhex(data)
    if len(dims) > 32 or any(n < 0 for n in dims) or math.prod(dims) * numpy.dtype(dtype).itemsize != len(raw):
        raise ValueError("malformed numpy value")
    array = numpy.frombuffer(raw, numpy.dtype(dtype)).reshape(dims)
    return array[()] if scalar is True else array


_KNOWN: dict[str, Callable[..., Any]] = {
    "o": Opaque,
    "Q": _fraction,
    "D": _decimal,
    "T": _datetime,
    "r": _range,
    "A": _numpy,
}


def check_hashed_size(n: int) -> None:
    """Python's int hashes are not randomised: a program could send a set of colliding ints that takes the trainer
    quadratic time to build. Hashed containers from the sandbox are capped (far above what tests compare)."""
    if n > MAX_HASHED_ITEMS:
        raise ValueError(f"{n} items in a set or dict is more than the {MAX_HASHED_ITEMS} that are compared")


def same(actual: Any, expected: Any, atol: float | None = None, rtol: float | None = None, json: bool = False) -> bool:
    """Equality as the field's graders use it, on decoded (trusted) values: Python's `==`, except that floats (at
    any depth) may differ by `atol + rtol * |expected|` where a tolerance is given, and, with `json` (the expected
    value came from JSON, which has no tuples), a tuple equals a list of equal items."""
    tolerant = atol is not None or rtol is not None
    if not tolerant and not json:
        return bool(actual == expected)
    if isinstance(expected, float) or (tolerant and isinstance(actual, float)):
        if isinstance(actual, bool) or not isinstance(actual, (int, float)) or isinstance(expected, bool):
            return False
        if not isinstance(expected, (int, float)):
            return False
        if actual == expected:
            return True
        if not tolerant or not (math.isfinite(actual) and math.isfinite(expected)):
            return False
        return abs(actual - expected) <= (atol or 0.0) + (rtol or 0.0) * abs(expected)
    sequences = (list, tuple) if json else ()
    if isinstance(expected, (list, tuple)) and (
        type(actual) is type(expected) or (isinstance(actual, sequences) and isinstance(expected, sequences))
    ):
        return len(actual) == len(expected) and all(
            same(a, e, atol, rtol, json) for a, e in zip(actual, expected, strict=True)
        )
    if isinstance(expected, dict) and isinstance(actual, dict):
        keys = actual.keys() == expected.keys()
        return keys and all(same(actual[k], expected[k], atol, rtol, json) for k in expected)
    return bool(actual == expected)


def short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."
