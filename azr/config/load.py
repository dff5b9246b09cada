"""Loading a recipe: read YAML/JSON (or the legacy `azr:` schema), apply `--set a.b=c`, validate, resolve paths.

Relative paths written in a recipe are relative to the recipe's folder; those from `--set` and defaults, to the
current directory. Nothing here imports torch/transformers/trl: `grpo:` and `sft.args` pass through, checked against
TRL's config classes by `azr.config.passthrough` when `azr.training` builds them (importing TRL takes seconds).
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import os
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from azr.config.adapter import check_adapter
from azr.config.heldout import check_heldout
from azr.config.legacy import check_replaced, normalise_legacy
from azr.config.schema import build, load_raw, parse_pairs, set_dotted
from azr.config.sections import AzrConfig
from azr.config.tools import TOOL_NAMES
from azr.config.vllm import check_vllm_config
from azr.data import SPLITS
from azr.errors import ConfigError, did_you_mean
from azr.logs import atomic_write_text

# Trainer fields that azr sets from its own fields, so each has one source of truth.
MANAGED_TRAINER_FIELDS = {
    "output_dir": "output_dir",
    "seed": "seed",
    "gradient_checkpointing": "model.gradient_checkpointing",
    "activation_checkpointing": "model.gradient_checkpointing",  # transformers 5's name for the same switch
}
# Fields that may hold a local path, each with the test of whether its value is one (vs a hub id, a split name).
PATH_FIELDS: dict[str, typing.Callable[[str, Path], bool]] = {
    "output_dir": lambda value, base: True,
    "model.name_or_path": lambda value, base: value.startswith((".", "/", "~")) or (base / value).exists(),
    "data.train": lambda value, base: value not in SPLITS,
    "data.eval": lambda value, base: value not in SPLITS,
    "eval.tasks": lambda value, base: value not in SPLITS,
    "vllm.python": lambda value, base: "/" in value,
    "sft.rollouts": lambda value, base: True,
    "gen.adapter": lambda value, base: True,
    "gen.tasks": lambda value, base: value not in SPLITS,
}
KEEP_LINKS = {"vllm.python"}


def load_config(path: str | Path | None = None, overrides: Sequence[str] = ()) -> AzrConfig:
    """Read FILE (YAML or JSON), apply `--set` overrides, validate, resolve paths; raise ConfigError on bad input.

    Relative paths written in the file are relative to the file; those from `--set` and defaults, to the CWD.
    """
    raw: dict[str, Any] = {}
    file_base = Path.cwd()
    if path is not None:
        raw = normalise_legacy(load_raw(Path(path)), str(path))
        file_base = Path(path).resolve().parent
    from_cli = set()
    defaults = dataclasses.asdict(AzrConfig())
    for dotted, value in parse_pairs(overrides, "--set", "KEY=VALUE with a dotted KEY, e.g. model.adapter.r=8", True):
        set_dotted(raw, dotted, value, defaults)
        from_cli.add(dotted)
    check_replaced(raw)
    cfg = build(AzrConfig, raw, "")
    _check_cross_fields(cfg)
    _resolve_paths(cfg, file_base, from_cli | _unset_paths(raw))
    return cfg


def _resolve_paths(cfg: AzrConfig, file_base: Path, from_cli: set[str]) -> None:
    """Make relative paths absolute: against the config file's folder if written there, else against the CWD."""
    for dotted, is_path in PATH_FIELDS.items():
        *parents, leaf = dotted.split(".")
        owner = functools.reduce(getattr, parents, cfg)
        value = getattr(owner, leaf)
        base = Path.cwd() if dotted in from_cli else file_base
        if value and is_path(value, base):
            path = base / Path(value).expanduser()
            # An interpreter keeps its link: a venv's python resolved to its target leaves the venv.
            setattr(owner, leaf, os.path.abspath(path) if dotted in KEEP_LINKS else str(path.resolve()))


def _unset_paths(raw: dict[str, Any]) -> set[str]:
    """Path fields the file does not set: their defaults are relative to the CWD, not to the config file."""

    def given(dotted: str) -> bool:
        node: Any = raw
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True

    return {key for key in PATH_FIELDS if not given(key)}


