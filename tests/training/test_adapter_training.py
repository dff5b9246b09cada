"""Every adapter kind and option trains on the tiny model: under the SFT warm start and under GRPO, exactly the
expected parameters are trainable, each moves, and nothing else does. The seed project's gates never learned
because a warm-up wrote their starting values back at every step; here a callback checks, at every optimizer step,
that each trainable tensor still holds what the previous step left in it (nothing writes parameters between
steps). Then, end to end through `azr train`, each kind saves in peft's format, resumes from a checkpoint, writes a
model card that names it, and loads in `azr eval --adapter`. Last, on a 4-bit base, IA³ scales and norm weights
move only because azr keeps them in float32 (TRL's bfloat16 cast alone rounds every update away).

Real parts: the tiny model, TRL's trainers, peft, bitsandbytes on the CPU, the bwrap sandbox (end to end)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
import yaml
from recipes import tiny_recipe, write_recipe
from transformers import TrainerCallback

from azr.config import AdapterConfig, ModelConfig, load_config
from azr.data import load_tasks
from azr.training import grpo_dataset

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*(is_)?gradient_checkpointing.*:FutureWarning"),
    pytest.mark.filterwarnings("ignore:Unsupported layer type .*RMSNorm:UserWarning"),  # peft, on LN tuning
]


def distinct_chars(completions, **columns):
    """A reward that differs between almost any two sampled completions, so every GRPO group has an advantage
    (with a constant reward GRPO's gradient is zero and nothing could move)."""
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [float(len(set(text))) for text in texts]


def _lora(name: str) -> bool:
    return ".lora_A." in name or ".lora_B." in name


# variant -> (adapter section, which parameter names must be exactly the trainable ones)
VARIANTS = {
    "lora": (AdapterConfig(r=4), _lora),
    "lora-dora-rslora": (
        AdapterConfig(r=4, dora=True, rslora=True),
        lambda n: _lora(n) or ".lora_magnitude_vector." in n,
    ),
    "lora-bias-all": (AdapterConfig(r=4, bias="all"), lambda n: _lora(n) or n.endswith(".bias")),
    "lora-bias-lora_only": (  # k_proj and v_proj have biases too, but are not adapted here
        AdapterConfig(r=4, bias="lora_only", target_modules=["q_proj", "o_proj"]),
        lambda n: _lora(n) or n.endswith("q_proj.base_layer.bias"),
    ),
    "lora-train_norms": (AdapterConfig(r=4, train_norms=True), lambda n: _lora(n) or ".modules_to_save." in n),
    "ia3": (AdapterConfig(kind="ia3"), lambda n: ".ia3_l." in n),
    "ln_tuning": (AdapterConfig(kind="ln_tuning"), lambda n: ".ln_tuning_layers." in n),
    "none": (AdapterConfig(kind="none"), lambda n: True),
}
# Families of trainable tensors that must each be present (so a predicate above cannot match nothing).
FAMILIES = {
    "lora": ["lora_B"],
    "lora-dora-rslora": ["lora_B", "lora_magnitude_vector"],
    "lora-bias-all": ["lora_B", "k_proj.base_layer.bias"],
    "lora-bias-lora_only": ["lora_B", "q_proj.base_layer.bias"],
    "lora-train_norms": ["lora_B", "input_layernorm.modules_to_save", "model.norm.modules_to_save"],
    "ia3": ["q_proj.ia3_l", "v_proj.ia3_l", "down_proj.ia3_l"],  # peft's IA³ table for Qwen2
    "ln_tuning": ["input_layernorm.ln_tuning", "post_attention_layernorm.ln_tuning", "model.norm.ln_tuning"],
    "none": ["embed_tokens"],
}


class ParameterTrace(TrainerCallback):
    """Snapshots every parameter at the start, and the trainable ones around every optimizer step, of the model
    the trainer hands its callbacks (the peft-wrapped one)."""

    def __init__(self):
        self.steps: list[tuple[dict, dict]] = []  # (before the optimizer step, after it)

    @staticmethod
    def _snapshot(model, trainable_only=True):
        params = model.named_parameters()
        return {n: p.detach().float().clone() for n, p in params if p.requires_grad or not trainable_only}

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.initial = self._snapshot(model, trainable_only=False)

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        self.steps.append((self._snapshot(model), {}))

    def on_optimizer_step(self, args, state, control, model=None, **kwargs):
        self.steps[-1] = (self.steps[-1][0], self._snapshot(model))


def _check_trace(trace: ParameterTrace, model, variant: str) -> None:
    expected = VARIANTS[variant][1]
    names = [n for n, _ in model.named_parameters()]
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {n for n in names if expected(n)}
    for family in FAMILIES[variant]:
        assert any(family in n for n in trainable), f"no trainable {family} in {variant}"
    assert len(trace.steps) == 2
    previous = {n: trace.initial[n] for n in trainable}
    for before, after in trace.steps:
        # Nothing wrote the parameters between two optimizer steps: no warm-up, no reset to starting values.
        assert all(torch.equal(before[n], previous[n]) for n in trainable)
        assert any(not torch.equal(before[n], after[n]) for n in trainable)  # each step moved something
        previous = after
    final = dict(model.named_parameters())
    still = [n for n in trainable if torch.equal(final[n].detach().float(), trace.initial[n])]
    assert not still, f"never moved: {still[:5]}"
    assert all(torch.equal(final[n].detach().float(), trace.initial[n]) for n in names if n not in trainable)


def _grpo_args(tmp_path: Path):
    """Two GRPO steps of 2 prompts x 4 completions of 8 tokens on the CPU, at a learning rate that moves things."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(tmp_path / "checkpoints"),
        use_cpu=True,
        bf16=False,
        num_generations=4,
        per_device_train_batch_size=8,
        max_completion_length=8,
        max_steps=2,
        learning_rate=1e-4,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
    )


def _peft_files(folder: Path, variant: str) -> None:
    """Saved in peft's format (or, for kind none, as a full model), with the trained tensors."""
    from safetensors.torch import load_file

    if variant == "none":
        assert (folder / "model.safetensors").is_file() and not (folder / "adapter_config.json").exists()
        return
    saved = json.loads((folder / "adapter_config.json").read_text())
    assert saved["peft_type"] == {"ia3": "IA3", "ln_tuning": "LN_TUNING"}.get(variant, "LORA")
    tensors = load_file(str(folder / "adapter_model.safetensors"))
    for family in FAMILIES[variant]:
        assert any(family.split(".")[0] in k for k in tensors), (family, sorted(tensors)[:5])


@pytest.mark.slow  # trains the tiny model
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_each_kind_trains_under_grpo_and_only_its_parameters_move(tiny_model_dir, tmp_path, variant):
    from azr.models import build_model_and_tokenizer, build_peft_config
    from azr.training.trl.trainer import AZRGRPOTrainer

    adapter = VARIANTS[variant][0]
    model, tokenizer = build_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir), adapter=adapter))
    trainer = AZRGRPOTrainer(
        model=model,
        reward_funcs=[distinct_chars],
        args=_grpo_args(tmp_path),
        train_dataset=grpo_dataset(load_tasks("train")[:4]),
        processing_class=tokenizer,
        peft_config=build_peft_config(adapter, model),
    )
    trace = ParameterTrace()
    trainer.add_callback(trace)
    trainer.train()
    _check_trace(trace, trainer.model, variant)
    trainer.save_model(str(tmp_path / "final"))
    _peft_files(tmp_path / "final", variant)


