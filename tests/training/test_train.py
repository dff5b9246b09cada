"""`azr train` end to end on the tiny model, CPU only: outputs, LoRA and QLoRA, the SFT warm start, resume after
SIGKILL, and the trainer's own changes to TRL (masking ungraded rows, stopping on an unhealthy sandbox).

Real parts throughout: the tiny model, TRL's trainers, the bwrap sandbox. Settings are the smallest that still
exercise each path (2 completions per prompt, 16 new tokens, 4 tasks)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from procs import kill_group_when
from recipes import tiny_grpo_args, tiny_recipe, write_recipe
from run_files import read_generations, read_jsonl, read_phases

from azr.config import SandboxConfig, load_config
from azr.data import encode_all
from azr.data.tasks import load_tasks
from azr.prompts import chat_messages, reference_answer
from azr.rewards.functions import CodeGrader, FormatReward
from azr.rewards.grading import Grade, limits_from_config, pool_from_config
from azr.sandbox import SandboxUnhealthy
from azr.training import grpo_dataset
from azr.training.state import checkpoints

GRPO_KEYS = {
    "phase",
    "step",
    "loss",
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "pass_rate",
    "completion_length",
    "tokens_per_s",
    "step_time_s",
    "reward_time_s",
    "rewards/tests_reward/mean",
}
GENERATION_KEYS = {"step", "task_id", "prompt", "completion", "rewards", "status", "per_test", "reason"}


def _recipe(path: Path, model_dir: Path, out: Path, **sections) -> Path:
    """The tiny recipe measuring the pass rate on two tasks, `sections` merged over it (one level deep)."""
    logging = {"pass_rate_tasks": 2, "pass_rate_samples": 2, **sections.pop("logging", {})}
    return write_recipe(path, tiny_recipe(model_dir, out, logging=logging, **sections))


def _train(recipe: Path) -> int:
    from azr.training.run import run_train

    return run_train(load_config(recipe))


def _grpo_steps(out: Path) -> list[int]:
    return [r["step"] for r in read_jsonl(out / "metrics.jsonl") if r["phase"] == "grpo"]


def _front_matter(card: Path) -> dict:
    text = card.read_text()
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def _adapter_tensors(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "adapter_model.safetensors"))


# ----------------------------------------------------------------------------------------------- a LoRA run
@pytest.fixture(scope="module")
def lora_run(tiny_model_dir, tmp_path_factory) -> Path:
    """Two GRPO steps with LoRA (no warm start); the finished run's output dir."""
    root = tmp_path_factory.mktemp("lora")
    out = root / "run"
    with pytest.MonkeyPatch.context() as env:  # conftest's offline switches are per test; this runs before them
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
            env.setenv(name, "1")
        assert _train(_recipe(root / "recipe.yaml", tiny_model_dir, out)) == 0
    return out


@pytest.mark.slow  # trains the tiny model
def test_lora_run_writes_config_state_and_metrics(lora_run):
    config = yaml.safe_load((lora_run / "config.yaml").read_text())
    assert config["output_dir"] == str(lora_run) and config["model"]["adapter"]["r"] == 4
    assert read_phases(lora_run) == ["eval_before", "grpo", "eval_after"]
    records = read_jsonl(lora_run / "metrics.jsonl")
    assert [r["phase"] for r in records] == ["eval_before", "grpo", "grpo", "eval_after"]
    grpo = [r for r in records if r["phase"] == "grpo"]
    assert [r["step"] for r in grpo] == [1, 2]
    for record in grpo:
        assert set(record) >= GRPO_KEYS, GRPO_KEYS - set(record)
        assert 0 <= record["pass_rate"] <= 1 and record["reward_std"] >= 0 and 0 <= record["frac_reward_zero_std"] <= 1
        assert record["tokens_per_s"] > 0 and record["step_time_s"] > 0 and record["reward_time_s"] >= 0
        assert 0 < record["completion_length"] <= 16
        # what TRL does not log: the p95 length, and the time of generation apart from rewards and the update
        assert record["completions/min_length"] <= record["completions/p95_length"] <= record["completions/max_length"]
        assert record["generation_time_s"] > 0
        assert record["generation_time_s"] + record["reward_time_s"] < record["step_time_s"]
    for record in (records[0], records[-1]):
        assert record["step"] == 0 and record["completions"] == 2 * 2 and 0 <= record["pass_rate"] <= 1


