"""The seed project's configuration files (justdtip/self-directed-training), converted to the current schema
before validation (`normalise_legacy`, called by `load_config`): each key with an azr equivalent mapped, the rest
dropped and named in one warning line; a current file passes through untouched. Owns only the mapping (its table
and the reasons are in docs/config.md); nothing here reads task files.
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from azr.config.schema import get_dotted, is_set_dotted
from azr.errors import ConfigError, did_you_mean, show

log = logging.getLogger(__name__)

Pairs = list[tuple[str, Any]]
DROP = None  # the key has no meaning for azr


def _quantization(value: object) -> Pairs:
    """Its quantization words ('' and null were its none)."""
    known = {None: "none", False: "none", "": "none", "none": "none", "nf4": "4bit", "int4": "4bit", "int8": "8bit"}
    return [
        ("model.quantization", known.get(value, value) if value is None or isinstance(value, (str, bool)) else value)
    ]


def _modules(value: object) -> Pairs:
    """Its target modules: a list, or names separated by commas."""
    if isinstance(value, str) and "," in value:
        value = [name.strip() for name in value.split(",") if name.strip()]
    return [("model.adapter.target_modules", value)]


def _endpoint(section: str) -> Callable[[Any], Pairs]:
    """A full endpoint URL (…/v1/chat/completions) as azr's base URL and API."""

    def convert(value: object) -> Pairs:
        if not isinstance(value, str):
            return [(f"{section}.base_url", value)]
        url = value.rstrip("/")
        for suffix, api in (("/chat/completions", "chat"), ("/responses", "responses")):
            if url.endswith(suffix):
                return [(f"{section}.base_url", url.removesuffix(suffix)), (f"{section}.api", api)]
        return [(f"{section}.base_url", url)]

    return convert


# Its providers, for an opponent or teacher given by provider name alone (its OpenAI provider used Responses).
_PROVIDERS = {
    "openai": [("base_url", "https://api.openai.com/v1"), ("api", "responses")],
    "together_ai": [("base_url", "https://api.together.xyz/v1"), ("api", "chat")],
}


def _provider(section: str) -> Callable[[Any], Pairs]:
    return lambda value: [(f"{section}.{key}", v) for key, v in _PROVIDERS.get(value, [])]


def _remote(name: str) -> Callable[[Any], Pairs]:
    def check(value: object) -> Pairs:
        if value != "remote":
            raise ConfigError(
                f"{name}.source: only a remote {name.split('.')[-1]} converts (azr's is an OpenAI-compatible "
                f"endpoint; a local model can be served as one with vLLM), got {show(value)}"
            )
        return []

    return check


def _from_cwd(target: str, key: str) -> Callable[[Any], Pairs]:
    """A path the seed opened relative to the directory it ran in, not to the config file, made absolute (`.` and
    `..` folded); the file system's root is refused."""

    def convert(value: object) -> Pairs:
        if not isinstance(value, str) or not value:
            return [(target, value)]
        path = Path(os.path.abspath(Path.cwd() / value))
        if path == Path(path.anchor):
            raise ConfigError(f"{key}: {value!r} is the file system's root; choose a folder")
        return [(target, str(path))]

    return convert


