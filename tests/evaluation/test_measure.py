"""Sampling a model in memory (`azr.evaluation.measure.generate_completions`): the evaluation draws from its own
seed and leaves every torch generator as it found it, the CPU's and each CUDA device's, so GRPO samples next what
it would have sampled without it. Scoring what was sampled (`score_completions`) goes through the run's Rubric."""

from __future__ import annotations

import pytest

from azr.data.tasks import load_tasks
from azr.evaluation.measure import Sampling, generate_completions, score_completions

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


def test_the_pass_rate_and_reward_are_the_rubrics_as_episodes_are_scored(grader):
    """Issue 39: the pass rate and the held-out reward go through `Rubric.score`, as GRPO's episodes do: the verdicts
    come from the rubric's grader even when no reward of the rubric runs the tests (a format-only rubric), and the
    mean reward is the mean of the totals `CodeEnvironment` gives the same answers."""
    from azr.envs import CodeEnvironment, TaskPrompt
    from azr.prompts import reference_answer
    from azr.rewards import Rubric, functions
    from azr.rollouts import Episode, Turn

    tasks = load_tasks("held-out")[:2]
    completions = [reference_answer(t.solution, t.entry_point) for t in tasks for _ in range(2)]
    completions[1] = "```python\nx = 1\n```"  # runs, defines nothing: fails, and not the strict format
    rubric = Rubric((functions.FormatReward(),), (0.5,), grader)
    result = score_completions(rubric, tasks, completions)
    assert result["pass_rate"] == 0.75 and result["graded"] == 4 and result["tasks_solved"] == 2
    assert result["reward"] == pytest.approx(0.5 * 3 / 4)
    episodes = []
    for i, text in enumerate(completions):
        task = tasks[i // 2]
        turn = Turn("policy", [{"role": "assistant", "content": text}], text=text)
        episodes.append(Episode(task.id, [], turns=[turn], finish_reason="done", task=TaskPrompt.of(task)))
    CodeEnvironment(rubric).score(episodes)
    assert [e.info["grade"]["passed"] for e in episodes] == [True, False, True, True]
    assert result["reward"] == pytest.approx(sum(e.reward for e in episodes) / len(episodes))