@pytest.mark.slow  # trains the tiny model
def test_lora_run_logs_every_generation(lora_run):
    files = sorted((lora_run / "generations").iterdir())
    assert [p.name for p in files] == ["generations-00000.jsonl"]
    records = read_generations(lora_run)
    assert [r["step"] for r in records] == [1] * 4 + [2] * 4  # per step: 2 prompts x 2 completions
    tasks = {t.id: t for t in load_tasks("train")}
    for record in records:
        assert set(record) >= GENERATION_KEYS, GENERATION_KEYS - set(record)
        assert record["prompt"] == tasks[record["task_id"]].prompt
        assert set(record["rewards"]) == {"tests_reward", "format_reward"}
        assert isinstance(record["per_test"], list) and isinstance(record["reason"], str)


@pytest.mark.slow  # trains the tiny model
def test_lora_run_saves_checkpoint_adapter_card_and_summary(lora_run):
    checkpoint = lora_run / "checkpoints" / "checkpoint-2"
    assert json.loads((checkpoint / "trainer_state.json").read_text())["global_step"] == 2
    assert {"optimizer.pt", "scheduler.pt", "rng_state.pth", "adapter_model.safetensors"} <= {
        p.name for p in checkpoint.iterdir()
    }
    final = lora_run / "final"
    adapter = json.loads((final / "adapter_config.json").read_text())
    assert adapter["peft_type"] == "LORA" and adapter["r"] == 4
    assert any(".lora_A." in k for k in _adapter_tensors(final))
    assert not (final / "model.safetensors").exists()  # the adapter only, not the merged model
    assert (final / "tokenizer.json").is_file() and (final / "tokenizer_config.json").is_file()
    meta = _front_matter(final / "README.md")
    assert meta["library_name"] == "peft" and {"azr", "grpo", "lora"} <= set(meta["tags"])
    assert "GRPO steps: 2" in (final / "README.md").read_text()
    summary = json.loads((lora_run / "summary.json").read_text())
    assert summary["phases"]["grpo"]["steps"] == 2 and summary["last_log"]["step"] == 2
    assert summary["status"] == "ok" and summary["generation_log"] == {"written": 8, "dropped": 0, "error": None}
    assert (lora_run / ".azr-run").read_text().startswith("azr ")  # the folder is marked as an azr run
    assert summary["eval_before"]["completions"] == summary["eval_after"]["completions"] == 4


@pytest.mark.slow  # trains the tiny model
def test_a_new_run_into_a_finished_run_is_refused_in_one_line(cli, lora_run, tiny_model_dir, tmp_path):
    before = {
        p: p.read_bytes() for p in (lora_run / "metrics.jsonl", lora_run / "state.json", lora_run / "config.yaml")
    }
    recipe = _recipe(tmp_path / "r.yaml", tiny_model_dir, lora_run, grpo={"max_steps": 3})
    code, _, err = cli("train", "--config", recipe)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("azr: error: output_dir: ") and "--resume-from latest" in err
    assert {p: p.read_bytes() for p in before} == before  # not even config.yaml was rewritten


@pytest.mark.slow  # trains the tiny model
def test_resume_from_a_folder_that_is_not_a_checkpoint_of_this_run_is_refused(cli, lora_run, tiny_model_dir, tmp_path):
    elsewhere = tmp_path / "other" / "checkpoints" / "checkpoint-2"  # a complete checkpoint, of another run
    elsewhere.mkdir(parents=True)
    (elsewhere / "trainer_state.json").write_text('{"global_step": 2}')
    state = (lora_run / "state.json").read_bytes()
    recipe = _recipe(tmp_path / "r.yaml", tiny_model_dir, lora_run)
    for target in (elsewhere, lora_run / "final"):
        code, _, err = cli("train", "--config", recipe, "--resume-from", target)
        assert code == 2 and err.count("\n") == 1, err
        assert err.startswith(f"azr: error: --resume-from: {target} is not a checkpoint-N folder of this run")
    assert (lora_run / "state.json").read_bytes() == state