# Seed key (its main shape, dotted) -> the azr field, a conversion to (field, value) pairs, or DROP. A key that names
# a block (`hardware`, `self_play.update`) stands for everything under it.
SEED_KEYS: dict[str, str | Callable[[Any], Pairs] | None] = {
    "model.model_id": "model.name_or_path",
    "model.quantization": _quantization,
    "model.lora_r": "model.adapter.r",
    "model.lora_alpha": "model.adapter.alpha",
    "model.lora_dropout": "model.adapter.dropout",
    "model.lora_target_modules": _modules,
    "model.device_map": DROP,
    "rlhf.num_generations": "grpo.num_generations",
    "rlhf.max_completion_length": "grpo.max_completion_length",
    "rlhf.temperature": "grpo.temperature",
    "rlhf.top_p": "grpo.top_p",
    "rlhf.clip_range_ratio": "grpo.epsilon",
    "rlhf.kl_coeff": "grpo.beta",
    "rlhf.importance_sampling_level": "grpo.importance_sampling_level",
    "rlhf.gradient_accumulation_steps": "grpo.gradient_accumulation_steps",
    "rlhf.bf16": "grpo.bf16",
    "rlhf.max_prompt_length": DROP,  # TRL no longer truncates prompts
    "rlhf.retry_temperature": DROP,  # its retries of failed samples; azr's retries are hinted, at the same temperature
    "training.lr": "grpo.learning_rate",
    "training.warmup_ratio": "grpo.warmup_steps",  # TRL takes a float below 1 as a ratio of the steps
    "training.weight_decay": "grpo.weight_decay",
    "training.output_dir": _from_cwd("output_dir", "training.output_dir"),
    "thinking.policy_enable_thinking": "thinking.policy",
    "thinking.opponent_enable_thinking": "thinking.opponent",
    "thinking.enabled": DROP,  # it only logged whether the template took enable_thinking; the switches are above
    "thinking.tag_open": DROP,
    "thinking.tag_close": DROP,
    "thinking.strip_for_reward": DROP,
    "thinking.opponent_budget_note": DROP,
    "self_play.device": DROP,
    "self_play.update_every": DROP,
    "self_play.update": DROP,
    "self_play.use_tool_loop": DROP,
    "self_play.tie_breakers": DROP,
    "self_play.opponent.source": _remote("self_play.opponent"),
    "self_play.opponent.provider": _provider("self_play"),
    "self_play.opponent.model_id": "self_play.model",
    "self_play.opponent.endpoint": _endpoint("self_play"),
    "self_play.opponent.api_key_env": "self_play.api_key_env",
    "self_play.opponent.max_concurrency": "self_play.concurrency",
    "self_play.opponent.temperature": "self_play.temperature",
    "self_play.opponent.top_p": "self_play.top_p",
    "self_play.opponent.extra_body": "self_play.extra_body",
    "self_play.opponent.request_timeout": "self_play.timeout_s",
    "teacher.source": _remote("teacher"),
    "teacher.provider": _provider("teacher"),
    "teacher.model_id": "teacher.model",
    "teacher.endpoint": _endpoint("teacher"),
    "teacher.api_base_env": DROP,  # azr takes the base URL itself, never from the environment
    "teacher.request_timeout": "teacher.timeout_s",
    "teacher.max_concurrency": "teacher.concurrency",
    "teacher_assist.modes": DROP,  # azr asks for hints
    "teacher_assist.sample_prob_neither": "teacher_assist.hint_prob_neither",
    "teacher_assist.sample_prob_opp_only": "teacher_assist.hint_prob_opponent_only",
    "teacher_assist.max_hint_tokens": "teacher.max_tokens",
    "teacher_solve": DROP,  # the teacher's answer replacing the policy's in its batch: off-policy, not in azr
    "penalties": DROP,  # a format penalty inside its test score; azr's format reward is weighed in `rewards`
    "data.train_path": _from_cwd("data.train", "data.train_path"),
    "sandbox.timeout_s": "sandbox.timeout_s",
    "sandbox.memory_mb": "sandbox.memory_mb",
    "sandbox.max_tool_turns": "gen.max_turns",
    "web.max_bytes": "tools.web.max_bytes",
    "web.user_agent": "tools.web.user_agent",
    "web.headless": DROP,
    "logging.log_executor_output": DROP,  # azr writes every test's outcome to generations/*.jsonl
    "logging.exec_store": DROP,
    "logging.exec_max_bytes": DROP,
    "logging.debug_full_logs": DROP,
    "log_intersteps": DROP,
    "image": DROP,
    "hardware": DROP,
}
# The `azr:` section, as the seed's own loader lifted it into the main shape (prefixes, at a dot).
_AZR_SECTION = (
    ("azr.model_id", "model.model_id"),
    ("azr.quantization", "model.quantization"),
    ("azr.lora.r", "model.lora_r"),
    ("azr.lora.alpha", "model.lora_alpha"),
    ("azr.lora.dropout", "model.lora_dropout"),
    ("azr.lora.target_modules", "model.lora_target_modules"),
    ("azr.rlhf", "rlhf"),
    ("azr.training", "training"),
    ("azr.sandbox", "sandbox"),
    ("azr.web", "web"),
    ("azr.image", "image"),
)
# Seed keys that are azr fields of the same name and meaning: alone, they do not make a file the seed's.
_SHARED = {"model.quantization", "sandbox.timeout_s", "sandbox.memory_mb"}
# Sections (and blocks of shared sections) only the seed had, with keys of their own: a key in them that SEED_KEYS
# does not know is an error, never passed on. (Its other sections, `hardware`, `penalties`, …, are dropped whole.)
_SEED_SECTIONS = {"azr", "ia3", "rlhf", "training", "web"}
_SEED_BLOCKS = ("self_play.opponent",)
# Fields of earlier versions that were replaced, with what replaced them.
REPLACED = {
    "vllm.sidecar": "replaced by vllm.mode (off | adapter | server | colocate)",
    "vllm.host": "removed: the server azr launches listens on 127.0.0.1 only",
}


def check_replaced(raw: dict[str, Any]) -> None:
    """A one-line error for a field an earlier version had, naming what replaced it."""
    for dotted, reason in REPLACED.items():
        section, leaf = dotted.split(".")
        if isinstance(raw.get(section), dict) and leaf in raw[section]:
            raise ConfigError(f"{dotted}: {reason}")


