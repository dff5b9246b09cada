"""The token samplers outside GRPO's round: HF generate on a model in memory and the trainer's vLLM backend each
continue token ids, and `sample_groups` over either yields one group per prompt with its token ids, decoded texts
and the policy version that drew it; the evaluation's samples carry that version, and the tool loop's local turn is
one such group.

Real parts: the tiny model generates; the vLLM backend is a scripted double at its contract (`LoraSync`'s request
fields and TRL's `generate`), the expensive edge.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from azr.data import Problem, load_tasks
from azr.evaluation.samplers import Draws
from azr.prompts import chat_messages
from azr.rollouts import (
    BackendSampler,
    ChatTokens,
    GenerateSampler,
    Prompt,
    Sampling,
    TrainerSampler,
    eos_ids,
    sample_groups,
    trainer_sampler,
)
from azr.training.trl.private import TrainerBatches

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TASKS = load_tasks("held-out")[:2]


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    return model, transformers.AutoTokenizer.from_pretrained(tiny_model_dir)


def _prompts() -> list[Prompt]:
    return [Prompt(t.id, chat_messages(t.prompt)) for t in TASKS]


def test_generate_yields_a_group_per_prompt_with_its_ids_texts_and_version(tiny):
    model, tokenizer = tiny
    sampler, chat = GenerateSampler(model, tokenizer, version=lambda: 7), ChatTokens(tokenizer)
    groups = sample_groups(sampler, chat, _prompts(), Sampling(n=3, max_new_tokens=6, seed=1, batch_size=4))
    assert [g.task_id for g in groups] == [t.id for t in TASKS] and all(g.version == 7 for g in groups)
    for group, prompt in zip(groups, _prompts(), strict=True):
        expected = tokenizer(chat.render(prompt.messages), add_special_tokens=False)["input_ids"]
        assert group.prompt_ids == expected  # the chat template's tokens, without the batch's left padding
        assert len(group.completion_ids) == len(group.texts) == 3
        assert all(1 <= len(ids) <= 6 for ids in group.completion_ids)
        decoded = [tokenizer.decode(ids, skip_special_tokens=True) for ids in group.completion_ids]
        assert decoded == group.texts  # the texts are these token ids
        assert group.rewards == [] and group.sampler_logprobs is None  # unscored; the policy itself sampled
    again = sample_groups(sampler, chat, _prompts(), Sampling(n=3, max_new_tokens=6, seed=1, batch_size=4))
    assert [g.completion_ids for g in again] == [g.completion_ids for g in groups]  # the seed decides


class _LoraSync:
    """Adapter mode's backend at its contract: request fields in `sampling`, each prompt n times in a row, one
    logprob per token in TRL's nesting."""

    def __init__(self):
        self.sampling = {"temperature": 0.7, "max_tokens": 128}
        self.calls, self.syncs = [], 0

    def sync_weights(self):
        self.syncs += 1

    def generate(self, prompts, images, num_generations, profiler=None):
        self.calls.append((len(prompts), num_generations, dict(self.sampling)))
        ids = [[40 + i, 50 + i] for i in range(len(prompts))]
        return prompts, ids, [[[-0.5], [-1.0 - i]] for i in range(len(prompts))], None


def _trainer(backend, tokenizer, step: int):
    return SimpleNamespace(
        vllm_generation=backend,
        use_vllm=backend is not None,
        processing_class=tokenizer,
        _last_loaded_step=-1,
        state=SimpleNamespace(global_step=step),
        accelerator=SimpleNamespace(unwrap_model=lambda m: m),
        model="the policy",
    )


def test_the_trainers_backend_yields_groups_with_the_samplers_logprobs_at_the_evaluations_settings(tiny):
    _, tokenizer = tiny
    backend = _LoraSync()
    view = TrainerBatches(_trainer(backend, tokenizer, step=5))
    sampler = trainer_sampler(view)
    assert isinstance(sampler, BackendSampler)
    groups = sample_groups(sampler, ChatTokens(tokenizer), _prompts(), Sampling(n=2, max_new_tokens=9, temperature=0.3))
    assert backend.calls == [(4, 2, {"temperature": 0.3, "max_tokens": 9})] and backend.syncs == 1
    assert backend.sampling == {"temperature": 0.7, "max_tokens": 128}  # GRPO's settings again
    first, second = groups
    assert (first.version, second.version) == (5, 5)  # five optimizer steps taken: the weights synced now
    assert first.completion_ids == [[40, 50], [41, 51]] and second.completion_ids == [[42, 52], [43, 53]]
    assert first.sampler_logprobs == [[-0.5, -1.0], [-0.5, -2.0]]
    assert first.texts == [tokenizer.decode([40, 50], skip_special_tokens=True), tokenizer.decode([41, 51])]
    assert (
        first.prompt_ids
        == tokenizer(
            tokenizer.apply_chat_template(_prompts()[0].messages, tokenize=False, add_generation_prompt=True),
            add_special_tokens=False,
        )["input_ids"]
    )