# ---------------------------------------------------------------------------------------------------- QLoRA
@pytest.mark.slow  # about a minute: bitsandbytes' 4-bit matmuls are slow on a CPU
def test_qlora_on_cpu_trains_and_its_adapter_loads_on_a_4bit_base(tiny_model_dir, tmp_path):
    pytest.importorskip("bitsandbytes", reason="QLoRA needs bitsandbytes (pip install 'azr[qlora]')")
    import torch
    from bitsandbytes.nn import Linear4bit
    from peft import PeftModel

    from azr.config import ModelConfig
    from azr.models.loading import build_model_and_tokenizer

    out = tmp_path / "run"
    recipe = _recipe(tmp_path / "r.yaml", tiny_model_dir, out, model={"quantization": "4bit"})
    assert _train(recipe) == 0
    assert read_phases(out) == ["eval_before", "grpo", "eval_after"]
    assert _grpo_steps(out) == [1, 2]
    final = out / "final"
    assert _front_matter(final / "README.md")["library_name"] == "peft"
    assert "quantization 4bit" in (final / "README.md").read_text()

    base, tokenizer = build_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir), quantization="4bit"))
    model = PeftModel.from_pretrained(base, str(final))
    assert any(isinstance(m, Linear4bit) for m in model.modules())
    saved = _adapter_tensors(final)
    loaded = {k: v for k, v in model.state_dict().items() if ".lora_" in k}
    assert len(loaded) == len(saved)
    for name, tensor in saved.items():  # the file's names lack the adapter name ('default') peft adds on load
        assert torch.equal(loaded[name.replace(".weight", ".default.weight")], tensor)
    batch = tokenizer(["def f(x):"], return_tensors="pt")
    torch.manual_seed(0)
    ids = model.generate(**batch, max_new_tokens=4, min_new_tokens=4, do_sample=True)
    assert ids.shape == (1, batch["input_ids"].shape[1] + 4)


# -------------------------------------------------------------------------------------- gradient checkpointing
@pytest.mark.slow  # trains the tiny model
def test_gradient_checkpointing_with_lora_lets_gradients_reach_the_adapter(tiny_model_dir, tmp_path):
    """Frozen embeddings give checkpointed blocks inputs without grad: unless the trainer makes the embedding output
    require grad, reentrant checkpointing returns activations without a graph and LoRA gets no gradient (the
    backward fails). Reentrant is asked for here because it is the variant that needs this; the default
    (non-reentrant) passes the same checks."""

    from azr.models.adapters import build_peft_config
    from azr.models.loading import build_model_and_tokenizer
    from azr.rewards import build_rubric
    from azr.training.trl.args import build_trainer_args
    from azr.training.trl.trainer import AZRGRPOTrainer

    grpo = {"max_steps": 1, "save_strategy": "no", "gradient_checkpointing_kwargs": {"use_reentrant": True}}
    cfg = load_config(_recipe(tmp_path / "r.yaml", tiny_model_dir, tmp_path / "run", grpo=grpo))
    assert cfg.model.gradient_checkpointing  # the default
    rubric = build_rubric(cfg.rewards, cfg.sandbox)
    funcs, weights, grader = list(rubric.funcs), list(rubric.weights), rubric.grader
    model, tokenizer = build_model_and_tokenizer(cfg.model)
    trainer = AZRGRPOTrainer(
        model=model,
        reward_funcs=funcs,
        args=build_trainer_args(cfg, weights).grpo,
        train_dataset=grpo_dataset(load_tasks("train")[:2]),
        processing_class=tokenizer,
        peft_config=build_peft_config(cfg.model.adapter, model),
        grader=grader,
    )
    trainer.train()  # a GRPO step: forward and backward through the checkpointed blocks
    policy = trainer.model
    layers = [m for m in policy.modules() if type(m).__name__.endswith("DecoderLayer")]
    assert layers and all(m.gradient_checkpointing for m in layers)

    ids = tokenizer(["def f(x):\n    return x + 1"], return_tensors="pt")["input_ids"]
    embeddings = policy.get_input_embeddings()
    assert not embeddings.weight.requires_grad and embeddings(ids).requires_grad
    policy.train()
    policy.zero_grad(set_to_none=True)
    policy(input_ids=ids, labels=ids).loss.backward()
    lora_b = {n: p for n, p in policy.named_parameters() if ".lora_B." in n}
    assert lora_b and all(p.grad is not None and p.grad.abs().sum() > 0 for p in lora_b.values())
    assert all(p.grad is None for n, p in policy.named_parameters() if ".lora_" not in n)