@pytest.mark.slow  # trains the tiny model
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_each_kind_trains_under_the_sft_warm_start_and_only_its_parameters_move(tiny_model_dir, tmp_path, variant):
    from azr.models import build_model_and_tokenizer, build_peft_config
    from azr.training import run_sft, sft_args, sft_dataset

    adapter = VARIANTS[variant][0]
    model, tokenizer = build_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir), adapter=adapter))
    dataset = sft_dataset(load_tasks("train")[:8], tokenizer, {"enable_thinking": False})
    sft = {"max_steps": 2, "per_device_train_batch_size": 4, "learning_rate": 1e-3, "save_strategy": "no"}
    # gradient checkpointing has its own test in test_train.py; off saves time here
    fields = [f"model.name_or_path={tiny_model_dir}", "model.gradient_checkpointing=false"]
    recipe = load_config(None, [*fields, f"output_dir={tmp_path}", "sft.enabled=true"])
    args = sft_args(dataclasses.replace(recipe, sft=dataclasses.replace(recipe.sft, args=sft)), cpu=True)
    trace = ParameterTrace()
    trace.trainer = None  # run_sft hands the trainer to callbacks that ask for it
    run_sft(model, tokenizer, dataset, args, build_peft_config(adapter, model), [trace], None, tmp_path / "final")
    _check_trace(trace, trace.trainer.model, variant)
    _peft_files(tmp_path / "final", variant)


# ------------------------------------------------------------------------------------------------- end to end
REWARD_MODULE = """
def distinct_chars(completions, **columns):
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [float(len(set(text))) for text in texts]
"""
KINDS = {
    "lora": {"r": 4, "dora": True, "rslora": True, "bias": "all", "train_norms": True},
    "ia3": {"kind": "ia3"},
    "ln_tuning": {"kind": "ln_tuning"},
}