# Its `ia3:` block stacked extra trainables on its LoRA adapter. Two have a peft equivalent as LoRA options; the rest
# were its own modules, which never learned there (its warm-up wrote their starting values back at every step, a
# clamp pinned the IA³ gates at exactly 1, the q/k gates were never applied), so they are not ported.
_IA3_MAPPED = {"layernorm_gamma": ("model.adapter.train_norms", True), "bitfit": ("model.adapter.bias", "all")}
_IA3_NOT_PORTED = {
    "per_layer_head_gates": "per-head and grouped gates",
    "ffn_channel_gates": "FFN channel gates",
    "lora_mlp_down": "LoRA-MLP adapters",
    "attention_logit_gates": "attention-logit gates",
    "projection_dim_gates": "projection gates",
    "rope_scale": "RoPE scalers",
    "residual_gates": "residual gates",
    "prefix_prompts": "soft prompts",
}
# The settings of its plain IA³ gates, dropped with them.
_IA3_GATES = ("targets", "clamp_min", "clamp_max", "safe_mode", "warmup_steps")
# Its module names, as peft's table for Llama/Qwen names them.
_IA3_MODULES = {"ffn_down": "down_proj", "ffn_up": "up_proj", "ffn_gate": "gate_proj"}


def normalise_legacy(raw: dict[str, Any], source: str) -> dict[str, Any]:
    """The seed project's file `raw` in the current schema (a file already in it is returned as it is), with a
    warning that it was converted, one naming every dropped key, and one for IA³ gates."""
    if not is_seed_file(raw):
        return raw
    if "azr" in raw and not isinstance(raw["azr"], dict):
        raise ConfigError(f"azr: expected a mapping (legacy schema), got {type(raw['azr']).__name__}")
    pairs: list[tuple[str, Any, str]] = []
    dropped: list[str] = []
    notes: list[str] = []
    for shown, value in _seed_leaves(raw):
        rule = SEED_KEYS[_seed_key(shown)]
        if rule is DROP:
            dropped.append(shown)
            continue
        converted = rule(value) if callable(rule) else [(rule, value)]
        pairs += [(target, v, shown) for target, v in converted]
    _check_leftovers(raw)
    if "ia3" in raw:
        pairs += _ia3_pairs(raw.pop("ia3"), dropped, notes)
    pairs += _teacher_switches(raw)
    _prune(raw)
    # A provider's URL and API are defaults: an endpoint the file gives wins.
    for target, value, legacy_name in sorted(pairs, key=lambda pair: pair[2].endswith(".provider")):
        if not (legacy_name.endswith(".provider") and is_set_dotted(raw, target)):
            _place(raw, target, value, legacy_name)
    log.warning(
        "%s: the seed project's schema converted; `azr config show --config %s` prints the result", source, source
    )
    if dropped:
        log.warning("%s: dropped (no meaning or no equivalent in azr): %s", source, ", ".join(dropped))
    for note in notes:
        log.warning("%s: %s", source, note)
    return raw


def is_seed_file(raw: dict[str, Any]) -> bool:
    """Whether `raw` is in one of the seed's shapes: a section only it had, or a seed key under a shared section."""
    if set(raw) & _SEED_SECTIONS:
        return True
    return any(_seed_key(shown) not in _SHARED for shown, _ in _seed_leaves(copy.deepcopy(raw)))


def _seed_key(shown: str) -> str:
    """The key in the seed's main shape: `azr.lora.r` is `model.lora_r`, `azr.rlhf.x` is `rlhf.x`."""
    for prefix, main in _AZR_SECTION:
        if shown == prefix or shown.startswith(prefix + "."):
            return main + shown[len(prefix) :]
    return shown


