"""The trainer's forward passes on packed sequences (`AZRGRPOTrainer._get_per_token_logps_and_entropies`): on the
tiny model, a batch of TRL's layout with rows of different lengths gets the same log-probabilities, entropies,
loss and gradients packed as TRL's padded forward gives, in fewer positions; a model whose forward would attend
across packed sequences is found on the first batch and runs padded; and a batch is packed only where its packed
positions take less time than its padded ones, at what the trainer timed a position costing each way."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("trl")

from recipes import tiny_grpo_args


def _reward(completions, **columns):
    return [0.0 for _ in completions]


@pytest.fixture
def trainer(tiny_model_dir, tmp_path):
    from azr.config import ModelConfig
    from azr.data import load_tasks
    from azr.models.loading import build_model_and_tokenizer
    from azr.training import grpo_dataset
    from azr.training.trl.trainer import AZRGRPOTrainer

    model, tokenizer = build_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))
    args = tiny_grpo_args(tmp_path / "out", max_completion_length=12, max_steps=1, save_strategy="no")
    trainer = AZRGRPOTrainer(
        model=model,
        reward_funcs=[_reward],
        args=args,
        train_dataset=grpo_dataset(load_tasks("train")[:2]),
        processing_class=tokenizer,
    )
    trainer.position_seconds = (1.0, 1.0)  # a position costs the same either way: every batch that saves one packs
    return trainer


def _layout(vocab: int, prompts: list[int], completions: list[int], seed: int = 0):
    """Rows of TRL's layout: prompts left-padded to the longest, completions right-padded, random tokens."""
    generator = torch.Generator().manual_seed(seed)
    width_p, width_c = max(prompts), max(completions)
    ids = torch.zeros(len(prompts), width_p + width_c, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for r, (p, c) in enumerate(zip(prompts, completions, strict=True)):
        ids[r, width_p - p : width_p + c] = torch.randint(3, vocab, (p + c,), generator=generator)
        mask[r, width_p - p : width_p + c] = 1
    return ids, mask, width_c


def _padded(trainer, *args, **kwargs):
    from trl import GRPOTrainer

    return GRPOTrainer._get_per_token_logps_and_entropies(trainer, *args, **kwargs)


def test_packed_log_probs_entropies_and_gradients_are_the_padded_ones(trainer):
    from azr.rollouts import pack

    model = trainer.model
    ids, mask, keep = _layout(model.config.vocab_size, [9, 5, 7, 4, 6], [12, 3, 2, 5, 1])
    assert pack(ids, mask, keep).tokens < ids.numel()  # this batch packs: 5 rows into fewer positions
    mine, mine_entropy, _ = trainer._get_per_token_logps_and_entropies(model, ids, mask, keep, compute_entropy=True)
    grads = torch.autograd.grad((mine * mask[:, -keep:]).sum(), [p for p in model.parameters() if p.requires_grad])
    theirs, their_entropy, _ = _padded(trainer, model, ids, mask, keep, compute_entropy=True)
    their_grads = torch.autograd.grad(
        (theirs * mask[:, -keep:]).sum(), [p for p in model.parameters() if p.requires_grad]
    )
    assert trainer.packing is True
    scored = mask[:, -keep:].bool()
    scored[:, 0] &= mask[:, -keep - 1].bool()  # a completion's first token is predicted from the prompt
    assert torch.allclose(mine[scored], theirs[scored], atol=1e-5)
    assert torch.allclose(mine_entropy[scored], their_entropy[scored], atol=1e-5)
    assert (mine[~scored] == 0).all()
    for a, b in zip(grads, their_grads, strict=True):
        assert torch.allclose(a, b, atol=1e-4, rtol=1e-3)


def test_the_loss_of_a_generated_batch_is_the_padded_loss(trainer):
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train, which this test does not run
    rows = [dict(row) for row in trainer.train_dataset.select(range(2)) for _ in range(2)]
    output = trainer._generate_and_score_completions(rows)
    output["advantages"] = torch.tensor([1.0, -1.0, 0.5, -0.5])  # the scripted reward is flat: give it a signal
    packed = trainer.compute_loss(trainer.model, output)
    trainer.packing = False
    padded = trainer.compute_loss(trainer.model, output)
    assert torch.allclose(packed, padded, atol=1e-5)


def test_a_model_that_attends_across_packed_sequences_runs_padded(trainer, monkeypatch, caplog):
    model = trainer.model
    backbone = type(model.get_decoder())  # what TRL's fused head runs before it scores
    forward = backbone.forward

    def ignores_positions(self, *args, **kwargs):  # as a model that reads no packed position ids
        if kwargs.get("position_ids") is not None and kwargs.get("attention_mask") is None:
            kwargs["attention_mask"] = torch.ones_like(kwargs["input_ids"])
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(backbone, "forward", ignores_positions)
    ids, mask, keep = _layout(model.config.vocab_size, [9, 5, 7, 4], [12, 3, 2, 5])
    with caplog.at_level("WARNING"):
        mine, _, _ = trainer._get_per_token_logps_and_entropies(model, ids, mask, keep)
    assert trainer.packing is False and "not packed for this model" in caplog.text
    theirs, _, _ = _padded(trainer, model, ids, mask, keep)
    assert torch.equal(mine, theirs)


def test_a_batch_is_packed_only_where_its_packed_positions_take_less_time(trainer, monkeypatch):
    import azr.training.trl.trainer as module
    from azr.rollouts import pack

    model = trainer.model
    ids, mask, keep = _layout(model.config.vocab_size, [9, 5, 7, 4, 6], [12, 3, 2, 5, 1])
    trainer.packing = True  # checked: this model keeps packed sequences apart (the test above)
    calls = []
    monkeypatch.setattr(module, "packed_logps", _counting(module.packed_logps, calls))
    saved = ids.numel() / pack(ids, mask, keep).tokens  # padded positions per packed one, above 1
    trainer.position_seconds = (1.0, saved * 1.01)  # a packed position costs just more than packing saves
    mine, _, _ = trainer._get_per_token_logps_and_entropies(model, ids, mask, keep)
    assert calls == []
    assert torch.equal(mine, _padded(trainer, model, ids, mask, keep)[0])
    trainer.position_seconds = (1.0, saved * 0.99)  # just less
    trainer._get_per_token_logps_and_entropies(model, ids, mask, keep)
    assert calls == [1]


def test_the_cost_of_a_position_is_timed_once_each_way_on_the_first_batch_that_packs(trainer, caplog):
    model = trainer.model
    trainer.position_seconds = None
    ids, mask, keep = _layout(model.config.vocab_size, [9, 5, 7, 4, 6], [12, 3, 2, 5, 1])
    with caplog.at_level("INFO", logger="azr.training.trl.trainer"):
        mine, _, _ = trainer._get_per_token_logps_and_entropies(model, ids, mask, keep)
    measured = trainer.position_seconds
    assert measured is not None and all(seconds > 0 for seconds in measured)
    assert "ms a position padded" in caplog.text
    theirs, _, _ = _padded(trainer, model, ids, mask, keep)
    scored = mask[:, -keep:].bool()
    assert torch.allclose(mine[scored], theirs[scored], atol=1e-5)  # the same values, whichever way it ran
    trainer._get_per_token_logps_and_entropies(model, ids, mask, keep)
    assert trainer.position_seconds == measured  # not timed again


def _counting(function, calls: list):
    def counted(*args, **kwargs):
        calls.append(1)
        return function(*args, **kwargs)

    return counted
