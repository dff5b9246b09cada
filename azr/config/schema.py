"""Typed dataclasses from plain dicts: coercion, bounds, unknown-key errors with "did you mean", `--set` parsing.

Generic machinery behind `azr.config`; it knows no azr section. Every error is a one-line `ConfigError` that names
the dotted field. Values given on the command line arrive as `Raw` strings and are parsed for the target type, so
`--set model.revision=123` stays a string while `--set grpo.learning_rate=1e-5` becomes a float.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import math
import re
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from azr.config.yaml_io import YamlSyntaxError, yaml_load
from azr.errors import ConfigError, did_you_mean, show
from azr.inputs import MAX_INT_DIGITS

MISSING = dataclasses.MISSING


class Raw(str):
    """A value typed on the command line, parsed only once its target type is known."""


def field(
    default: object = MISSING,
    help: str = "",
    *,
    factory: Callable[[], object] | None = None,
    refused: dict[str, str] | None = None,
    **bounds: float,
) -> Any:
    """A dataclass field with its help text (its only documentation), optional numeric bounds ge/gt/le, and
    `refused`: values a user may plausibly write that are not accepted, each with the reason given instead of the
    generic "expected one of"."""
    meta = {"help": help, **bounds, **({"refused": refused} if refused else {})}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def parse_pairs(items: Sequence[str], flag: str, example: str, dotted: bool = False) -> list[tuple[str, Raw]]:
    """Split `KEY=VALUE` command-line items; the value stays `Raw` until its target type is known."""
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key or (dotted and any(not part for part in key.split("."))):
            raise ConfigError(f"{flag} {item!r}: expected {example}")
        out.append((key, Raw(value)))
    return out


def get_dotted(raw: dict[str, Any], dotted: str, default: object = None) -> Any:
    """The value the raw recipe `raw` gives at `dotted` (`a.b.c`), or `default` where it gives none."""
    node: Any = raw
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


_UNSET = object()


def is_set_dotted(raw: dict[str, Any], dotted: str) -> bool:
    """Whether the raw recipe `raw` gives a value at `dotted` (`a.b.c`), whatever the value."""
    return get_dotted(raw, dotted, _UNSET) is not _UNSET


def set_dotted(raw: dict[str, Any], dotted: str, value: object, defaults: dict[str, Any]) -> None:
    """raw[a][b]... = value. A list the file leaves out starts as its value in `defaults`, so that
    `--set rewards.1.weight=0.5` edits the default second reward."""
    node: Any = raw
    default: Any = defaults
    parts = dotted.split(".")
    for depth, part in enumerate(parts):
        where = ".".join(parts[: depth + 1])
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ConfigError(f"--set {where}: expected a list index below {len(node)}")
            part = int(part)
        elif not isinstance(node, dict):
            raise ConfigError(f"--set {dotted}: '{'.'.join(parts[:depth])}' is a value, not a section")
        if isinstance(default, dict):
            default = default.get(part)
        else:
            in_list = isinstance(default, list) and isinstance(part, int) and part < len(default)
            default = default[part] if in_list else None
        if depth == len(parts) - 1:
            node[part] = value
        else:
            if isinstance(node, dict) and node.get(part) is None:
                node[part] = copy.deepcopy(default) if isinstance(default, list) else {}
            node = node[part]


def build(cls: type, data: object, where: str) -> Any:
    """Instantiate dataclass `cls` from `data`, validating every field; `where` is the dotted prefix for errors."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where or 'config'}: expected a mapping, got {show(data)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in fields:
            raise ConfigError(f"{_join(where, str(key))}: {_unknown_reason(str(key), _meant_for(data[key], hints))}")
    kwargs = {}
    for name, value in data.items():
        dotted = _join(where, name)
        refused = fields[name].metadata.get("refused", {})
        if isinstance(value, str) and value in refused:
            raise ConfigError(f"{dotted}: {value}: {refused[value]}")
        kwargs[name] = coerce(value, hints[name], dotted)
        _check_bounds(kwargs[name], fields[name].metadata, dotted)
    return cls(**kwargs)


def _meant_for(value: object, hints: dict[str, Any]) -> list[str]:
    """The fields an unknown key's value could be meant for: a mapping goes to a section or a mapping field (so
    `modle: {dtype: auto}` suggests `model`, not the scalar `mode`)."""
    if isinstance(value, dict):
        sections = [n for n, h in hints.items() if dataclasses.is_dataclass(h) or typing.get_origin(h) is dict]
        return sections or list(hints)
    return list(hints)


def _unknown_reason(key: str, fields: Iterable[str]) -> str:
    if key in ("api_key", "key", "token", "secret"):
        return "unknown key; never put secrets in a config: name the environment variable with 'api_key_env'"
    return f"unknown key{did_you_mean(key, fields)}"