def _seed_leaves(raw: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted key, value) of every seed key in `raw`, popped from it. Blocks are entered only where SEED_KEYS
    names something inside them; the rest (a current field, an unknown key) stays in `raw`."""
    found = []
    for key in list(raw):
        shown = f"{prefix}{key}"
        seed = _seed_key(shown)
        if seed in SEED_KEYS:
            found.append((shown, raw.pop(key)))
        elif isinstance(raw[key], dict) and (
            shown in ("azr", "azr.lora") or any(k.startswith(seed + ".") for k in SEED_KEYS)
        ):
            found += _seed_leaves(raw[key], shown + ".")
    return found


def _check_leftovers(raw: dict[str, Any], prefix: str = "") -> None:
    """A one-line error for a key left in a section or block only the seed had (what SEED_KEYS does not know)."""
    for key, value in raw.items():
        shown = f"{prefix}{key}"
        if shown == "ia3":
            continue  # its own rules (`_ia3_pairs`)
        if isinstance(value, dict) and value:
            _check_leftovers(value, shown + ".")
        elif not isinstance(value, dict) and _seed_only(shown):
            raise ConfigError(f"{shown}: unknown legacy key{did_you_mean(_seed_key(shown), SEED_KEYS)}")


def _seed_only(shown: str) -> bool:
    seed = _seed_key(shown)
    return seed.split(".")[0] in _SEED_SECTIONS or any(seed.startswith(block + ".") for block in _SEED_BLOCKS)


def _prune(raw: dict[str, Any]) -> None:
    """Remove the blocks the conversion emptied (every block of the schema defaults to empty)."""
    for key in list(raw):
        if isinstance(raw[key], dict):
            _prune(raw[key])
            if not raw[key]:
                del raw[key]


def _teacher_switches(raw: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """The seed had no teacher switches: its teacher answered when teacher assistance was on (as azr's does), and
    reasoned when given a budget (its budgets have azr's names and stay as they are)."""
    pairs = []
    if get_dotted(raw, "teacher_assist.enabled") is True and not is_set_dotted(raw, "teacher.enabled"):
        pairs.append(("teacher.enabled", True, "teacher_assist.enabled"))
    budget = get_dotted(raw, "thinking.teacher_budget_tokens")
    if isinstance(budget, int) and not isinstance(budget, bool) and not is_set_dotted(raw, "thinking.teacher"):
        pairs.append(("thinking.teacher", budget > 0, "thinking.teacher_budget_tokens"))
    return pairs


def _place(raw: dict[str, Any], target: str, value: object, legacy_name: str) -> None:
    node = raw
    *parents, leaf = target.split(".")
    for depth, part in enumerate(parents):
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{'.'.join(parents[: depth + 1])}: expected a mapping, got {show(node)}")
    if leaf in node:
        raise ConfigError(f"{target}: set twice, as {target} and as legacy {legacy_name}")
    node[leaf] = value


def _ia3_pairs(section: object, dropped: list[str], notes: list[str]) -> list[tuple[str, Any, str]]:
    """The seed's `ia3:` block as (field, value, legacy name) triples; its disabled blocks go to `dropped` and the
    IA³ advice to `notes`; a one-line error where an enabled part has no peft equivalent."""
    if not isinstance(section, dict):
        raise ConfigError(f"ia3: expected a mapping (legacy schema), got {show(section)}")
    known = {"enabled", "init_value", *_IA3_GATES, *_IA3_MAPPED, *_IA3_NOT_PORTED}
    for key in section:
        if key not in known:
            raise ConfigError(f"ia3.{key}: unknown legacy key{did_you_mean(str(key), known)}")
    if not section.get("enabled"):
        dropped.append("ia3 (disabled)")  # the seed read nothing else from a disabled block
        return []
    init = section.get("init_value", 1.0)
    if isinstance(init, bool) or init != 1.0:
        raise ConfigError(
            f"ia3.init_value: gates starting at {show(init)} are not ported (peft's IA³ starts at 1, the identity); "
            "set model.adapter.kind: ia3"
        )
    for key, what in _IA3_NOT_PORTED.items():
        if _on(section.get(key)):
            raise ConfigError(
                f"ia3.{key}: the seed's {what} are not ported: they never learned there (its warm-up wrote their "
                "starting values back every step); use model.adapter (kind: lora or ia3)"
            )
    dropped += [
        f"ia3.{key} (disabled)" for key in (*_IA3_NOT_PORTED, *_IA3_MAPPED) if key in section and not _on(section[key])
    ]
    notes.append("ia3: " + _ia3_advice(section.get("targets")))
    return [(*_IA3_MAPPED[key], f"ia3.{key}") for key in _IA3_MAPPED if _on(section.get(key))]


def _ia3_advice(targets: object) -> str:
    """Why the seed's IA³ gates are dropped, and how to train IA³ here."""
    names = [_IA3_MODULES.get(t, t) for t in targets] if isinstance(targets, list) else []
    feedforward = [n for n in names if n in _IA3_MODULES.values()]
    where = f" (on {', '.join(map(str, targets))})" if names else ""
    how = "model.adapter.kind: ia3"
    if names:
        how += f" with target_modules: [{', '.join(map(str, names))}]"
        how += f" and feedforward_modules: [{', '.join(feedforward)}]" if feedforward else ""
    return (
        f"the seed's IA³ gates{where} are dropped: they never trained there (its clamp pinned them at 1 and its "
        f"warm-up wrote them back every step), so only its LoRA adapter learned, as here. To train IA³ in azr, set "
        f"{how}; it replaces the LoRA adapter (one peft adapter per run)"
    )


def _on(value: object) -> bool:
    return value is True or (isinstance(value, dict) and bool(value.get("enabled")))
