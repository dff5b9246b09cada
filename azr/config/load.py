"""Loading a recipe: read YAML/JSON (or the legacy `azr:` schema), apply `--set a.b=c`, validate, resolve paths.

Relative paths written in a recipe are relative to the recipe's folder; those from `--set` and defaults, to the
current directory. `grpo:` and `sft.args` pass through (azr's own rules on them apply here); TRL's classes check
them in `azr.training`'s preflight, the first thing `azr train` does.
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import logging
import os
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from azr.config.absolute_zero import SEED_KINDS
from azr.config.adapter import check_adapter
from azr.config.environments import environment_of
from azr.config.heldout import check_heldout
from azr.config.legacy import check_replaced, normalise_legacy
from azr.config.schema import build, is_set_dotted, parse_pairs, set_dotted
from azr.config.sections import AzrConfig
from azr.config.selfplay import check_base_url
from azr.config.tools import TOOL_NAMES
from azr.config.vllm import check_vllm_config
from azr.config.yaml_io import load_raw
from azr.data import SPLITS
from azr.errors import ConfigError, did_you_mean
from azr.logs import atomic_write_text

log = logging.getLogger(__name__)

# Trainer fields that azr sets from its own fields, so each has one source of truth.
MANAGED_TRAINER_FIELDS = {
    "output_dir": "output_dir",
    "seed": "seed",
    "gradient_checkpointing": "model.gradient_checkpointing",
    "activation_checkpointing": "model.gradient_checkpointing",  # transformers 5's name for the same switch
    # The rubric alone weighs the rewards (training, the pass rate, held-out evaluation, azr gen): one source.
    "reward_weights": "rewards[i].weight",
}
# Fields that may hold a local path, each with the test of whether its value is one (vs a hub id, a split name).
PATH_FIELDS: dict[str, typing.Callable[[str, Path], bool]] = {
    "output_dir": lambda value, base: True,
    "model.name_or_path": lambda value, base: value.startswith((".", "/", "~")) or (base / value).exists(),
    "data.train": lambda value, base: value not in SPLITS,
    "data.eval": lambda value, base: value not in SPLITS,
    "data.audit": lambda value, base: True,
    "data.hardened": lambda value, base: True,
    "eval.tasks": lambda value, base: value not in SPLITS,
    "vllm.python": lambda value, base: "/" in value,
    "sft.rollouts": lambda value, base: True,
    "gen.adapter": lambda value, base: True,
    "gen.tasks": lambda value, base: value not in SPLITS,
    "absolute_zero.seed": lambda value, base: value not in SEED_KINDS,
}
KEEP_LINKS = {"vllm.python"}
# Sections that `enabled: false` switches off: no rule reads their other settings (a recipe may keep them, and
# `--set sft.enabled=false` alone turns the warm start off), and the debug log names those that are set. Listed
# beside each, the fields that are switches of their own and stay in force. `tools.enabled` only switches GRPO
# with tools (azr gen always uses tools:), and gen.endpoint is chosen by gen.policy: neither is a section switch.
SWITCHED_SECTIONS: dict[str, tuple[str, ...]] = {
    "sft": (),
    "self_play": (),
    "teacher": (),
    "teacher_assist": (),
    "curriculum": ("replay", "replay_rate"),
}
NOT_SECTION_SWITCHES = {"tools", "gen.endpoint"}
log = logging.getLogger(__name__)


def load_config(path: str | Path | None = None, overrides: Sequence[str] = (), needs_model: bool = True) -> AzrConfig:
    """Read FILE (YAML or JSON), apply `--set` overrides, validate, resolve paths; raise ConfigError on bad input.

    Relative paths written in the file are relative to the file; those from `--set` and defaults, to the CWD.
    `needs_model=False` is for commands that use no model (`azr tool call`): a recipe may then name none.
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
    _note_ignored(cfg)
    _check_cross_fields(cfg, needs_model)
    _resolve_paths(cfg, file_base, from_cli | _unset_paths(raw))
    return cfg


def _resolve_paths(cfg: AzrConfig, file_base: Path, from_cli: set[str]) -> None:
    """Make relative paths absolute: against the config file's folder if written there, else against the CWD."""
    for dotted, is_path in PATH_FIELDS.items():
        *parents, leaf = dotted.split(".")
        owner = functools.reduce(getattr, parents, cfg)
        value = getattr(owner, leaf)
        base = Path.cwd() if dotted in from_cli else file_base
        resolved = [_resolved(v, base, dotted in KEEP_LINKS) if v and is_path(v, base) else v for v in _listed(value)]
        setattr(owner, leaf, resolved if isinstance(value, list) else resolved[0])