# ------------------------------------------------------------------------------------------- one weigher
@pytest.mark.slow  # trains the tiny model
def test_the_rubrics_weights_weigh_the_advantages_the_logged_reward_the_pass_rate_and_the_held_out_reward(
    tiny_model_dir, tmp_path, monkeypatch
):
    """Non-default weights: tests x 2 (the tiny model passes none: 0), a constant 1 x 0.25, the answer's parity x
    0.5, so every total is 0.25 or 0.75 (unit weights would give 1 or 2). TRL's advantages (unscaled, so they show
    the weights), its logged reward, the train pass rate's mean reward and the held-out one all weigh so."""
    import torch

    from azr.rollouts import group_advantages, weighted_totals
    from azr.training.trl.trainer import AZRGRPOTrainer

    rounds = []
    score_round = AZRGRPOTrainer._score_round

    def recorded(self, rows):
        output, rewards = score_round(self, rows)
        rounds.append((output["advantages"].detach().clone(), rewards.detach().clone(), list(self.reward_func_names)))
        return output, rewards

    monkeypatch.setattr(AZRGRPOTrainer, "_score_round", recorded)
    rewards = [
        {"name": "tests", "weight": 2.0},
        {"name": "recipes:one_reward", "weight": 0.25},
        {"name": "recipes:answer_parity_reward", "weight": 0.5},
    ]
    out = tmp_path / "run"
    recipe = _recipe(
        tmp_path / "recipe.yaml",
        tiny_model_dir,
        out,
        rewards=rewards,
        grpo={"num_generations": 4, "per_device_train_batch_size": 8, "scale_rewards": "none"},
        eval={"every_steps": 2, "max_tasks": 2, "samples": 2},
    )
    assert _train(recipe) == 0
    weights = torch.tensor([2.0, 0.25, 0.5])
    assert len(rounds) == 2 and all(
        names == ["tests_reward", "one_reward", "answer_parity_reward"] for *_, names in rounds
    )
    for advantages, scored, _ in rounds:
        assert torch.isfinite(scored).all() and (scored[:, 0] == 0).all()  # graded, and no test passed
        expected = group_advantages(weighted_totals(scored, weights), 4, scale=False)
        assert advantages.tolist() == pytest.approx(expected.tolist())
    assert any(a.abs().max() > 0 for a, *_ in rounds)  # some group's parities differ: the check has teeth
    assert {abs(v) for a, *_ in rounds for v in a.tolist()} <= {0.0, 0.125, 0.25, 0.375}  # 0.5 x parity's spread

    records = read_jsonl(out / "metrics.jsonl")
    generations = read_generations(out)
    for step in (1, 2):
        (logged,) = [r for r in records if r["phase"] == "grpo" and r["step"] == step and "loss" in r]
        totals = [
            sum(w * r["rewards"][n] for w, n in zip(weights.tolist(), rounds[0][2], strict=True))
            for r in generations
            if r["step"] == step
        ]
        assert logged["reward"] == pytest.approx(sum(totals) / len(totals))

    def weighed(mean: float, graded: int) -> bool:  # 0.25 + 0.5 x (the share of odd answers)
        odd = (mean - 0.25) / 0.5 * graded
        return 0.25 <= mean <= 0.75 and abs(odd - round(odd)) < 1e-6

    passrates = [r for r in records if r["phase"] in ("eval_before", "eval_after")]
    assert len(passrates) == 2 and all(weighed(r["reward"], r["graded"]) for r in passrates)
    heldout = [r for r in records if r.get("kind") == "eval"]  # before the first step, and at step 2
    assert len(heldout) == 2 and all(weighed(r["mean_reward"], r["counts"]["graded"]) for r in heldout)


# ------------------------------------------------------------------------------------- the trainer's changes
class _FlakyCodeReward:
    """A custom code reward whose sandbox failed on some rows: None there (not graded), 1.0 elsewhere. Not the
    built-in `tests` reward: any reward's None that is not declared optional masks its row."""

    def __init__(self, failing: set[int]):
        self.__name__ = "api_judge_reward"
        self.failing = failing

    def __call__(self, prompts=None, completions=None, **columns):
        return [None if i in self.failing else 1.0 for i in range(len(completions))]


@pytest.fixture
def small_trainer(tiny_model_dir, tmp_path):
    """An AZRGRPOTrainer on the tiny model (no LoRA) with a flaky tests reward, a format reward, an observer and a
    real grader; returns (trainer, observed batches)."""

    from azr.config import ModelConfig
    from azr.models.loading import build_model_and_tokenizer
    from azr.training.trl.trainer import AZRGRPOTrainer

    model, tokenizer = build_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))
    sandbox = SandboxConfig(workers=1)
    grader = CodeGrader(pool_from_config(sandbox), limits_from_config(sandbox), max_infra_failure_rate=0.25)
    batches: list = []
    trainer = AZRGRPOTrainer(
        model=model,
        reward_funcs=[_FlakyCodeReward({1, 2}), FormatReward()],
        args=tiny_grpo_args(tmp_path / "checkpoints", max_completion_length=8),
        train_dataset=grpo_dataset(load_tasks("train")[:2]),
        processing_class=tokenizer,
        grader=grader,
        observers=[batches.append],
    )
    return trainer, batches


