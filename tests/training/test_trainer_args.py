"""Trainer arguments from a recipe: the GRPOConfig and SFTConfig a run uses carry azr's managed fields, and every
bad `grpo:` / `sft.args` value is a one-line ConfigError naming the field, never an exception out of TRL."""

from __future__ import annotations

import dataclasses
import logging
import warnings

import pytest

from azr.config import check_groups, load_config
from azr.errors import ConfigError
from azr.training import build_trainer_args

BASE = ["model.name_or_path=org/model", "output_dir=/nonexistent/azr-args-run"]


def _cfg(*overrides: str, grpo: dict | None = None, sft: dict | None = None):
    cfg = load_config(None, [*BASE, *overrides])
    cfg.grpo.update(grpo or {})
    if sft is not None:
        cfg.sft.enabled = True
        cfg.sft.args.update(sft)
    return cfg


def test_the_built_arguments_carry_azrs_managed_fields():
    cfg = _cfg(
        "seed=7",
        "thinking.policy=true",
        "thinking.policy_budget_tokens=64",
        "model.gradient_checkpointing=false",
        grpo={"max_completion_length": 100, "num_generations": 2, "per_device_train_batch_size": 4},
        sft={"num_train_epochs": 2},
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # azr uses transformers' current names: nothing deprecated
        args = build_trainer_args(cfg, cpu=True)
    grpo, sft = args.grpo, args.sft
    assert grpo.output_dir == "/nonexistent/azr-args-run/checkpoints"
    assert sft.output_dir == "/nonexistent/azr-args-run/sft/checkpoints"
    assert grpo.seed == sft.seed == 7
    assert not grpo.activation_checkpointing and not sft.activation_checkpointing
    assert grpo.max_completion_length == args.max_completion_length == 164  # the thinking budget is added
    assert args.max_seq_length == 164 + 2048
    assert grpo.chat_template_kwargs == {"enable_thinking": True}
    assert grpo.reward_weights == [1.0, 0.1]  # the default rewards: tests and format
    assert grpo.use_cpu and not grpo.bf16 and sft.use_cpu and not sft.bf16
    assert sft.num_train_epochs == 2 and sft.completion_only_loss


def test_self_play_blends_the_reward_weights_at_load():
    cfg = _cfg("self_play.enabled=true", "self_play.base_url=http://127.0.0.1:9/v1", "self_play.model=m",
               "self_play.weight=0.25", grpo={"num_generations": 2, "per_device_train_batch_size": 4})  # fmt: skip
    assert build_trainer_args(cfg, cpu=True).grpo.reward_weights == pytest.approx([0.75, 0.075, 0.25])


def test_without_a_warm_start_there_are_no_sft_arguments():
    assert build_trainer_args(_cfg(), cpu=True).sft is None


# (section, values, the one-line message it must start with): azr's own checks, type checks, TRL's own checks named
# through the culprit search, and what the trainer would refuse only after the model has loaded.
BAD = [
    ("grpo", {"num_generations": 1}, "grpo.num_generations: GRPO needs at least 2 generations per prompt, got 1"),
    (
        "grpo",
        {"num_generations": 3, "per_device_train_batch_size": 4},
        "grpo.num_generations, grpo.per_device_train_batch_size: a generation batch of 4 completions "
        "(per_device_train_batch_size x processes x steps_per_generation) does not hold whole groups of "
        "num_generations=3; make it a multiple of 3",
    ),
    ("grpo", {"per_device_train_batch_size": 12}, "grpo.per_device_train_batch_size: a generation batch of 12"),
    ("grpo", {"generation_batch_size": 8, "steps_per_generation": 2}, "grpo.generation_batch_size: set it or"),
    ("grpo", {"num_generation": 8}, "grpo.num_generation: not a trl.GRPOConfig field (did you mean 'num_generations'"),
    ("grpo", {"learning_rate": "fast"}, "grpo.learning_rate: expected a number, got 'fast'"),
    ("grpo", {"per_device_train_batch_size": 2.5}, "grpo.per_device_train_batch_size: expected an integer, got 2.5"),
    ("grpo", {"max_steps": [10]}, "grpo.max_steps: expected an integer, got [10]"),
    ("grpo", {"use_vllm": "yes"}, "grpo.use_vllm: expected a boolean, got 'yes'"),
    (
        "grpo",
        {"accelerator_config": True},
        "grpo.accelerator_config: expected a string or a mapping",
    ),
    ("grpo", {"lr_scheduler_type": "cosinus"}, "grpo.lr_scheduler_type: cosinus is not a valid SchedulerType"),
    ("grpo", {"optim": "adamw_fast"}, "grpo.optim: adamw_fast is not a valid OptimizerNames"),
    ("grpo", {"log_level": "loud"}, "grpo.log_level: expected one of detail, debug, info"),
    (
        "grpo",
        {"auto_find_batch_size": True},
        "grpo.auto_find_batch_size: auto_find_batch_size is not supported",
    ),
    ("grpo", {"log_completions_hub_repo": "a/b"}, "grpo.log_completions_hub_repo: log_completions_hub_repo is set"),
    (
        "grpo",
        {"vllm_importance_sampling_clip_min": 2.0, "vllm_importance_sampling_clip_max": 1.0},
        "grpo.vllm_importance_sampling_clip_min, grpo.vllm_importance_sampling_clip_max: ",
    ),
    ("grpo", {"max_completion_length": None}, "grpo.max_completion_length: expected a positive integer, got None"),
    ("grpo", {"chat_template_kwargs": "x"}, "grpo.chat_template_kwargs: expected a mapping, got 'x'"),
    (
        "grpo",
        {"report_to": "tensorbaord"},
        "grpo.report_to: unknown target 'tensorbaord' (did you mean 'tensorb",
    ),
    ("grpo", {"report_to": "wandb"}, "grpo.report_to: 'wandb' is not installed here; pip install wandb"),
    ("grpo", {"use_vllm": True}, "grpo.use_vllm: TRL's vLLM generation needs the vllm package"),
    ("grpo", {"eval_strategy": "steps"}, "grpo.eval_strategy: needs evaluation through the trainer"),
    ("grpo", {"save_strategy": "best"}, "grpo.save_strategy: needs evaluation through the trainer"),
    ("grpo", {"load_best_model_at_end": True}, "grpo.load_best_model_at_end: "),
    ("sft.args", {"num_train_epochs": "many"}, "sft.args.num_train_epochs: expected a number, got 'many'"),
    ("sft.args", {"packing": "yes"}, "sft.args.packing: expected a boolean, got 'yes'"),
    ("sft.args", {"warmup_ratio": 0.1}, "sft.args.warmup_ratio: not a trl.SFTConfig field"),
    ("sft.args", {"loss_type": "mse"}, "sft.args.loss_type: expected one of nll, dft, chunked_nll; got 'mse'"),
    ("sft.args", {"lr_scheduler_type": "cosin"}, "sft.args.lr_scheduler_type: cosin is not a valid SchedulerType"),
    ("sft.args", {"eval_strategy": "epoch"}, "sft.args.eval_strategy: needs evaluation through the trainer"),
]


@pytest.mark.parametrize(("section", "values", "message"), BAD, ids=[f"{s}:{','.join(v)}" for s, v, _ in BAD])
def test_a_bad_trainer_value_is_one_line_naming_the_field(section, values, message):
    cfg = _cfg(grpo=values) if section == "grpo" else _cfg(sft=values)
    with pytest.raises(ConfigError) as err:
        build_trainer_args(cfg, cpu=True)
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)