def _run_recipe(tmp_path: Path, model_dir: Path, adapter: dict) -> Path:
    recipe = tiny_recipe(
        model_dir,
        tmp_path / "run",
        model={"adapter": adapter},
        rewards=[{"name": "azr_adapter_test_rewards:distinct_chars"}],
        sft={"enabled": True, "args": {"max_steps": 2, "per_device_train_batch_size": 4, "learning_rate": 1e-3}},
        grpo={
            "num_generations": 4,
            "per_device_train_batch_size": 8,
            "max_completion_length": 12,
            "save_steps": 1,
            "learning_rate": 1e-4,
        },
        logging={"generations": False},
        sandbox={"workers": 1},
    )
    return write_recipe(tmp_path / "recipe.yaml", recipe)


def _tensors(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "adapter_model.safetensors"))


@pytest.mark.slow  # about 1.5 min per kind on two idle cores: SFT, GRPO, a resumed GRPO step and an eval
@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_saves_resumes_describes_itself_and_loads_in_eval(cli, tiny_model_dir, tmp_path, monkeypatch, kind):
    (tmp_path / "azr_adapter_test_rewards.py").write_text(REWARD_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    recipe = _run_recipe(tmp_path, tiny_model_dir, KINDS[kind])
    code, _, err = cli("train", "--config", recipe)
    assert code == 0, err[-3000:]
    out = tmp_path / "run"
    warm, final = _tensors(out / "sft" / "final"), _tensors(out / "final")
    assert warm.keys() == final.keys() and warm
    peft_type = json.loads((out / "final" / "adapter_config.json").read_text())["peft_type"]
    assert peft_type == {"lora": "LORA", "ia3": "IA3", "ln_tuning": "LN_TUNING"}[kind]
    # SFT moved every tensor from its start (B from 0, IA³ and norms from 1), and GRPO moved them on.
    starts = [k for k, v in warm.items() if ("lora_B" in k or "ia3_l" in k or "norm" in k) and torch.all(v == 0)]
    assert not starts
    for name, tensor in warm.items():
        if "ia3_l" in name or "ln_tuning" in name or "modules_to_save" in name:
            assert not torch.all(tensor == 1.0), name
    assert any(not torch.equal(warm[k], final[k]) for k in warm)
    card = (out / "final" / "README.md").read_text()
    assert f"- Adapter: kind {kind}; target modules " in card
    if kind == "lora":
        assert "DoRA; rsLoRA; bias all (BitFit); norm weights trained (modules_to_save)" in card
    if kind == "ia3":
        assert "target modules down_proj, q_proj, v_proj; feed-forward modules down_proj" in card

    # Resume GRPO from its first checkpoint: the adapter loads into the trainer and training ends where it did.
    code, _, err = cli("train", "--config", recipe, "--resume-from", out / "checkpoints" / "checkpoint-1")
    assert code == 0, err[-3000:]
    grpo = [
        r["step"] for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if r["phase"] == "grpo"
    ]
    assert grpo == [1, 2]  # step 2 logged once: pruned, then trained again from checkpoint-1
    again = _tensors(out / "final")
    for name in final:
        assert torch.allclose(again[name], final[name], atol=1e-6), name

    report = _eval_of_final(cli, out, "--model", tiny_model_dir)
    assert report["settings"]["model"]["adapter"] == str(out / "final")


@pytest.mark.slow  # 17 s here: SFT of all weights, GRPO with a LoRA, a resumed GRPO step
def test_a_warm_start_of_all_weights_becomes_the_base_of_a_fresh_grpo_adapter(
    cli, tiny_model_dir, tmp_path, monkeypatch
):
    """sft.full_weights: the warm start saves a whole model, GRPO trains a new LoRA on it (B from zero), the final
    adapter names the warm-started folder as its base, and a resumed GRPO loads the adapter onto that base."""
    from safetensors.torch import load_file

    (tmp_path / "azr_adapter_test_rewards.py").write_text(REWARD_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    recipe = _run_recipe(tmp_path, tiny_model_dir, {"r": 4})
    body = yaml.safe_load(recipe.read_text())
    body["sft"]["full_weights"] = True
    recipe.write_text(yaml.safe_dump(body))
    code, _, err = cli("train", "--config", recipe)
    assert code == 0, err[-3000:]
    out = tmp_path / "run"
    warm = out / "sft" / "final"
    assert not (warm / "adapter_config.json").exists()
    base, trained = load_file(str(tiny_model_dir / "model.safetensors")), load_file(str(warm / "model.safetensors"))
    assert any(not torch.equal(base[k], trained[k]) for k in base)  # every weight could move, and some did
    config = json.loads((out / "final" / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["base_model_name_or_path"] == str(warm.resolve())
    final = _tensors(out / "final")
    assert all(k.count("lora_") == 1 for k in final) and any(
        not torch.all(v == 0) for k, v in final.items() if "lora_B" in k
    )
    assert f"- Base model: `{warm.resolve()}`" in (out / "final" / "README.md").read_text()
    code, _, err = cli("train", "--config", recipe, "--resume-from", out / "checkpoints" / "checkpoint-1")
    assert code == 0, err[-3000:]
    again = _tensors(out / "final")
    for name in final:
        assert torch.allclose(again[name], final[name], atol=1e-6), name

    # azr eval of the adapter through the recipe puts it on the warm start's weights, not on the recipe's model
    report = _eval_of_final(cli, out, "--config", recipe)
    assert report["settings"]["model"]["name_or_path"] == str(warm.resolve())


def _eval_of_final(cli, out, *source) -> dict:
    """`azr eval` of the run's final adapter on two held-out tasks, greedy and short: its report."""
    tasks = out / "two.jsonl"
    tasks.write_text("".join(json.dumps(t.to_json()) + "\n" for t in load_tasks("held-out")[:2]))
    flags = ["--dataset", tasks, "--temperature", "0", "--max-new-tokens", "8", "--output-dir", out / "eval"]
    code, _, err = cli("eval", *source, "--adapter", out / "final", *flags)
    assert code == 0, err[-3000:]
    return json.loads((out / "eval" / "report.json").read_text())


# --------------------------------------------------------------------------------------------- 4-bit base
@pytest.mark.slow  # trains the tiny model
@pytest.mark.parametrize("kind", ["ia3", "ln_tuning"])
def test_on_a_4bit_base_ia3_scales_and_norms_move_only_in_float32(tiny_model_dir, tmp_path, kind):
    """The measurement behind `keep_vectors_fp32`: TRL casts trainable parameters of a quantized model to bfloat16,
    where a step at 1.0 is 2^-7; Adam's steps (about the learning rate) round away and the vectors stay exactly
    at their start. azr's trainer keeps them in float32, and they move."""
    pytest.importorskip("bitsandbytes", reason="a 4-bit base needs bitsandbytes (pip install 'azr[qlora]')")
    from trl import GRPOTrainer

    from azr.models import build_model_and_tokenizer, build_peft_config
    from azr.training.trl.trainer import AZRGRPOTrainer

    adapter = AdapterConfig(kind=kind)
    moved = {}
    for trainer_class in (GRPOTrainer, AZRGRPOTrainer):
        cfg = ModelConfig(name_or_path=str(tiny_model_dir), quantization="4bit", adapter=adapter)
        model, tokenizer = build_model_and_tokenizer(cfg)
        trainer = trainer_class(
            model=model,
            reward_funcs=[distinct_chars],
            args=_grpo_args(tmp_path),  # lr 1e-4: ten times the recipes' LoRA rate, 1/40 of a bf16 step at 1.0
            train_dataset=grpo_dataset(load_tasks("train")[:4]),
            processing_class=tokenizer,
            peft_config=build_peft_config(adapter, model),
        )
        vectors = {n: p for n, p in trainer.model.named_parameters() if p.requires_grad}
        dtypes = {p.dtype for p in vectors.values()}
        start = {n: p.detach().float().clone() for n, p in vectors.items()}
        trainer.train()
        moved[trainer_class.__name__] = (dtypes, sum(not torch.equal(p.float(), start[n]) for n, p in vectors.items()))
    assert moved["GRPOTrainer"] == ({torch.bfloat16}, 0)  # TRL's cast alone: not one vector moved
    dtypes, count = moved["AZRGRPOTrainer"]
    assert dtypes == {torch.float32} and count == len(vectors)


@pytest.mark.slow  # an optimizer step on the tiny model
def test_norms_kept_in_float32_hand_the_next_layer_its_own_dtype(tiny_model_dir, tmp_path):
    """On a bfloat16 base (a GPU's default) the trained norm copies are held in float32; their output is cast back,
    so the bfloat16 layers after them still run (without autocast), and the norms move."""
    from azr.models import build_model_and_tokenizer, build_peft_config, keep_vectors_fp32

    adapter = AdapterConfig(r=4, train_norms=True)
    cfg = ModelConfig(name_or_path=str(tiny_model_dir), dtype="bfloat16", adapter=adapter)
    model, tokenizer = build_model_and_tokenizer(cfg)
    import peft

    model = peft.get_peft_model(model, build_peft_config(adapter, model))
    kept = keep_vectors_fp32(model)
    assert kept and all(".modules_to_save." in n for n in kept)
    norms = {n: p for n, p in model.named_parameters() if ".modules_to_save." in n}
    assert {p.dtype for p in norms.values()} == {torch.float32}
    start = {n: p.detach().clone() for n, p in norms.items()}
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    batch = tokenizer(["def f(x):\n    return x"], return_tensors="pt")
    out = model(**batch, labels=batch["input_ids"])
    assert out.logits.dtype == torch.bfloat16
    out.loss.backward()
    optimizer.step()
    assert all(not torch.equal(p, start[n]) for n, p in norms.items())