def coerce(value: object, hint: object, where: str) -> Any:
    """Return `value` converted to `hint`, or raise ConfigError naming `where`."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _coerce_union(value, args, where)
    if isinstance(value, Raw):
        if hint is str:
            return str(value)
        value = _parse_raw(value, where)
    if dataclasses.is_dataclass(hint):
        return build(hint, value, where)
    if origin is typing.Literal:
        if value in args:
            return value
        near = did_you_mean(value, [str(a) for a in args]) if isinstance(value, str) else ""
        raise ConfigError(f"{where}: expected one of {', '.join(map(str, args))}; got {show(value)}{near}")
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {show(value)}")
        return [coerce(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {show(value)}")
        return {str(k): coerce(v, args[1], f"{where}.{k}") for k, v in value.items()}
    if hint is Any:
        return _resolve_raw(value, where)
    return _coerce_scalar(value, hint, where)


def _resolve_raw(value: object, where: str) -> Any:
    """Free-form data (`grpo:`, `extra_body`) with the command-line strings inside it parsed: `--set grpo.a.b=1`
    makes `{a: {b: 1}}`, not a mapping holding an unparsed `Raw`."""
    if isinstance(value, Raw):
        return _resolve_raw(_parse_raw(value, where), where)
    if isinstance(value, dict):
        return {k: _resolve_raw(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve_raw(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _coerce_union(value: object, args: tuple, where: str) -> Any:
    is_null = value is None or (isinstance(value, Raw) and value.lower() in ("null", "none", "~"))
    if is_null and type(None) in args:
        return None
    options = [a for a in args if a is not type(None)]
    if isinstance(value, Raw):  # '[a, b]' for `str | list[str]` is a list; '123' for `str | None` stays a string
        parsed = _parse_raw(value, where)
        if not isinstance(parsed, str):
            try:
                return _coerce_union(parsed, args, where)
            except ConfigError:
                if str not in options or value.lstrip().startswith(("[", "{")):
                    raise
        value = str(value)
    errors = {}
    for option in options:
        try:
            return coerce(value, option, where)
        except ConfigError as exc:
            errors[typing.get_origin(option)] = exc
    if len(errors) == 1:
        raise next(iter(errors.values()))
    shaped = {list: list, dict: dict}.get(type(value))
    if shaped in errors:  # a list given for `str | list[str]`: the error inside the list is the useful one
        raise errors[shaped]
    names = " or ".join(_type_name(a) for a in options)
    nullable = " (or null)" if type(None) in args else ""
    raise ConfigError(f"{where}: expected {names}{nullable}, got {show(value)}")


def _coerce_scalar(value: object, hint: type, where: str) -> Any:
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.lower() in ("true", "yes", "on", "false", "no", "off"):
            return value.lower() in ("true", "yes", "on")
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and value.strip().lstrip("+-").isdecimal():
            digits = len(value.strip().lstrip("+-"))
            if digits > MAX_INT_DIGITS:
                raise ConfigError(f"{where}: an integer of {digits:,} digits (the limit is {MAX_INT_DIGITS:,})")
            return int(value)
    elif hint is float:
        number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                number = float(value)
        if number is not None and math.isfinite(number):
            return float(number)
        if number is not None:
            raise ConfigError(f"{where}: expected a finite number, got {show(value)}")
    elif hint is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float, bool)):
            raise ConfigError(f"{where}: expected a string, got {show(value)} (quote it in the recipe)")
    else:
        raise TypeError(f"{where}: unsupported schema type {hint!r}")
    raise ConfigError(f"{where}: expected {_type_name(hint)}, got {show(value)}")


def _parse_raw(value: Raw, where: str) -> Any:
    text = str(value)
    try:
        return yaml_load(text) if text.strip() else ""
    except YamlSyntaxError as exc:
        if re.fullmatch(r"\s*[-+]?[0-9]+\s*", text):  # an integer the loader refused: too many digits
            raise ConfigError(f"{where}: {exc.problem}") from None
        if text.lstrip().startswith(("[", "{")):  # meant as a list or mapping: say so rather than keep a string
            raise ConfigError(f"{where}: cannot parse {show(text)}: {exc.problem or 'bad syntax'}") from None
        return text


def _check_bounds(value: object, meta: typing.Mapping[str, Any], where: str) -> None:
    """A number within the field's bounds; a list of numbers, each one within them."""
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_bounds(item, meta, f"{where}[{i}]")
        return
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    checks = (("ge", lambda b: value >= b, ">="), ("gt", lambda b: value > b, ">"), ("le", lambda b: value <= b, "<="))
    for key, ok, sign in checks:
        if key in meta and not ok(meta[key]):
            raise ConfigError(f"{where}: must be {sign} {meta[key]:,}, got {show(value)}")


def iter_fields(cls: type, where: str) -> Iterator[tuple[str, str, str, str]]:
    """Yield (dotted name, type, default, help) for every leaf field of `cls`, depth first."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        dotted = _join(where, f.name)
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            yield from iter_fields(hint, dotted)
            continue
        if f.default is not MISSING:
            default = f.default
        else:
            default = f.default_factory()  # type: ignore[misc]
            if isinstance(default, list) and default and dataclasses.is_dataclass(default[0]):
                default = [dataclasses.asdict(d) for d in default]
        yield dotted, _type_name(hint) + _bounds_text(f.metadata), json.dumps(default), f.metadata.get("help", "")


def _bounds_text(meta: typing.Mapping[str, Any]) -> str:
    """' (> 0, <= 1,024)': a field's bounds as its type's note in the fields table."""
    signs = {"ge": ">=", "gt": ">", "le": "<="}
    parts = [f"{sign} {meta[key]:,}" for key, sign in signs.items() if key in meta]
    return f" ({', '.join(parts)})" if parts else ""


def fields_markdown(cls: type) -> str:
    """Every leaf field of `cls` as a Markdown table: `azr config fields` and docs/config.md's table."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    rows = ["| field | type | default | what it is for |", "|---|---|---|---|"]
    for name, kind, default, help_text in iter_fields(cls, ""):
        rows.append(f"| `{name}` | {cell(kind)} | `{cell(default)}` | {cell(help_text)} |")
    return "\n".join(rows)


def _type_name(hint: object) -> str:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Literal:
        return " | ".join(map(str, args))
    if origin in (typing.Union, types.UnionType):
        return " | ".join("null" if a is type(None) else _type_name(a) for a in args)
    if origin is list:
        return f"a list of {_type_name(args[0]).split(' ', 1)[-1]}s"
    if origin is dict:
        return "mapping"
    if dataclasses.is_dataclass(hint):
        return hint.__name__
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", Any: "any"}
    return names.get(hint, getattr(hint, "__name__", str(hint)))


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name