def _fields(cls) -> list[str]:
    managed = {"output_dir", "seed", "gradient_checkpointing", "activation_checkpointing"}
    return [f.name for f in dataclasses.fields(cls) if f.init and f.name not in managed]


def test_no_exception_from_trls_config_classes_escapes():
    """Every field of both classes, each with values of the wrong kind or out of range: building either succeeds
    or fails with a one-line ConfigError naming that field's section; nothing else comes out (a traceback). About
    1,400 builds; TRL's config classes take well under a millisecond each."""
    from trl import GRPOConfig, SFTConfig

    bad_values = [-1, "zzz", [1], True, None, 1.5, {"a": 1}]
    escaped, refused = [], 0
    for section, cls in (("grpo", GRPOConfig), ("sft.args", SFTConfig)):
        for name in _fields(cls):
            for value in bad_values:
                cfg = _cfg(grpo={name: value}) if section == "grpo" else _cfg(sft={name: value})
                try:
                    build_trainer_args(cfg, cpu=True)
                except ConfigError as exc:
                    refused += 1
                    if "\n" in str(exc) or not str(exc).startswith(section):
                        escaped.append((section, name, value, str(exc)))
                except Exception as exc:  # what the test is for: any other exception is a traceback for the user
                    escaped.append((section, name, value, f"{type(exc).__name__}: {exc}"))
    assert not escaped, escaped[:10]
    assert refused > 500  # the sweep does reach the checks


