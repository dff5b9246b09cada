"""`azr config check` (and `azr train`'s preflight) makes every check TRL makes later, those it makes only inside
`train()` included: each enumerated GRPOConfig field set to nonsense exits 2 naming the field, before any model
loads; the contract's table agrees with the installed TRL. Loading a recipe leaves `grpo:` to training: `azr eval`
and `azr gen` never hand it to TRL."""

from __future__ import annotations

import dataclasses
import enum
import re
import typing

import pytest

from azr.config import load_config
from azr.errors import ConfigError
from azr.training import build_trainer_args
from azr.training.trl.contract import DEFAULTS, ENUMERATED, check_trl_contract

# GRPOConfig's fields with a fixed set of values: TRL's own (ENUMERATED), those with declared `choices`, and
# transformers' enums; test_the_list_is_every_enumerated_field holds it to the installed TRL.
FIELDS = sorted(
    {
        *ENUMERATED,
        "log_level",
        "log_level_replica",
        "train_sampling_strategy",
        "ddp_backend",
        "dataloader_multiprocessing_context",
        "lr_scheduler_type",
        "optim",
        "logging_strategy",
        "eval_strategy",
        "save_strategy",
        "hub_strategy",
    }
)


def _enumerated_in_trl() -> set[str]:
    from trl import GRPOConfig

    hints = typing.get_type_hints(GRPOConfig)
    found = set()
    for f in dataclasses.fields(GRPOConfig):
        kinds = typing.get_args(hints[f.name]) or (hints[f.name],)
        enum_typed = any(isinstance(k, type) and issubclass(k, enum.Enum) for k in kinds)
        if f.init and (f.metadata.get("choices") or enum_typed):
            found.add(f.name)
    return found


def test_the_list_is_every_enumerated_field():
    assert _enumerated_in_trl() | set(ENUMERATED) == set(FIELDS)


def test_the_table_agrees_with_the_installed_trl():
    from trl import GRPOConfig

    fields = {f.name: f for f in dataclasses.fields(GRPOConfig)}
    for name, default in DEFAULTS.items():
        assert fields[name].default == default, name
    for name, allowed in ENUMERATED.items():
        assert fields[name].default in allowed, name
        text = fields[name].metadata.get("help", "") + (GRPOConfig.__doc__ or "")
        for value in (v for v in allowed if isinstance(v, str)):
            assert re.search(rf"\b{value}\b", text), (name, value)


@pytest.mark.parametrize("field", FIELDS)
def test_config_check_names_every_enumerated_field_set_to_nonsense(cli, write, field):
    recipe = write("recipe.yaml", f"model: {{name_or_path: ./no-model-here}}\ngrpo:\n  {field}: not_a_real_choice\n")
    code, out, err = cli("config", "check", "--config", recipe)
    assert code == 2, (out, err)
    assert f"grpo.{field}" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("field", ["loss_type", "scale_rewards", "importance_sampling_level"])
def test_what_trl_rejects_at_the_first_loss_step_is_refused_as_the_arguments_are_built(write, field):
    cfg = load_config(write("r.yaml", f"model: {{name_or_path: x}}\ngrpo: {{{field}: nonsense}}\n"))
    with pytest.raises(ConfigError, match=rf"^grpo\.{field}: expected one of"):
        build_trainer_args(cfg, cpu=True)


@pytest.mark.parametrize(
    ("grpo", "kind", "named"),
    [
        ({"loss_type": "vespo", "use_vllm": True}, "lora", "vllm_importance_sampling_mode"),
        ({"sync_ref_model": True}, "none", "sync_ref_model: needs grpo.beta"),
        ({"sync_ref_model": True, "beta": 0.1}, "lora", "sync_ref_model: TRL does not support it with an adapter"),
        ({"use_liger_kernel": True, "liger_kernel_config": {"fused_linear_cross_entropy": True}}, "lora", "liger"),
    ],
)
def test_the_trainers_cross_field_rules_are_checked_first(write, grpo, kind, named):
    import json

    cfg = load_config(
        write("r.json", json.dumps({"model": {"name_or_path": "x", "adapter": {"kind": kind}}, "grpo": grpo}))
    )
    with pytest.raises(ConfigError, match=re.escape(f"grpo.{named}")):
        check_trl_contract(cfg.grpo, cfg.model.adapter.kind)


def test_valid_values_pass(write):
    cfg = load_config(write("r.yaml", "model: {name_or_path: x}\ngrpo: {loss_type: grpo, scale_rewards: false}\n"))
    assert cfg.grpo == {"loss_type": "grpo", "scale_rewards": False}