def test_without_a_backend_the_trainer_samples_with_generate_tagged_with_the_steps_taken(tiny):
    model, tokenizer = tiny
    trainer = _trainer(None, tokenizer, step=2)
    trainer.model = model
    sampler = trainer_sampler(TrainerBatches(trainer))
    assert isinstance(sampler, GenerateSampler) and sampler.model is model
    (group,) = sample_groups(sampler, ChatTokens(tokenizer), _prompts()[:1], Sampling(n=1, max_new_tokens=3))
    assert group.version == 2


def test_the_evaluations_samples_carry_the_version_of_the_groups_they_come_from(tiny):
    model, tokenizer = tiny
    items = [(Problem(t), i) for t in TASKS for i in range(2)]
    chat = ChatTokens(tokenizer)
    local = Draws(Sampling(n=2, max_new_tokens=4), GenerateSampler(model, tokenizer, version=lambda: 4), chat)
    assert [g.version for g in local.sample(items)] == [4] * 4
    backend = BackendSampler(TrainerBatches(_trainer(_LoraSync(), tokenizer, 6)))
    served = Draws(Sampling(n=2), backend, chat, served=True)
    out = served.sample(items)
    assert [g.version for g in out] == [6] * 4 and len({g.text for g in out}) == 4


def test_a_continuation_of_ids_is_what_a_group_draws_from_the_rendered_prompt(tiny):
    """`complete` (the episode runner's token-level sampling) continues the given ids exactly as `sample_groups`
    continues the prompt it renders: the same ids, texts and stop reasons from the same seed."""
    model, tokenizer = tiny
    sampler = GenerateSampler(model, tokenizer)
    settings = Sampling(n=2, max_new_tokens=7, seed=5, batch_size=4)
    groups = sample_groups(sampler, ChatTokens(tokenizer), _prompts(), settings)
    outs = sampler.complete([g.prompt_ids for g in groups for _ in range(2)], settings)
    assert [o.ids for o in outs] == [ids for g in groups for ids in g.completion_ids]
    assert [o.text for o in outs] == [t for g in groups for t in g.texts]
    eos = eos_ids(model, tokenizer)
    for out in outs:
        stop = out.ids[-1] in eos
        assert out.finish_reason == ("stop" if stop else "length")
        assert out.raw == tokenizer.decode(out.ids[:-1] if stop else out.ids, skip_special_tokens=False)


def test_the_trainers_samplers_continue_token_ids_as_given(tiny):
    """The episode runner's token-level sampling through a trainer: the backend gets the ids as they are (never
    rendered again) at the caller's settings; GRPO's own generation gets a group's identical contexts as one
    request of `n` and returns the sampler's log-probs per token."""
    model, tokenizer = tiny
    backend = _LoraSync()
    trainer = _trainer(backend, tokenizer, step=5)
    trainer.model = model
    contexts = [[1, 2, 3], [4, 5]]
    settings = Sampling(n=1, max_new_tokens=7, temperature=0.2)
    outs = BackendSampler(TrainerBatches(trainer)).complete(contexts, settings)
    assert backend.calls == [(2, 1, {"temperature": 0.2, "max_tokens": 7})]
    assert [o.ids for o in outs] == [[40, 50], [41, 51]] and outs[1].logprobs == [-0.5, -2.0]
    assert all(o.finish_reason == "length" for o in outs)  # no end-of-sequence token sampled

    seen = []

    def generate(prompt_ids, images, fields, n):
        seen.append((prompt_ids, n))
        return [[60, tokenizer.eos_token_id]] * len(prompt_ids), [[-0.25, -0.5]] * len(prompt_ids)

    trainer._generate_single_turn = generate
    grouped = [[7, 8], [7, 8], [9], [9]]
    outs = TrainerSampler(TrainerBatches(trainer)).complete(grouped, Sampling(n=2))
    assert seen == [(grouped, 2)]  # two groups of two (the runner says so): one request each on a vLLM backend
    assert all(o.finish_reason == "stop" and o.logprobs == [-0.25, -0.5] for o in outs)
    TrainerSampler(TrainerBatches(trainer)).complete([[7], [8], [7]], Sampling(n=1))
    assert seen[-1][1] == 1  # a later turn: every context its own request
    # GRPO's generation samples to max_completion_length whatever the turn's budget: what is past it is cut
    outs = TrainerSampler(TrainerBatches(trainer)).complete([[7], [8]], Sampling(n=1, max_new_tokens=1))
    assert all(o.ids == [60] and o.logprobs == [-0.25] and o.finish_reason == "length" for o in outs)
