"""Reading a recipe's text: YAML 1.2 (core schema) and JSON, duplicate keys refused, and limits on size, nesting
and alias expansion met before anything is built (each refusal names its limit and the environment variable that
raises it: docs/limits.md). Knows nothing of azr's sections: `azr.config.schema` types what comes back.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

from azr.errors import ConfigError
from azr.inputs import bounded_int, env_limit, load_json, read_bounded_text

# Recipes are a few kilobytes and a handful of levels deep; the limits leave room for large `extra_body` schemas.
MAX_BYTES = ("AZR_MAX_RECIPE_BYTES", 1 << 20)
MAX_DEPTH = ("AZR_MAX_RECIPE_DEPTH", 64)
MAX_VALUES = ("AZR_MAX_RECIPE_VALUES", 100_000)


class YamlSyntaxError(ValueError):
    """A YAML text that does not parse or exceeds a limit: the `problem` and the 1-based `line`, where known."""

    def __init__(self, problem: str | None, line: int | None, summary: str):
        super().__init__(summary)
        self.problem, self.line = problem, line


def limit(setting: tuple[str, int]) -> int:
    return env_limit(*setting)


@functools.cache
def _loader() -> type:
    """YAML 1.2 core schema: `1e-5` is a float; `010` is ten; `no`, `1:30` and `2024-01-01` stay strings (PyYAML's
    YAML 1.1 rules read them as False, 90 and a date). Duplicate keys are errors, not a silent last-one-wins. Built
    on first use: PyYAML's import is most of the config's, and commands that read no YAML never pay for it. The C
    parser (libyaml) reads a large file fifty times faster; the resolvers and constructors stay PyYAML's Python."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[misc,valid-type]
        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep)

    def construct_int(loader: yaml.SafeLoader, node: yaml.Node) -> int:
        text = loader.construct_scalar(node)
        try:
            if text.startswith(("0o", "0x")):
                return bounded_int(text[2:], 8 if text[1] == "o" else 16)
            return bounded_int(text)
        except ValueError as exc:  # past the digit limit: Python's own int-str limit would raise it as a traceback
            raise yaml.constructor.ConstructorError(None, None, str(exc), node.start_mark) from None

    replaced = ("bool", "int", "float", "timestamp")  # PyYAML's YAML 1.1 resolvers for these go
    Loader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag.rsplit(":", 1)[-1] not in replaced]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    for tag, pattern in (
        ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$"),
        ("int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
        (
            "float",
            r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        ),
    ):
        Loader.add_implicit_resolver(f"tag:yaml.org,2002:{tag}", re.compile(pattern), list("-+0123456789.tTfF"))
    Loader.add_constructor("tag:yaml.org,2002:int", construct_int)
    return Loader


def _check_events(text: str) -> None:
    """One pass over the parser's events (libyaml keeps its own stack: no recursion, whatever the depth) before
    anything is composed: nesting, aliases that refer to themselves, and the number of values once every alias is
    expanded, each counted without expanding anything. The composer and builder that follow recurse per level, and
    the C one crashes the process on a deep enough input, so this pass is what keeps them safe."""
    import yaml

    max_depth, max_values = limit(MAX_DEPTH), limit(MAX_VALUES)
    sizes: dict[str, tuple[int, int]] = {}  # anchor -> (values, depth) of what it names, aliases expanded
    stack: list[list[Any]] = [[None, 0, 0]]  # per open collection: anchor, values, depth below
    loader = _loader()(text)
    try:
        while loader.check_event():
            event = loader.get_event()
            line = event.start_mark.line + 1 if event.start_mark else None
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                if len(stack) > max_depth:
                    _refuse(f"nested more than {max_depth} levels deep", line, MAX_DEPTH)
                stack.append([event.anchor, 1, 0])
                continue
            if isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                anchor, values, depth = stack.pop()
                size = (values, depth + 1)
            elif isinstance(event, yaml.AliasEvent):
                if any(frame[0] == event.anchor for frame in stack):
                    raise YamlSyntaxError(f"alias *{event.anchor} refers to itself", line, "self-referential alias")
                anchor, size = None, sizes.get(event.anchor, (1, 0))
            elif isinstance(event, yaml.ScalarEvent):
                anchor, size = event.anchor, (1, 0)
            else:
                continue
            if anchor:
                sizes[anchor] = size
            parent = stack[-1]
            parent[1] += size[0]
            parent[2] = max(parent[2], size[1])
            if parent[2] + len(stack) - 1 > max_depth:
                _refuse(f"nested more than {max_depth} levels deep once aliases are expanded", line, MAX_DEPTH)
            if sum(frame[1] for frame in stack) > max_values:
                _refuse(f"more than {max_values:,} values once aliases are expanded", line, MAX_VALUES)
    finally:
        loader.dispose()


def _refuse(problem: str, line: int | None, setting: tuple[str, int]) -> None:
    full = f"{problem} (the limit; {setting[0]}=N raises it)"
    raise YamlSyntaxError(full, line, full)


def yaml_load(text: str) -> Any:
    """`text` parsed by the core-schema loader (a SafeLoader: no arbitrary objects), within the limits above;
    YamlSyntaxError if it does not parse or exceeds one."""
    import yaml

    try:
        _check_events(text)
        return yaml.load(text, Loader=_loader())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        raise YamlSyntaxError(getattr(exc, "problem", None), line, str(exc).splitlines()[0]) from None


def json_load(text: str) -> Any:
    """`text` as JSON, read as every text from outside is (`azr.inputs.load_json`): duplicate keys are errors (as in
    YAML), and so is nesting past the limit. json.JSONDecodeError for bad syntax; ValueError naming the problem
    otherwise."""

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise ValueError(f"duplicate key {key!r}")
            out[key] = value
        return out

    return load_json(text, MAX_DEPTH, object_pairs_hook=no_duplicates)


def load_raw(path: Path) -> dict[str, Any]:
    """Parse a YAML or JSON file into a dict; errors name the file (and line, where the parser knows it)."""
    max_bytes = limit(MAX_BYTES)
    try:
        text = read_bounded_text(path, max_bytes, str(path), f"the limit for a recipe; {MAX_BYTES[0]}=N raises it")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror or exc}") from None
    except ValueError as exc:  # a UserError from the bounded read
        raise ConfigError(str(exc)) from None
    try:
        data = json_load(text) if path.suffix == ".json" else yaml_load(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    except YamlSyntaxError as exc:
        where = f"{path}:{exc.line}" if exc.line else str(path)
        raise ConfigError(f"{where}: invalid YAML: {exc.problem or exc}") from None
    except ValueError as exc:
        raise ConfigError(f"{path}: invalid JSON: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of sections at the top level, got {type(data).__name__}")
    return data
