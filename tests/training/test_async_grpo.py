"""Asynchronous GRPO through the real trainer on the tiny model: the pipeline (`azr.rollouts.pipeline`) samples
ahead from a versioned engine, TRL's round takes its completions through `rollout_func`, and the records say how
stale each trained batch was and how TRL's importance-sampling correction weighed it.

The engine is a stand-in for the vLLM sidecar at its one edge (no server): at each sync it keeps a copy of the
policy as that version, and a sample of version v carries v's own log-probabilities of a fixed completion, so the
importance ratio TRL computes is the policy now against the version that drew the sample."""

from __future__ import annotations

import copy
import json
import math
import threading

import pytest

from azr.data.tasks import load_tasks
from azr.training import grpo_dataset

MAX_STALENESS = 1


class VersionedEngine:
    """`sync_weights` / `generate` (TRL's backend contract) and `complete` over the newest version (the pipeline's
    token sampler)."""

    def __init__(self, trainer, tokens: list[int]):
        self.trainer, self.tokens = trainer, tokens
        self.snapshots: dict[int, object] = {}
        self.drawn: list[tuple[int, list[float]]] = []  # (version, its logprobs of the completion) per prompt
        self.lock = threading.Lock()

    def serve_versions(self):
        pass

    def sync_weights(self):
        snapshot = copy.deepcopy(self.trainer.model).eval()
        with self.lock:
            self.snapshots[self.trainer.state.global_step] = snapshot

    @property
    def latest_version(self):
        return max(self.snapshots)

    def complete(self, contexts, sampling):
        import torch

        from azr.rollouts import Continuation

        with self.lock:
            version = self.latest_version
            model = self.snapshots[version]
        n, out = max(sampling.n, 1), []
        with torch.no_grad():
            for prompt in contexts[::n]:
                x = torch.tensor([prompt + self.tokens])
                logits = model(input_ids=x).logits[0, len(prompt) - 1 : -1] / self.trainer.temperature
                picked = logits.log_softmax(-1).gather(-1, torch.tensor(self.tokens)[:, None])[:, 0].tolist()
                self.drawn.append((version, picked))
                out += [Continuation(list(self.tokens), "", "stop", picked, version=version)] * n
        return out

    def generate(self, prompts, images, num_generations, profiler=None):
        raise AssertionError("asynchronous GRPO samples through the pipeline, not TRL's generate")


@pytest.fixture(scope="module")
def run(tiny_model_dir, tmp_path_factory):
    from transformers import TrainerCallback
    from trl import GRPOConfig

    from azr.config import ModelConfig, SamplingConfig
    from azr.models.loading import build_model_and_tokenizer
    from azr.rollouts import GroupSampler, RolloutFilter
    from azr.training.grpo import asynchronous, grpo_rows
    from azr.training.trl.generation import use_generation_backend
    from azr.training.trl.trainer import AZRGRPOTrainer

    tasks = load_tasks("train")[:4]
    model, tokenizer = build_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))
    logs: list[dict] = []
    records: list[dict] = []

    class Keep(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            kept.append(dict(logs or {}))

    kept = logs
    sampling = RolloutFilter(
        SamplingConfig(max_staleness=MAX_STALENESS),
        GroupSampler({t.id: r for t, r in zip(tasks, grpo_rows(tasks), strict=True)}),
        composes=False,
    )
    trainer = AZRGRPOTrainer(
        model=model,
        reward_funcs=[lambda completions, **kw: [float(i % 2) for i in range(len(completions))]],
        args=GRPOConfig(
            output_dir=str(tmp_path_factory.mktemp("async") / "checkpoints"),
            use_cpu=True,
            bf16=False,
            num_generations=2,
            per_device_train_batch_size=4,
            max_completion_length=8,
            max_steps=4,
            logging_steps=1,
            learning_rate=5e-2,  # large: versions must differ for the correction to show
            report_to="none",
            disable_tqdm=True,
            vllm_importance_sampling_mode="token_truncate",
            vllm_importance_sampling_clip_max=2.0,
        ),
        train_dataset=grpo_dataset(tasks),
        processing_class=tokenizer,
        callbacks=[Keep()],
        sampling=sampling,
        observers=[lambda batch: records.extend(batch.records())],
    )
    engine = VersionedEngine(trainer, [*tokenizer("def f(x): return x")["input_ids"][:5], tokenizer.eos_token_id])
    use_generation_backend(trainer, engine)
    sampling.pipeline = pipeline = asynchronous(trainer, engine, MAX_STALENESS)
    try:
        trainer.train()
    finally:
        pipeline.close()
    return engine, [entry for entry in logs if "loss" in entry], records


@pytest.mark.slow  # trains the tiny model
def test_each_step_trains_samples_within_the_bound_and_says_how_stale_they_were(run):
    engine, logs, records = run
    assert len(logs) == 4
    for entry in logs:
        shares = [entry[f"async/staleness_{k}"] for k in range(MAX_STALENESS + 1)]
        assert math.isclose(sum(shares), 1.0) and entry["async/dropped_samples"] == 0, entry
        assert 0 <= entry["async/staleness_mean"] <= MAX_STALENESS
        assert {"sampling/importance_sampling_ratio/mean", "async/importance_outside_band_share"} <= entry.keys()
    assert sum(entry["async/staleness_1"] for entry in logs) > 0  # it ran ahead: some samples were one version old
    # Every record is tagged with the version that drew it, never more than the bound behind the step it trains.
    assert all(0 <= (r["step"] - 1) - r["policy_version"] <= MAX_STALENESS for r in records)
    json.dumps(records)  # records stay JSON-ready
    assert {version for version, _ in engine.drawn} <= set(engine.snapshots)  # only versions it served


@pytest.mark.slow  # trains the tiny model
def test_the_correction_weighs_stale_samples_against_the_version_that_drew_them(run):
    _, logs, _ = run
    stale = [entry for entry in logs if entry["async/staleness_1"] > 0]
    # A sample drawn by the weights it trains has ratio 1 exactly (the engine's copy is the policy); a stale one
    # does not, after an update with this learning rate.
    assert any(
        entry["sampling/importance_sampling_ratio/min"] < 0.999
        or entry["sampling/importance_sampling_ratio/max"] > 1.001
        for entry in stale
    ), stale
    assert all(entry["sampling/importance_sampling_ratio/max"] <= 2.0 + 1e-6 for entry in logs)  # truncated at the cap