def _flaky_inputs(tasks):
    return [
        {
            "prompt": chat_messages(t.prompt),
            "task_id": t.id,
            "tests": encode_all(t.tests),
            "timeout_s": None,
            "memory_mb": None,
        }
        for t in tasks
        for _ in range(2)
    ]


def test_rows_a_custom_reward_could_not_grade_are_masked_whole(small_trainer):
    import torch
    from trl import GRPOTrainer

    trainer, batches = small_trainer
    tasks = load_tasks("train")[:2]
    inputs = _flaky_inputs(tasks)
    texts = [reference_answer(tasks[0].solution, tasks[0].entry_point), "no code", "no code either", "still none"]
    prompts = [row["prompt"] for row in inputs]
    completions = [[{"role": "assistant", "content": text}] for text in texts]
    ids = [trainer.processing_class(text)["input_ids"] for text in texts]

    # TRL alone: the ungraded rows keep their format reward, so the sandbox's failure would move their advantage.
    plain = GRPOTrainer._calculate_rewards(trainer, inputs, prompts, completions, ids)
    assert torch.isnan(plain[1, 0]) and plain[1, 1] == 0.0
    batches.clear()

    rewards = trainer._calculate_rewards(inputs, prompts, completions, ids)
    assert rewards.shape == (4, 2)
    assert torch.isnan(rewards[[1, 2]]).all()  # NaN throughout: advantage 0, out of the group baseline
    assert torch.isfinite(rewards[[0, 3]]).all()
    assert rewards[0].tolist() == [1.0, 1.0] and rewards[3].tolist() == [1.0, 0.0]  # the format reward is kept
    assert trainer.reward_seconds > 0

    (batch,) = batches
    records = batch.records()
    json.dumps(records, allow_nan=False)  # strict JSON: no NaN token
    assert [r["rewards"] for r in records] == [
        {"api_judge_reward": 1.0, "format_reward": 1.0},
        {"api_judge_reward": None, "format_reward": None},
        {"api_judge_reward": None, "format_reward": None},
        {"api_judge_reward": 1.0, "format_reward": 0.0},
    ]
    assert [r["step"] for r in records] == [1] * 4 and [r["completion"] for r in records] == texts
    assert [r["task_id"] for r in records] == [tasks[0].id] * 2 + [tasks[1].id] * 2
    assert records[0]["prompt"] == tasks[0].prompt


def test_an_ungraded_row_is_out_of_the_loss_and_its_group_and_counted(small_trainer):
    """A round whose custom reward could not score rows 1 and 2: their advantage is 0, their completion mask is
    zeroed (no KL term, no tokens in the loss's normaliser), each group's graded row is its own baseline, and the
    training log counts them."""
    import torch

    trainer, _ = small_trainer
    trainer.model.train()
    output, rewards = trainer._score_round(_flaky_inputs(load_tasks("train")[:2]))
    assert torch.isnan(rewards[[1, 2]]).all() and torch.isfinite(rewards[[0, 3]]).all()
    assert output["advantages"].tolist() == [0.0] * 4  # a group of one graded row has no spread to learn from
    mask = output["completion_mask"]
    assert mask[[1, 2]].sum() == 0 and mask[0].sum() > 0 and mask[3].sum() > 0
    assert int(output["num_items_in_batch"]) == int(mask.sum())
    logged = trainer._ungraded_metrics()
    assert logged == {
        "rewards/ungraded": 0.5,
        "rewards/api_judge_reward/ungraded": 0.5,
        "rewards/format_reward/ungraded": 0.0,
    }
    assert trainer._scored_rows == 0 and trainer._ungraded.sum() == 0  # counted again from the next log on


def test_each_epochs_prompt_order_depends_on_the_seed_and_epoch_only(small_trainer):
    """A resumed run builds a new sampler and starts it at a later epoch; it must draw that epoch's order, not the
    first epoch's again (TRL's sampler draws every epoch from one generator)."""
    trainer, _ = small_trainer
    dataset = grpo_dataset(load_tasks("train")[:8])
    running = trainer._get_train_sampler(dataset)
    orders = []
    for epoch in range(3):
        running.set_epoch(epoch)
        orders.append(list(running))
    assert sorted(orders[0]) == [i for i in range(8) for _ in range(2)]  # each prompt once per epoch, twice over
    assert orders[0] != orders[1] != orders[2]
    resumed = trainer._get_train_sampler(dataset)
    resumed.set_epoch(2)
    assert list(resumed) == orders[2]


