"""Pass-through sections (`grpo:`, `sft.args`): checked against the library dataclass they are handed to.

Key names must be the class's init fields ("did you mean"); a value whose field takes plain data (bool, int, float,
str, an enum by name, a mapping, a list) must be of that kind, numeric strings become numbers, and a field with
declared `choices` takes one of them. What the library's own `__post_init__` checks is left to it (azr builds the
class and names the culprit; see `azr.training.trl.trainer_args`). Imports TRL only when asked to check against it.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import types
import typing
from typing import Any

from azr.errors import ConfigError, did_you_mean, show


def validate_grpo(grpo: dict[str, Any], section: str = "grpo", kind: str = "GRPOConfig") -> None:
    """Check `grpo:` keys against trl.GRPOConfig (or `sft.args` against SFTConfig); turn numeric strings ('1e-5')
    into numbers for numeric fields."""
    if grpo:
        import trl  # lazy: pulls in torch and transformers

        check_passthrough(grpo, getattr(trl, kind), section, f"trl.{kind}")


def check_passthrough(values: dict[str, Any], cls: type, section: str, label: str) -> None:
    """Check a pass-through mapping against dataclass `cls` as the module docstring says; one-line ConfigErrors
    naming `section.key`. `values` is changed in place (numeric strings become numbers)."""
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = _library_hints(cls)
    for key, value in values.items():
        if key not in fields:
            raise ConfigError(f"{section}.{key}: not a {label} field{did_you_mean(key, fields)}")
        if key in hints:
            values[key] = _scalar(value, hints[key], f"{section}.{key}")
        choices = fields[key].metadata.get("choices")
        if choices is not None and values[key] is not None and values[key] not in list(choices):
            raise ConfigError(f"{section}.{key}: expected one of {', '.join(map(str, choices))}; got {show(value)}")


@functools.cache
def _library_hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # an annotation the library cannot resolve at run time: names are still checked
        return {}


def _scalar(value: object, hint: object, where: str) -> Any:
    """`value` checked against a library field's type when that type is made of plain data (bool, int, float, str,
    an enum by name, a mapping, a list); fields of other types (library objects) are left to the library."""
    kinds = _plain_kinds(hint)
    if kinds is None:
        return value
    nullable = type(None) in kinds
    number = float if float in kinds else int if int in kinds and bool not in kinds else None
    if number and isinstance(value, str) and str not in kinds:
        try:
            value = number(value)
        except ValueError:
            raise ConfigError(f"{where}: expected a number, got {show(value)}") from None
    if isinstance(value, float) and value != value:  # NaN: no setting means it, and it trains nothing
        raise ConfigError(f"{where}: expected a number, got NaN")
    if isinstance(value, float) and value in (math.inf, -math.inf):  # a rate or a cap of infinity trains nothing sane
        raise ConfigError(f"{where}: expected a finite number, got {value} (leave a bound out, or null, for none)")
    if isinstance(value, bool):
        ok = bool in kinds
    elif isinstance(value, int):
        ok = bool(kinds & {int, float})
    elif isinstance(value, float):
        if float not in kinds and int in kinds and value.is_integer():
            return int(value)
        ok = float in kinds
    else:
        ok = (value is None and nullable) or any(isinstance(value, k) for k in kinds & {str, dict, list})
    if not ok:
        names = " or ".join(name for k, name in _PLAIN.items() if k in kinds)
        raise ConfigError(f"{where}: expected {names}{' (or null)' if nullable else ''}, got {show(value)}")
    return value


_PLAIN = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", dict: "a mapping", list: "a list"}


def _plain_kinds(hint: object) -> set[type] | None:
    """The plain runtime classes `hint` allows (None among them as NoneType), or None when it allows others."""
    kinds: set[type] = set()
    for kind in typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,):
        origin = typing.get_origin(kind) or kind
        if origin is typing.Literal:
            kinds |= {type(arg) for arg in typing.get_args(kind)}
        elif isinstance(origin, type) and issubclass(origin, enum.Enum):
            kinds.add(str)  # an enum field takes its member's name
        elif origin in (bool, int, float, str, dict, list, type(None)):
            kinds.add(origin)
        else:
            return None
    return kinds or None
