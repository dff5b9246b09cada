"""Sampling a model in memory (`azr.evaluation.measure.generate_completions`): the evaluation draws from its own
seed and leaves every torch generator as it found it, the CPU's and each CUDA device's, so GRPO samples next what
it would have sampled without it."""

from __future__ import annotations

import pytest

from azr.data.tasks import load_tasks
from azr.evaluation.measure import Sampling, generate_completions

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    return model, transformers.AutoTokenizer.from_pretrained(tiny_model_dir)


def sample(tiny, seed: int) -> list[str]:
    model, tokenizer = tiny
    tasks = load_tasks("held-out")[:2]
    return generate_completions(model, tokenizer, tasks, Sampling(n=1, max_new_tokens=4, seed=seed), {})


def test_the_cpu_generator_is_restored_and_the_samples_follow_the_seed(tiny):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    first = sample(tiny, seed=7)
    assert torch.equal(torch.rand(3), expected)  # what comes next is what would have come without the evaluation
    torch.manual_seed(999)
    assert sample(tiny, seed=7) == first  # whatever ran before


def test_every_cuda_devices_generator_is_saved_and_restored(tiny, monkeypatch):
    # No GPU here: CUDA is faked as available with two devices, and the generator calls are recorded.
    saved = [torch.tensor([1], dtype=torch.uint8), torch.tensor([2], dtype=torch.uint8)]
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: calls.append("get") or saved)
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", lambda states: calls.append(("set", states)))
    monkeypatch.setattr(torch.cuda, "manual_seed_all", lambda seed: calls.append(("seed", seed)))
    sample(tiny, seed=7)
    assert calls[0] == "get" and ("seed", 7) in calls
    assert calls[-1] == ("set", saved)  # restored last, with exactly what was saved