def _check_cross_fields(cfg: AzrConfig) -> None:
    if not cfg.model.name_or_path and cfg.gen.policy != "endpoint":
        raise ConfigError("model.name_or_path: required (a hub id or a local model directory)")
    check_adapter(cfg.model.adapter, cfg.model.quantization)
    for name in ("self_play", "teacher"):
        endpoint = getattr(cfg, name)
        for required in ("base_url", "model"):
            if endpoint.enabled and not getattr(endpoint, required):
                raise ConfigError(f"{name}.{required}: required when {name}.enabled is true")
    if cfg.teacher_assist.enabled and not cfg.teacher.enabled:
        raise ConfigError("teacher_assist.enabled: needs teacher.enabled: true")
    needs_opponent = {"teacher_assist.enabled": cfg.teacher_assist.enabled, "curriculum.replay": cfg.curriculum.replay}
    for name in (n for n, on in needs_opponent.items() if on and not cfg.self_play.enabled):
        raise ConfigError(f"{name}: needs self_play.enabled: true (it works from the self-play scoreboard)")
    if cfg.sft.near_misses and not cfg.sft.enabled:
        raise ConfigError("sft.near_misses: needs sft.enabled: true (they are part of the warm start)")
    _check_tools(cfg)
    if not cfg.rewards:
        raise ConfigError("rewards: at least one reward is required")
    for i, spec in enumerate(cfg.rewards):
        if not spec.name:
            raise ConfigError(f"rewards[{i}].name: required")
    for section, values in (("grpo", cfg.grpo), ("sft.args", cfg.sft.args)):
        for key, owner in MANAGED_TRAINER_FIELDS.items():
            if key in values:
                raise ConfigError(f"{section}.{key}: azr sets it from '{owner}'; set that instead")
    check_vllm_config(cfg)
    check_heldout(cfg)


def _check_tools(cfg: AzrConfig) -> None:
    for i, name in enumerate(cfg.tools.names):
        if name not in TOOL_NAMES:
            raise ConfigError(f"tools.names[{i}]: unknown tool {name!r}{did_you_mean(name, TOOL_NAMES)}")
    if len(set(cfg.tools.names)) != len(cfg.tools.names):
        raise ConfigError("tools.names: a tool is listed twice")
    if cfg.tools.enabled and not cfg.tools.names:
        raise ConfigError("tools.names: empty, but tools.enabled is true")
    if cfg.sft.rollouts and cfg.sft.near_misses:
        raise ConfigError(
            "sft.near_misses: near misses vary reference answers; sft.rollouts trains on episodes instead"
        )
    if cfg.gen.policy == "endpoint" and cfg.gen.endpoint.api != "chat":
        raise ConfigError("gen.endpoint.api: tool calls need 'chat' (Chat Completions with native tools)")
    for required in ("base_url", "model"):
        if cfg.gen.policy == "endpoint" and not getattr(cfg.gen.endpoint, required):
            raise ConfigError(f"gen.endpoint.{required}: required when gen.policy is 'endpoint'")
    for i, port in enumerate(cfg.tools.web.allow_ports):
        if not 0 < port < 65536:
            raise ConfigError(f"tools.web.allow_ports[{i}]: {port} is not a port number")
    for i, net in enumerate(cfg.tools.web.allow_networks):
        try:
            ipaddress.ip_network(net, strict=False)
        except ValueError:
            raise ConfigError(f"tools.web.allow_networks[{i}]: {net!r} is not a network (e.g. 127.0.0.1/32)") from None
    if cfg.tools.web.search_backend == "searxng" and "web_search" in cfg.tools.names and not cfg.tools.web.searxng_url:
        raise ConfigError("tools.web.searxng_url: required when tools.web.search_backend is 'searxng'")


def dump_yaml(cfg: AzrConfig) -> str:
    """The resolved config as YAML, in schema order (what `save_config` writes and `azr config show` prints)."""
    import yaml  # here, not at module level: see schema._loader

    return yaml.safe_dump(dataclasses.asdict(cfg), sort_keys=False, allow_unicode=True)


def save_config(cfg: AzrConfig, path: str | Path) -> Path:
    """Write the resolved config as YAML, atomically, so a run's outputs always say what produced them."""
    return atomic_write_text(Path(path), dump_yaml(cfg))
