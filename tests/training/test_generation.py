"""The hook adapter mode uses in TRL's GRPOTrainer (private to TRL 1.16, so pinned here): a backend set as the
trainer's `vllm_generation` is synced once per optimizer step, asked for completions of token-id prompts with the
group size, and the logprobs it returns feed TRL's importance-sampling correction.

The backend here is a stand-in at the expensive edge (no server): it returns a fixed completion and the policy's
own logprobs of it, shifted by a known amount, so the ratio TRL logs says that TRL read them."""

from __future__ import annotations

import math

import pytest

from azr.data.tasks import load_tasks
from azr.training import grpo_dataset


class FakeBackend:
    """TRL's VLLMGeneration contract: `sync_weights()` and `generate(prompts, images, num_generations, profiler)`."""

    def __init__(self, trainer, tokens: list[int], shift: float):
        self.trainer, self.tokens, self.shift = trainer, tokens, shift
        self.syncs: list[int] = []
        self.calls: list[tuple[list[list[int]], int]] = []

    def sync_weights(self):
        self.syncs.append(self.trainer.state.global_step)

    def generate(self, prompts, images, num_generations, profiler=None):
        import torch

        self.calls.append((prompts, num_generations))
        model = self.trainer.model
        logprobs = []
        with torch.no_grad(), profiler:
            for prompt in prompts:
                ids = torch.tensor([prompt + self.tokens])
                logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1] / self.trainer.temperature
                picked = logits.log_softmax(-1).gather(-1, torch.tensor(self.tokens)[:, None])[:, 0]
                logprobs.append([[lp + self.shift] for lp in picked.tolist()])
        return prompts, [list(self.tokens)] * len(prompts), logprobs, None


SHIFT = 0.25  # the stand-in claims every sampled token is this many nats likelier than the policy says


@pytest.fixture(scope="module")
def run(tiny_model_dir, tmp_path_factory):
    """Two GRPO steps on the tiny model, a trainer built with use_vllm=False and switched to a FakeBackend by the
    hook; (backend, the step logs, tokenizer)."""
    from transformers import TrainerCallback
    from trl import GRPOConfig

    from azr.config import ModelConfig
    from azr.models.loading import build_model_and_tokenizer
    from azr.training.trl.generation import use_generation_backend
    from azr.training.trl.trainer import AZRGRPOTrainer

    model, tokenizer = build_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))
    logs: list[dict] = []

    class Keep(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            kept.append(dict(logs or {}))

    kept = logs
    trainer = AZRGRPOTrainer(
        model=model,
        reward_funcs=[lambda completions, **kw: [float(i % 2) for i in range(len(completions))]],
        args=GRPOConfig(
            output_dir=str(tmp_path_factory.mktemp("hook") / "checkpoints"),
            use_cpu=True,
            bf16=False,
            num_generations=2,
            per_device_train_batch_size=4,
            max_completion_length=8,
            max_steps=2,
            logging_steps=1,
            learning_rate=1e-3,
            report_to="none",
            disable_tqdm=True,
        ),
        train_dataset=grpo_dataset(load_tasks("train")[:4]),
        processing_class=tokenizer,
        callbacks=[Keep()],
    )
    backend = FakeBackend(trainer, [*tokenizer("def f(x): return x")["input_ids"][:5], tokenizer.eos_token_id], SHIFT)
    use_generation_backend(trainer, backend)
    trainer.train()
    return backend, [entry for entry in logs if "loss" in entry], tokenizer


@pytest.mark.slow  # trains the tiny model
def test_trl_syncs_once_per_step_and_asks_for_groups_of_token_id_prompts(run):
    backend, _, tokenizer = run
    assert backend.syncs == [0, 1]  # before the first batch, then after each optimizer step
    assert len(backend.calls) == 2
    for prompts, num_generations in backend.calls:
        assert num_generations == 2
        assert len(prompts) == 4 and prompts[0] == prompts[1] and prompts[2] == prompts[3]  # each prompt twice in a row
        assert all(isinstance(t, int) for t in prompts[0])
        text = tokenizer.decode(prompts[0])
        assert text.startswith("<|im_start|>") and text.endswith("<|im_start|>assistant\n")  # the chat template


@pytest.mark.slow  # trains the tiny model
def test_trl_corrects_with_the_logprobs_the_backend_returns(run):
    backend, logs, _ = run
    assert len(logs) == 2
    for entry in logs:
        assert math.isclose(entry["sampling/sampling_logp_difference/mean"], SHIFT, rel_tol=1e-3)
        # TRL's default correction is per sequence: the ratio of the whole completion's probabilities
        expected = math.exp(-SHIFT * len(backend.tokens))
        assert math.isclose(entry["sampling/importance_sampling_ratio/mean"], expected, rel_tol=1e-3), entry
