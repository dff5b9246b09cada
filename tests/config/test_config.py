"""Config: schema, coercion, overrides, legacy schema, paths, round trip, and the docs generated from help."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import typing
from pathlib import Path

import pytest

from azr.config import AzrConfig, load_config, save_config
from azr.config.schema import fields_markdown, iter_fields
from azr.errors import ConfigError
from azr.training import validate_grpo

MIN = ["model.name_or_path=Qwen/Qwen2.5-Coder-7B-Instruct"]


def test_defaults_are_sensible():
    cfg = load_config(None, MIN)
    assert cfg.model.name_or_path == "Qwen/Qwen2.5-Coder-7B-Instruct"  # a hub id is not turned into a path
    assert cfg.model.adapter.kind == "lora" and cfg.model.adapter.r == 16
    assert [(r.name, r.weight) for r in cfg.rewards] == [("tests", 1.0), ("format", 0.1)]
    assert cfg.data.train == "train" and cfg.data.eval == "held-out"
    assert Path(cfg.output_dir).is_absolute()
    assert not cfg.self_play.enabled and not cfg.teacher.enabled


def test_yaml_and_json_give_the_same_config(write):
    body = {"model": {"name_or_path": "m/x", "adapter": {"r": 4}}, "grpo": {"learning_rate": 1e-5}, "seed": 3}
    yaml_cfg = load_config(
        write("a.yaml", "model:\n  name_or_path: m/x\n  adapter: {r: 4}\ngrpo:\n  learning_rate: 1e-5\nseed: 3\n")
    )
    json_cfg = load_config(write("a.json", json.dumps(body)))
    assert yaml_cfg == json_cfg
    assert yaml_cfg.grpo["learning_rate"] == 1e-5  # YAML 1.2 float, even without checking against TRL


@pytest.mark.parametrize(
    ("override", "getter", "expected"),
    [
        ("model.adapter.r=8", lambda c: c.model.adapter.r, 8),
        ("model.adapter.dropout=0", lambda c: c.model.adapter.dropout, 0.0),
        ("sandbox.timeout_s=1e-1", lambda c: c.sandbox.timeout_s, 0.1),
        ("model.trust_remote_code=yes", lambda c: c.model.trust_remote_code, True),
        ("data.shuffle=false", lambda c: c.data.shuffle, False),
        ("model.revision=123", lambda c: c.model.revision, "123"),  # a string field stays a string
        ("data.eval=null", lambda c: c.data.eval, None),
        ("data.max_tasks=10", lambda c: c.data.max_tasks, 10),
        ("model.adapter.target_modules=[q_proj, v]", lambda c: c.model.adapter.target_modules, ["q_proj", "v"]),
        ("model.adapter.target_modules=all-linear", lambda c: c.model.adapter.target_modules, "all-linear"),
        ("rewards.1.weight=0.5", lambda c: c.rewards[1].weight, 0.5),
        ("grpo.learning_rate=1e-5", lambda c: c.grpo["learning_rate"], 1e-5),
        ("self_play.extra_body.top_k=20", lambda c: c.self_play.extra_body, {"top_k": 20}),
        ("vllm.extra_args=[--enforce-eager]", lambda c: c.vllm.extra_args, ["--enforce-eager"]),
    ],
)
def test_set_overrides_coerce_to_the_field_type(override, getter, expected):
    assert getter(load_config(None, [*MIN, override])) == expected


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("model.adaptr.r=8", "model.adaptr: unknown key (did you mean 'adapter'?)"),
        ("model.adapter.rr=8", "model.adapter.rr: unknown key (did you mean 'r'?)"),
        ("modle.dtype=auto", "modle: unknown key (did you mean 'model'?)"),
        ("model.adapter.r=eight", "model.adapter.r: expected an integer, got 'eight'"),
        ("model.adapter.r=0", "model.adapter.r: must be > 0, got 0"),
        ("model.quantization=3bit", "model.quantization: expected one of none, 4bit, 8bit; got '3bit'"),
        ("self_play.weight=1.5", "self_play.weight: must be <= 1, got 1.5"),
        ("teacher.api_key=sk-123", "teacher.api_key: unknown key; never put secrets in a config"),
        ("rewards.5.weight=1", "--set rewards.5: expected a list index below 2"),
        ("model.name_or_path.x=1", "--set model.name_or_path.x: 'model.name_or_path' is a value, not a section"),
        ("nokey", "--set 'nokey': expected KEY=VALUE"),
        ("grpo.output_dir=x", "grpo.output_dir: azr sets it from 'output_dir'"),
        ("grpo.reward_weights=[2.0,0.1]", "grpo.reward_weights: azr sets it from 'rewards[i].weight'; set that"),
    ],
)
def test_bad_overrides_name_the_field(override, message):
    with pytest.raises(ConfigError) as err:
        load_config(None, [*MIN, override])
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_cross_field_checks():
    with pytest.raises(ConfigError, match=r"^model\.name_or_path: required"):
        load_config(None, [])
    with pytest.raises(ConfigError, match=r"^self_play\.base_url: required when self_play\.enabled"):
        load_config(None, [*MIN, "self_play.enabled=true"])
    with pytest.raises(ConfigError, match=r"^teacher_assist\.enabled: needs teacher\.enabled"):
        load_config(None, [*MIN, "teacher_assist.enabled=true"])
    assert load_config(None, [*MIN, "sft.enabled=true", "sft.near_misses=2"]).sft.near_misses == 2
    with pytest.raises(ConfigError, match=r"^rewards: at least one reward"):
        load_config(None, [*MIN, "rewards=[]"])


def test_grpo_keys_are_checked_against_trl():
    grpo = {"learning_rate": "1e-5", "num_generations": "8", "beta": 0.0, "report_to": ["tensorboard"]}
    validate_grpo(grpo)
    assert grpo == {"learning_rate": 1e-5, "num_generations": 8, "beta": 0.0, "report_to": ["tensorboard"]}
    with pytest.raises(
        ConfigError,
        match=r"^grpo\.num_generation: not a trl\.GRPOConfig field \(did you mean "
        r"'num_generations'\?\)",
    ):
        validate_grpo({"num_generation": 8})
    with pytest.raises(ConfigError, match=r"^grpo\.learning_rate: expected a number, got 'fast'"):
        validate_grpo({"learning_rate": "fast"})
    for nan in ("nan", float("nan")):  # as text (--set learning_rate=nan) and as YAML reads .nan
        with pytest.raises(ConfigError, match=r"^grpo\.learning_rate: expected a number, got NaN$"):
            validate_grpo({"learning_rate": nan})
    for inf in ("inf", "-inf", float("inf")):  # a learning rate of infinity made every weight NaN at the first step
        with pytest.raises(ConfigError, match=r"^grpo\.learning_rate: expected a finite number, got -?inf "):
            validate_grpo({"learning_rate": inf})


LEGACY = """
azr:
  model_id: Qwen/Qwen2.5-Coder-1.5B-Instruct
  quantization: 4bit
  lora: {r: 32, alpha: 64, dropout: 0.1, target_modules: [q_proj, k_proj]}
  rlhf:
    num_generations: 8
    max_completion_length: 512
    temperature: 0.9
    top_p: 0.95
    clip_range_ratio: 0.2
    kl_coeff: 0.04
    importance_sampling_level: sequence
    gradient_accumulation_steps: 4