def test_an_unhealthy_sandbox_stops_training_at_the_end_of_the_step(small_trainer):
    trainer, _ = small_trainer
    step_end = trainer.callback_handler.on_step_end
    step_end(trainer.args, trainer.state, trainer.control)  # healthy: nothing happens
    ok = Grade("failed", 0, 1, ["test 0: AssertionError"])
    trainer.grader._account([ok, ok, ok, ok])  # wrong answers are not infrastructure failures
    step_end(trainer.args, trainer.state, trainer.control)
    lost = Grade("error", 0, 1, ["worker lost"])
    trainer.grader._account([lost, ok, ok, ok])  # 1 of 4 is not above 0.25
    step_end(trainer.args, trainer.state, trainer.control)
    trainer.grader._account([lost, lost, ok, ok])
    with pytest.raises(SandboxUnhealthy, match=r"^2 of 4 sandbox runs .*sandbox\.max_infra_failure_rate=0\.25"):
        step_end(trainer.args, trainer.state, trainer.control)


# -------------------------------------------------------------------------------------------- SFT warm start
@pytest.mark.slow  # trains the tiny model
def test_sft_warm_start_then_grpo_and_a_finished_run_resumes_to_nothing(cli, tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    sft = {"enabled": True, "args": {"num_train_epochs": 2, "per_device_train_batch_size": 4, "logging_steps": 1}}
    sft["args"]["learning_rate"] = 1e-3
    recipe = _recipe(tmp_path / "r.yaml", tiny_model_dir, out, sft=sft, grpo={"max_steps": 1})
    code, _, err = cli("train", "--config", recipe)
    assert code == 0, err
    assert read_phases(out) == ["sft", "eval_before", "grpo", "eval_after"]
    records = read_jsonl(out / "metrics.jsonl")
    phases = [r["phase"] for r in records]
    assert phases == ["sft", "sft", "eval_before", "grpo", "eval_after"]
    assert [r["step"] for r in records if r["phase"] == "sft"] == [1, 2]
    assert all(math.isfinite(r["loss"]) for r in records if r["phase"] == "sft")
    # GRPO continued the SFT adapter: one GRPO step at lr 1e-6 cannot move it far from what SFT learned.
    warm, final = _adapter_tensors(out / "sft" / "final"), _adapter_tensors(out / "final")
    assert warm.keys() == final.keys()
    lora_b = [k for k in warm if ".lora_B." in k]
    assert max(warm[k].abs().max().item() for k in lora_b) > 1e-4  # SFT moved B from its zero init
    assert max((warm[k] - final[k]).abs().max().item() for k in warm) < 1e-4
    assert "Warm start: SFT on reference answers" in (out / "final" / "README.md").read_text()

    outputs = {p: p.read_bytes() for p in (out / "metrics.jsonl", out / "state.json")}
    checkpoints = sorted(p.relative_to(out) for p in out.rglob("checkpoint-*"))
    code, _, err = cli("train", "--config", recipe, "--resume-from", "latest")
    assert code == 0, err
    assert {p: p.read_bytes() for p in outputs} == outputs  # no phase ran again, nothing logged
    assert sorted(p.relative_to(out) for p in out.rglob("checkpoint-*")) == checkpoints

    code, _, err = cli("train", "--config", recipe)
    assert code == 2 and err.count("\n") == 1 and "--resume-from" in err


# ------------------------------------------------------------------------------------- SIGKILL, then resume
def _records(path: Path, phase: str | None = None) -> list[dict]:
    """The complete records of a log that a live run may be writing to right now."""
    from azr.logs import read_jsonl_records

    records = read_jsonl_records(path) if path.exists() else []
    return [r for r in records if phase is None or r.get("phase") == phase]


def _train_argv() -> list[str]:
    """The venv's azr-train console script (or the same entry point through this interpreter)."""
    script = Path(sys.executable).with_name("azr-train")
    return [str(script)] if script.exists() else [sys.executable, "-c", "from azr.cli import train_main; train_main()"]


def _kill_when(recipe: Path, ready, log: Path, timeout_s: float = 500) -> None:
    """Start a run in its own process group, SIGKILL the group once `ready()` holds, and check that nothing it
    started (sandbox workers included, which run in sessions of their own) outlives it."""
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            [*_train_argv(), "--config", str(recipe)], stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
    started = kill_group_when(proc, ready, log, timeout_s)
    assert started, "the trainer should have started its sandbox workers"
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)