def _listed(value: object) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _resolved(value: str, base: Path, keep_link: bool) -> str:
    path = base / Path(value).expanduser()
    # An interpreter keeps its link: a venv's python resolved to its target leaves the venv.
    return os.path.abspath(path) if keep_link else str(path.resolve())


def _unset_paths(raw: dict[str, Any]) -> set[str]:
    """Path fields the file does not set: their defaults are relative to the CWD, not to the config file."""
    return {key for key in PATH_FIELDS if not is_set_dotted(raw, key)}


def ignored_settings(cfg: AzrConfig) -> dict[str, list[str]]:
    """Per switched-off section, the settings given that differ from the defaults: none of them is used."""
    ignored = {}
    for name, own_switches in SWITCHED_SECTIONS.items():
        section = getattr(cfg, name)
        if section.enabled:
            continue
        default = type(section)()
        changed = [
            f.name
            for f in dataclasses.fields(section)
            if f.name not in ("enabled", *own_switches) and getattr(section, f.name) != getattr(default, f.name)
        ]
        if changed:
            ignored[name] = changed
    return ignored


def _note_ignored(cfg: AzrConfig) -> None:
    for name, fields in ignored_settings(cfg).items():
        log.debug("%s.enabled is false: %s ignored", name, ", ".join(f"{name}.{f}" for f in fields))


def _check_cross_fields(cfg: AzrConfig, needs_model: bool = True) -> None:
    if needs_model and not cfg.model.name_or_path and cfg.gen.policy != "endpoint":
        raise ConfigError("model.name_or_path: required (a hub id or a local model directory)")
    check_adapter(cfg.model.adapter, cfg.model.quantization)
    check_full_weights(cfg)
    for name in ("self_play", "teacher"):
        endpoint = getattr(cfg, name)
        for required in ("base_url", "model"):
            if endpoint.enabled and not getattr(endpoint, required):
                raise ConfigError(f"{name}.{required}: required when {name}.enabled is true")
    for name, endpoint in (("self_play", cfg.self_play), ("teacher", cfg.teacher), ("gen.endpoint", cfg.gen.endpoint)):
        if endpoint.base_url:
            check_base_url(endpoint.base_url, f"{name}.base_url")
    if cfg.teacher_assist.enabled and not cfg.teacher.enabled:
        raise ConfigError("teacher_assist.enabled: needs teacher.enabled: true")
    needs_opponent = {"teacher_assist.enabled": cfg.teacher_assist.enabled, "curriculum.replay": cfg.curriculum.replay}
    for name in (n for n, on in needs_opponent.items() if on and not cfg.self_play.enabled):
        raise ConfigError(f"{name}: needs self_play.enabled: true (it works from the self-play scoreboard)")
    _check_tools(cfg)
    if not cfg.rewards:
        raise ConfigError("rewards: at least one reward is required")
    for i, spec in enumerate(cfg.rewards):
        if not spec.name:
            raise ConfigError(f"rewards[{i}].name: required")
    if cfg.reward_control != "none" and cfg.mode == "absolute_zero":
        raise ConfigError("reward_control: shuffles the code task's rewards; Absolute Zero's have no control arm")
    trainer_sections = (("grpo", cfg.grpo), ("sft.args", cfg.sft.args if cfg.sft.enabled else {}))
    for section, values in trainer_sections:
        for key, owner in MANAGED_TRAINER_FIELDS.items():
            if key in values:
                raise ConfigError(f"{section}.{key}: azr sets it from '{owner}'; set that instead")
    check_vllm_config(cfg.vllm, cfg.model, cfg.grpo)
    check_heldout(cfg.eval, cfg.data.eval, cfg.mode)
    if (
        environment_of(cfg).token_episodes  # a ConfigError first for an environment the recipe cannot run
        and cfg.sft.enabled
        and cfg.sft.rollouts
        and cfg.sft.args.get("assistant_only_loss")
    ):
        raise ConfigError(
            "sft.args.assistant_only_loss: feedback episodes train from their token ids, the loss on the policy's "
            "tokens already (it is for conversations rendered by the chat template)"
        )
    check_packages(cfg.sandbox.packages)