"""


def test_legacy_schema_is_normalised_with_a_warning(write, caplog):
    with caplog.at_level(logging.WARNING, logger="azr.config.legacy"):
        cfg = load_config(write("legacy.yaml", LEGACY))
    validate_grpo(cfg.grpo)  # every converted key is a trl.GRPOConfig field
    assert "the seed project's schema converted" in caplog.text
    assert cfg.model.name_or_path == "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    assert cfg.model.quantization == "4bit"
    lora = cfg.model.adapter
    assert (lora.kind, lora.r, lora.alpha, lora.dropout) == ("lora", 32, 64, 0.1)
    assert lora.target_modules == ["q_proj", "k_proj"]
    assert cfg.grpo == {
        "num_generations": 8,
        "max_completion_length": 512,
        "temperature": 0.9,
        "top_p": 0.95,
        "epsilon": 0.2,
        "beta": 0.04,
        "importance_sampling_level": "sequence",
        "gradient_accumulation_steps": 4,
    }


def test_legacy_errors(write):
    with pytest.raises(ConfigError, match=r"^azr\.rlhf\.kl_coef: unknown legacy key \(did you mean 'rlhf\.kl_coeff'"):
        load_config(write("a.yaml", "azr:\n  model_id: m/x\n  rlhf: {kl_coef: 0.1}\n"))
    with pytest.raises(ConfigError, match=r"^model: expected a mapping, got 5"):
        load_config(write("c.yaml", "azr:\n  model_id: m/x\nmodel: 5\n"))
    with pytest.raises(ConfigError, match=r"^grpo\.beta: set twice, as grpo\.beta and as legacy azr\.rlhf\.kl_coeff"):
        load_config(write("b.yaml", "azr:\n  model_id: m/x\n  rlhf: {kl_coeff: 0.1}\ngrpo: {beta: 0.2}\n"))


def test_paths_are_relative_to_the_config_file_and_cli_values_to_the_cwd(tmp_path, monkeypatch):
    recipe_dir = tmp_path / "recipes"
    (recipe_dir / "model").mkdir(parents=True)
    (recipe_dir / "tasks.jsonl").write_text("")
    recipe = recipe_dir / "r.yaml"
    recipe.write_text("output_dir: out\nmodel: {name_or_path: model}\ndata: {train: tasks.jsonl}\n")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = load_config(recipe)
    assert cfg.output_dir == str(recipe_dir / "out")
    assert cfg.model.name_or_path == str(recipe_dir / "model")  # exists beside the config: a local path
    assert cfg.data.train == str(recipe_dir / "tasks.jsonl")
    cfg = load_config(recipe, ["output_dir=mine", "data.train=held-out"])
    assert cfg.output_dir == str(elsewhere / "mine")
    assert cfg.data.train == "held-out"


def test_saved_config_loads_back_identical(tmp_path, write):
    cfg = load_config(
        write("r.yaml", LEGACY),
        [
            "self_play.enabled=true",
            "self_play.base_url=http://127.0.0.1:1/v1",
            "self_play.model=m",
            "self_play.api_key_env=TOGETHER_API_KEY",
        ],
    )
    saved = save_config(cfg, tmp_path / "run" / "config.yaml")
    assert load_config(saved) == cfg
    assert not [p for p in saved.parent.iterdir() if p.name.startswith(".")]  # no temp file left behind


def test_every_field_has_help():
    def walk(cls):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            yield f"{cls.__name__}.{f.name}", f
            if dataclasses.is_dataclass(hints[f.name]):
                yield from walk(hints[f.name])

    fields = list(walk(AzrConfig))
    assert any(name == "AdapterConfig.r" for name, _ in fields)  # nested sections are walked
    assert [name for name, f in fields if not f.metadata.get("help", "").strip()] == []
    leaves = list(iter_fields(AzrConfig, ""))
    assert len(leaves) > 60 and all(help_text.strip() for *_, help_text in leaves)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("seed: 010", 10),  # YAML 1.1 would read octal 8
        ("model: {revision: '0123'}", "0123"),
        ("model: {name_or_path: no}", "no"),  # YAML 1.1 would read False
        ("model: {name_or_path: 1:30}", "1:30"),  # YAML 1.1 would read 90
        ("model: {name_or_path: 2024-01-01}", "2024-01-01"),  # YAML 1.1 would read a date
        ("sandbox: {timeout_s: 1e1}", 10.0),
    ],
)
def test_yaml_follows_the_1_2_core_schema(write, text, expected):
    cfg = load_config(write("r.yaml", text + "\n"), [] if "name_or_path" in text else MIN)
    values = {
        "seed": cfg.seed,
        "revision": cfg.model.revision,
        "name_or_path": cfg.model.name_or_path,
        "timeout_s": cfg.sandbox.timeout_s,
    }
    assert values[next(k for k in values if k in text)] == expected


@pytest.mark.parametrize(
    ("text", "overrides", "message"),
    [
        ("model: {name_or_path: a}\nseed: 1\nseed: 2\n", [], r"r\.yaml:3: invalid YAML: duplicate key 'seed'"),
        ("model: {name_or_path: a, revision: 0123}\n", [], r"model\.revision: expected a string, got 123 \(quote it"),
        ("model: {name_or_path: a}\n", ["model.adapter.target_modules=[q"], r"model\.adapter\.target_modules: cannot"),
        ("model: {name_or_path: a}\n", ["model.adapter.target_modules=[q, 1]"], r"model\.adapter\.target_modules\[1\]"),
        ("model: {name_or_path: a}\n", ["sandbox.timeout_s=.inf"], r"sandbox\.timeout_s: expected a finite number"),
        ("model: {name_or_path: a}\n", ["data.shuffle=2"], r"data\.shuffle: expected a boolean, got 2"),
        ("azr: {model_id: a, quantization: [4bit]}\n", [], r"model\.quantization: expected one of none, 4bit, 8bit"),
    ],
)
def test_malformed_values_are_config_errors(write, text, overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(write("r.yaml", text), overrides)


def test_bool_fields_take_0_and_1():
    assert load_config(None, [*MIN, "data.shuffle=0"]).data.shuffle is False


def test_the_docs_config_table_is_generated_from_the_help_strings():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "config.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- config-table:start -->\n(.*?)\n<!-- config-table:end -->", doc, re.S)
    assert block, "docs/config.md lacks the config table markers"
    assert block.group(1).strip() == fields_markdown(AzrConfig).strip(), "regenerate it with `azr config fields`"


def test_a_disabled_sections_settings_are_ignored_with_a_debug_note(caplog):
    """`--set sft.enabled=false` alone turns the demo's warm start off: its near misses, episodes file and trainer
    arguments are not refused, and the debug log names what is ignored."""
    tiny = Path(__file__).resolve().parents[2] / "examples" / "tiny.yaml"
    with caplog.at_level(logging.DEBUG, logger="azr.config.load"):
        cfg = load_config(tiny, ["sft.enabled=false"])
    assert not cfg.sft.enabled and cfg.sft.near_misses == 2
    assert "sft.enabled is false: sft.args, sft.near_misses ignored" in caplog.text
    off = ["sft.near_misses=2", "sft.rollouts=r.jsonl", "sft.args={output_dir: x}", "teacher.model=m"]
    assert load_config(None, [*MIN, *off]).sft.rollouts.endswith("r.jsonl")
    with pytest.raises(ConfigError, match=r"^sft\.near_misses: near misses vary"):
        load_config(None, [*MIN, "sft.enabled=true", "sft.near_misses=2", "sft.rollouts=r.jsonl"])


def test_every_section_with_an_enabled_field_is_switched_or_said_not_to_be():
    from azr.config.load import NOT_SECTION_SWITCHES, SWITCHED_SECTIONS

    with_switch = {name.rsplit(".", 1)[0] for name, *_ in iter_fields(AzrConfig, "") if name.endswith(".enabled")}
    assert with_switch == set(SWITCHED_SECTIONS) | NOT_SECTION_SWITCHES


@pytest.mark.parametrize("network", ["0.0.0.0/0", "::/0", "0.0.0.0/1", "96.0.0.0/3", "fc00::/6"])
def test_an_allowed_network_that_swallows_guarded_ranges_is_refused(network):
    with pytest.raises(ConfigError, match=r"allow_networks\[0\]: .* would switch web_fetch's address guard off"):
        load_config(None, ["model.name_or_path=x", f'tools.web.allow_networks=["{network}"]'])


def test_one_whole_guarded_range_is_allowed_loudly_and_a_few_addresses_quietly(caplog):
    load_config(None, ["model.name_or_path=x", 'tools.web.allow_networks=["10.0.0.0/8"]'])
    assert "10.0.0.0/8 lets web_fetch reach all of a guarded range" in caplog.text
    caplog.clear()
    load_config(None, ["model.name_or_path=x", 'tools.web.allow_networks=["127.0.0.1/32", "::1/128"]'])
    assert "allow_networks" not in caplog.text


# Fields of the recipe that need no upper bound: they scale no work (a seed's range is numpy's, below).
UNBOUNDED = {
    "data.float_tol",
    "self_play.weight",
    "curriculum.ucb_c",
    "curriculum.unseen_weight",
    "curriculum.min_weight",
}
UNBOUNDED_SUFFIXES = ("price_in_per_mtok", "price_out_per_mtok", ".temperature")


def _numeric_fields(cls, where=""):
    import dataclasses
    import typing

    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        dotted, hint = f"{where}.{f.name}" if where else f.name, hints[f.name]
        if dataclasses.is_dataclass(hint):
            yield from _numeric_fields(hint, dotted)
        elif ({int, float} & set(typing.get_args(hint) or (hint,))) and hint is not bool:
            yield dotted, f.metadata


def test_every_numeric_field_that_drives_work_has_an_upper_bound():
    from azr.config.evaluate import EvalCommandConfig

    fields = [*_numeric_fields(AzrConfig), *(("eval-command." + n, m) for n, m in _numeric_fields(EvalCommandConfig))]
    rewards = {n for n, _ in fields if n.startswith("absolute_zero.") and n.split(".")[1].startswith(("solve", "prop"))}
    free = UNBOUNDED | rewards
    missing = [n for n, meta in fields if "le" not in meta and n not in free and not n.endswith(UNBOUNDED_SUFFIXES)]
    assert not missing


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("eval.samples=100000", "eval.samples: must be <= 1,024, got 100000"),
        ("eval.k=[1, 2000]", "eval.k[1]: must be <= 1,024, got 2000"),
        ("eval.max_new_tokens=99999999", "eval.max_new_tokens: must be <= 1,048,576, got 99999999"),
        ("eval.every_steps=99999999999", "eval.every_steps: must be <= 10,000,000, got 99999999999"),
        ("sandbox.workers=5000", "sandbox.workers: must be <= 1,024, got 5000"),
        ("seed=-1", "seed: must be >= 0, got -1"),
        ("seed=4294967296", "seed: must be <= 4,294,967,295, got 4294967296"),
        ("eval.samples=" + "9" * 5000, "eval.samples: an integer of 5,000 digits (the limit is 4,300)"),
        ("grpo.num_generations=" + "9" * 5000, "grpo.num_generations: an integer of 5,000 digits (the limit is"),
        ("eval.k=[" + "9" * 5000 + "]", "eval.k: cannot parse '[999"),
        ("sandbox.workers=0x" + "f" * 4000, "sandbox.workers: expected an integer, got '0xfff"),
    ],
)
def test_numbers_past_their_bounds_or_digit_limit_are_one_line_errors(override, message):
    with pytest.raises(ConfigError) as err:
        load_config(None, [*MIN, override])
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value) and len(str(err.value)) < 200


@pytest.mark.parametrize(
    ("name", "text"), [("r.json", '{"seed": %s}'), ("r.yaml", "seed: %s\n"), ("h.yaml", "seed: 0x%s")]
)
def test_a_recipe_file_with_an_integer_too_long_names_the_file(write, name, text):
    path = write(name, text % ("9" * 5000))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).startswith(f"{path}") and "an integer of" in str(err.value) and "digits" in str(err.value)
    assert len(str(err.value)) < 200


def test_grpo_counts_that_multiply_a_steps_work_have_ceilings(cli, write):
    recipe = write("r.yaml", "model: {name_or_path: x}\n")
    for command in ("show", "check"):
        code, _, err = cli("config", command, "--config", recipe, "--set", "grpo.num_generations=100000")
        assert code == 2 and err == "azr: error: grpo.num_generations: must be <= 4,096, got 100000\n"