def _resume(recipe: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [*_train_argv(), "--config", str(recipe), "--resume-from", "latest"],
        capture_output=True,
        text=True,
        timeout=550,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.slow(minutes=0.6)
def test_a_run_killed_mid_grpo_resumes_from_its_checkpoint_exactly(tiny_model_dir, tmp_path):
    """SIGKILL to the whole process group after step 3 (checkpoint-2 on disk), then `--resume-from latest`:
    the run finishes with every step logged once, from the checkpoint's step, optimizer, scheduler, RNG and data
    order, and the killed run leaves no sandbox worker behind."""
    import torch

    out = tmp_path / "run"
    recipe = _recipe(
        tmp_path / "r.yaml",
        tiny_model_dir,
        out,
        model={"gradient_checkpointing": False},  # faster; checkpointing has its own test
        grpo={"max_steps": 8, "save_steps": 2},
    )

    def step_3_logged() -> bool:
        return (
            any(r["step"] >= 3 for r in _records(out / "metrics.jsonl", "grpo"))
            and any(r.get("step") == 3 for r in _records(out / "generations" / "generations-00000.jsonl"))
            and (out / "checkpoints" / "checkpoint-2" / "trainer_state.json").exists()
        )

    _kill_when(recipe, step_3_logged, tmp_path / "first.log")
    from_step = checkpoints(out, "grpo")[-1][0]  # 2, unless step 4 and its checkpoint finished before the kill
    killed_generations = _records(out / "generations" / "generations-00000.jsonl")  # its last line may be torn
    resumed = _resume(recipe)
    assert f"resume: grpo from step {from_step}" in resumed.stderr

    # Every log line parses; every step appears once; the measurements before GRPO were not taken again.
    records = read_jsonl(out / "metrics.jsonl")
    assert [r["phase"] for r in records] == ["eval_before"] + ["grpo"] * 8 + ["eval_after"]
    assert _grpo_steps(out) == list(range(1, 9))
    assert read_phases(out) == ["eval_before", "grpo", "eval_after"]
    generations = read_generations(out)
    assert [r["step"] for r in generations] == [s for s in range(1, 9) for _ in range(4)]

    # The scheduler continued: the linear decay of the learning rate runs on through the resume.
    rates = [r["learning_rate"] for r in records if r["phase"] == "grpo"]
    assert rates == pytest.approx([1e-6 * (1 - s / 8) for s in range(8)], rel=1e-6)
    # The optimizer continued: Adam counted every one of the 8 steps, not only those after the resume.
    state = json.loads((out / "checkpoints" / "checkpoint-8" / "trainer_state.json").read_text())
    assert state["global_step"] == 8
    assert [h["step"] for h in state["log_history"] if "loss" in h] == list(range(1, 9))
    optimizer = torch.load(out / "checkpoints" / "checkpoint-8" / "optimizer.pt", weights_only=True)
    assert {int(s["step"]) for s in optimizer["state"].values()} == {8}
    # RNG and data order continued: the first step after the checkpoint drew the same prompts and sampled the same
    # completions as the killed run did (with 4 tasks, 2 per step, step 3 starts the second epoch).
    first = [(r["task_id"], r["completion"]) for r in killed_generations if r["step"] == from_step + 1]
    again = [(r["task_id"], r["completion"]) for r in generations if r["step"] == from_step + 1]
    assert first == again or (from_step > 2 and not first)


@pytest.mark.slow(minutes=0.8)
def test_a_run_killed_mid_sft_resumes_sft_then_runs_the_later_phases(tiny_model_dir, tmp_path):
    """SIGKILL during the SFT warm start, after one of its checkpoints: the resumed run continues SFT from that
    checkpoint (each SFT step logged once), then measures, trains and measures again."""
    out = tmp_path / "run"
    steps = 100  # tiny SFT steps are fast: enough of them that the kill lands inside the phase
    args = {"max_steps": steps, "per_device_train_batch_size": 1, "save_strategy": "steps", "save_steps": 10}
    recipe = _recipe(
        tmp_path / "r.yaml",
        tiny_model_dir,
        out,
        sft={"enabled": True, "args": {**args, "logging_steps": 1}},
        model={"gradient_checkpointing": False},
        grpo={"max_steps": 1},
    )

    def sft_checkpoint_saved() -> bool:
        return any(r["step"] > 10 for r in _records(out / "metrics.jsonl", "sft")) and bool(checkpoints(out, "sft"))

    _kill_when(recipe, sft_checkpoint_saved, tmp_path / "first.log")
    assert not (out / "state.json").exists()  # no phase had finished
    from_step = checkpoints(out, "sft")[-1][0]
    assert from_step < steps
    resumed = _resume(recipe)
    assert f"resume: sft from step {from_step}" in resumed.stderr

    records = read_jsonl(out / "metrics.jsonl")
    assert [r["phase"] for r in records] == ["sft"] * steps + ["eval_before", "grpo", "eval_after"]
    assert [r["step"] for r in records if r["phase"] == "sft"] == list(range(1, steps + 1))
    assert read_phases(out) == ["sft", "eval_before", "grpo", "eval_after"]
    state = json.loads((out / "sft" / "checkpoints" / f"checkpoint-{steps}" / "trainer_state.json").read_text())
    assert state["global_step"] == steps
    assert (out / "sft" / "final" / "adapter_model.safetensors").is_file()
    assert [r["step"] for r in read_generations(out)] == [1] * 4


def test_the_p95_length_is_the_nearest_rank():
    from azr.training.trl.trainer import _p95

    assert _p95([7]) == 7.0
    assert _p95(list(range(1, 21))) == 19.0  # the 19th of 20
    assert _p95(list(range(1, 101))) == 95.0
    assert _p95([16] * 19 + [3]) == 16.0


# ------------------------------------------------------------------------------------- text from outside, any text
def _surrogate_tasks(path: Path) -> Path:
    """Four tasks whose id, prompt and tag hold the JSON escape of a lone surrogate (as a task file may)."""
    rows = [
        {
            "id": f"t{chr(0xD800)}{i}",
            "prompt": f"Write f() returning {i}. {chr(0xDC00)}",
            "solution": f"def f():\n    return {i}\n",
            "tests": [f"assert f() == {i}"],
            "tags": [f"tag{chr(0xDBFF)}"],
        }
        for i in range(4)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))  # ASCII JSON: "\ud800" escapes
    return path