def check_full_weights(cfg: AzrConfig) -> None:
    """`sft.full_weights`: a warm start of all weights under an adapter GRPO then trains, where it can be had (with
    sft.enabled false it is ignored, as the section's other settings are)."""
    if not (cfg.sft.enabled and cfg.sft.full_weights):
        return
    model = cfg.model
    problems = {
        "model.adapter.kind is none, so every phase trains all weights already": not model.adapter.enabled,
        f"model.quantization={model.quantization}: a quantized base cannot be fully fine-tuned": (
            model.quantization != "none"
        ),
        "model.backend unsloth loads a model once, for an adapter or for full fine-tuning, not both": (
            model.backend == "unsloth"
        ),
    }
    for reason, on in problems.items():
        if on:
            raise ConfigError(f"sft.full_weights: {reason}")


def check_packages(names: list[str]) -> None:
    """Each package offered to programs is an installed distribution here (by its name or an import name)."""
    if not names:
        return
    from importlib import metadata

    by_import = metadata.packages_distributions()
    for i, name in enumerate(names):
        try:
            metadata.distribution(by_import.get(name, [name])[0])
        except (metadata.PackageNotFoundError, ValueError):
            raise ConfigError(f"sandbox.packages[{i}]: {name!r} is not installed here (pip install {name})") from None


def _check_tools(cfg: AzrConfig) -> None:
    for i, name in enumerate(cfg.tools.names):
        if name not in TOOL_NAMES:
            raise ConfigError(f"tools.names[{i}]: unknown tool {name!r}{did_you_mean(name, TOOL_NAMES)}")
    if len(set(cfg.tools.names)) != len(cfg.tools.names):
        raise ConfigError("tools.names: a tool is listed twice")
    if cfg.tools.enabled and not cfg.tools.names:
        raise ConfigError("tools.names: empty, but tools.enabled is true")
    if cfg.sft.enabled and cfg.sft.rollouts and cfg.sft.near_misses:
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
            network = ipaddress.ip_network(net, strict=False)
        except ValueError:
            raise ConfigError(f"tools.web.allow_networks[{i}]: {net!r} is not a network (e.g. 127.0.0.1/32)") from None
        _check_allowed_network(network, f"tools.web.allow_networks[{i}]")
    if cfg.tools.web.search_backend == "searxng" and "web_search" in cfg.tools.names and not cfg.tools.web.searxng_url:
        raise ConfigError("tools.web.searxng_url: required when tools.web.search_backend is 'searxng'")


# Whole ranges the web_fetch address guard refuses (azr.tools.guard has the full table; these are the large ones a
# too-wide allow_networks entry swallows).
GUARDED_BLOCKS = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "::1/128",
        "::ffff:0:0/96",
        "fc00::/7",
        "fe80::/10",
        "ff00::/8",
    )
)


def _check_allowed_network(network: ipaddress.IPv4Network | ipaddress.IPv6Network, where: str) -> None:
    """Refused: a network wider than a whole guarded range (0.0.0.0/0, ::/0, 0.0.0.0/1, 8.0.0.0/4...): public
    addresses need no allowing, so its only effect is to switch the address guard off for every range it swallows,
    which no recipe has a reason to do (a warning would scroll past in a long run). A network that is exactly one
    whole guarded range (10.0.0.0/8) is allowed with a warning; a few addresses (127.0.0.1/32) silently."""
    swallowed = [b for b in GUARDED_BLOCKS if b.version == network.version and b.subnet_of(network)]  # type: ignore[arg-type]
    if any(b != network for b in swallowed):
        ranges = ", ".join(map(str, swallowed[:4])) + (", ..." if len(swallowed) > 4 else "")
        raise ConfigError(
            f"{where}: {network} swallows whole guarded ranges ({ranges}) and would switch web_fetch's address guard "
            "off; list only the addresses a test needs, e.g. 127.0.0.1/32"
        )
    if any(b.num_addresses > 1 for b in swallowed):  # ::1/128 is one address, not a range
        log.warning("%s: %s lets web_fetch reach all of a guarded range (for tests only)", where, network)


def dump_yaml(cfg: AzrConfig) -> str:
    """The resolved config as YAML, in schema order (what `save_config` writes and `azr config show` prints)."""
    import yaml  # here, not at module level: see yaml_io._loader

    return yaml.safe_dump(dataclasses.asdict(cfg), sort_keys=False, allow_unicode=True)


def save_config(cfg: AzrConfig, path: str | Path) -> Path:
    """Write the resolved config as YAML, atomically, so a run's outputs always say what produced them."""
    return atomic_write_text(Path(path), dump_yaml(cfg))