def test_a_deprecated_key_is_a_warning_that_names_it_and_library_notices_stay_off_the_console(caplog):
    with caplog.at_level(logging.DEBUG, logger="azr.training.trl.trainer_args"):
        build_trainer_args(_cfg(grpo={"use_transformers_paged": True}), cpu=True)
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage().split(":")[0] for r in warned] == ["grpo.use_transformers_paged"]
    assert "deprecated" in warned[0].getMessage()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["teacher_assist.enabled=true", "teacher_assist.hint_share=0.25"],
            "teacher_assist.hint_share: 0.25 of the 2 prompt group(s) in a generation batch rounds down to none",
        ),
        (
            ["curriculum.replay=true", "curriculum.replay_rate=0.3"],
            "curriculum.replay_rate: 0.3 of the 2 prompt group(s) in a generation batch rounds down to none",
        ),
    ],
)
def test_hinted_retries_and_replay_that_could_never_act_are_refused(overrides, message):
    endpoints = [f"{e}.{k}" for e in ("self_play", "teacher") for k in ("enabled=true", "model=m")]
    endpoints += [f"{e}.base_url=http://127.0.0.1:9/v1" for e in ("self_play", "teacher")]
    cfg = _cfg(*endpoints, *overrides, grpo={"num_generations": 2, "per_device_train_batch_size": 4})
    with pytest.raises(ConfigError) as err:
        build_trainer_args(cfg, cpu=True)
    assert str(err.value).startswith(message)
    cfg.grpo["per_device_train_batch_size"] = 8  # four groups: a quarter of them is one
    cfg.teacher_assist.hint_share = cfg.curriculum.replay_rate = 0.25
    build_trainer_args(cfg, cpu=True)


def test_a_group_may_straddle_two_processes():
    """Two processes, one prompt group of four split over them: the group sampler composes the whole generation
    batch on the main process, so hinted retries and replay still swap that group whole."""

    @dataclasses.dataclass
    class Split:
        per_device_train_batch_size: int = 2
        steps_per_generation: int = 1
        num_generations: int = 4
        generation_batch_size: int = 4  # 2 per process x 2 processes

    cfg = _cfg("self_play.enabled=true", "self_play.base_url=http://127.0.0.1:9/v1", "self_play.model=m",
               "curriculum.replay=true", "curriculum.replay_rate=1.0")  # fmt: skip
    check_groups(cfg, Split())
    cfg.curriculum.replay_rate = 0.5
    with pytest.raises(ConfigError, match=r"^curriculum.replay_rate: 0.5 of the 1 prompt group\(s\)"):
        check_groups(cfg, Split())
    # The curriculum composes every process's rows too; dynamic sampling judges each process's own groups.
    check_groups(_cfg("curriculum.enabled=true"), Split())
    with pytest.raises(
        ConfigError,
        match=r"^sampling.dynamic: keeps or passes over whole prompt groups on each process, but each process "
        r"generates 2 completions per batch, not a multiple of grpo.num_generations=4",
    ):
        check_groups(_cfg("sampling.dynamic=true"), Split())
    check_groups(_cfg("sampling.dynamic=true"), Split(steps_per_generation=2, generation_batch_size=8))
    # TRL's steps_per_generation follows gradient_accumulation_steps: 6 rows a step, 12 a generation, three groups.
    cfg = _cfg("sampling.dynamic=true", grpo={"num_generations": 4, "per_device_train_batch_size": 6})
    with pytest.raises(ConfigError, match=r"a generation batch of 6 completions"):  # TRL's batch check, first
        build_trainer_args(cfg, cpu=True)
    cfg.grpo["gradient_accumulation_steps"] = 2
    check_groups(cfg, build_trainer_args(cfg, cpu=True).grpo)


def test_an_unknown_reward_is_refused_without_starting_a_sandbox(monkeypatch):
    import azr.sandbox

    monkeypatch.setattr(azr.sandbox, "open_pool", lambda *a, **k: pytest.fail("a sandbox was started"))
    cfg = _cfg("rewards=[{name: tests}, {name: testz}]")
    with pytest.raises(ConfigError, match=r"^rewards\[1\]\.name: unknown reward 'testz'"):
        build_trainer_args(cfg, cpu=True)
    cfg = _cfg("rewards=[{name: length, params: {target_tokens: 9, limit_tokens: 3}}]")
    with pytest.raises(ConfigError, match=r"^rewards\[0\]\.params: length reward needs 0 < target_tokens"):
        build_trainer_args(cfg, cpu=True)