@pytest.mark.slow(minutes=0.3)  # trains the tiny model one step
def test_tasks_with_lone_surrogates_validate_check_and_train_with_their_logs_written(cli, tiny_model_dir, tmp_path):
    tasks = _surrogate_tasks(tmp_path / "tasks.jsonl")
    code, out, err = cli("data", "validate", tasks)
    assert code == 0 and "4 tasks, 4 passed" in out.splitlines()[-1], out + err
    recipe = _recipe(
        tmp_path / "r.yaml",
        tiny_model_dir,
        tmp_path / "run",
        data={"train": str(tasks), "max_tasks": 4},
        grpo={"max_steps": 1, "save_steps": 1},
    )
    code, out, err = cli("config", "check", "--config", recipe)
    assert code == 0, err
    code, out, err = cli("train", "--config", recipe)
    assert code == 0 and "Traceback" not in err, err
    records = read_generations(tmp_path / "run")
    assert records and {r["task_id"] for r in records} <= {f"t\ufffd{i}" for i in range(4)}
    assert all(r["prompt"].endswith("\ufffd") for r in records)
    summary = json.loads((tmp_path / "run" / "summary.json").read_bytes().decode("utf-8"))
    assert summary["status"] == "ok" and summary["generation_log"]["dropped"] == 0


@pytest.mark.slow(minutes=0.3)  # trains the tiny model one step
def test_a_run_whose_generation_log_fails_says_so_in_its_summary_and_exit_status(
    cli, tiny_model_dir, tmp_path, monkeypatch, caplog
):
    import azr.logs

    def broken(self, record):
        raise TypeError("cannot write this record")

    monkeypatch.setattr(azr.logs.GenerationLog, "_write", broken)
    recipe = _recipe(tmp_path / "r.yaml", tiny_model_dir, tmp_path / "run", grpo={"max_steps": 1, "save_steps": 1})
    code, _, err = cli("train", "--config", recipe)
    assert code == 1, err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "failed"
    assert summary["generation_log"] == {"written": 0, "dropped": 4, "error": "TypeError: cannot write this record"}
    assert (tmp_path / "run" / "final" / "adapter_config.json").is_file()  # the model is saved all the same
    errors = [
        r.getMessage() for r in caplog.records if r.levelname == "ERROR" and "generation log failed" in r.getMessage()
    ]
    assert errors == ["generation log failed: 4 records lost (TypeError: cannot write this record); see summary.json"]
