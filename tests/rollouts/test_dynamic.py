"""Dynamic sampling: the keep decision, the carry-over and the batch TRL trains on.

First against a scripted round (a stand-in for the trainer's generation at the one edge the filter uses: each round
returns TRL-shaped tensors, every row numbered, and rewards a script gives per task), so that which rows are
trained, carried, topped up and dropped is checked row for row. Then on the tiny model through TRL's own trainer,
which pins the parts of TRL 1.16 the filter relies on.
"""

from __future__ import annotations

import inspect
import math
from types import SimpleNamespace

import pytest
import torch
from recipes import tiny_grpo_args

from azr.config import SamplingConfig
from azr.rollouts.advantages import weighted_totals
from azr.rollouts.dynamic import RolloutFilter
from azr.rollouts.seam import Continuation
from azr.rollouts.tensors import KNOWN, group_signal, join_groups, split_groups
from azr.training.trl.private import TrainerBatches, fill_batch

NAN = math.nan
G = 4  # completions per prompt in the scripted rounds
# The scripted reward of each kind of task, per completion: constant, varying, constant where graded (the other
# rows were not graded: masked, NaN), and differing where graded.
SCRIPT = {"c": [1.0] * 4, "v": [0.0, 1.0, 0.0, 1.0], "m": [1.0, NAN, 1.0, NAN], "d": [1.0, NAN, 0.0, NAN]}


def test_only_graded_rows_that_differ_make_a_signal():
    rows = [v for kind in "cvmd" for v in SCRIPT[kind]]
    rewards = torch.tensor(rows).unsqueeze(1)
    assert group_signal(weighted_totals(rewards, torch.tensor([1.0])), G) == [False, True, False, True]
    # Two reward functions: the weighted sum decides; a row NaN in one function is still graded by the other.
    two = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, NAN], [1.0, 0.0], [NAN, NAN], [1.0, 0.0]])
    assert group_signal(weighted_totals(two, torch.tensor([1.0, 1.0])), 2) == [False, False, False]
    assert group_signal(weighted_totals(two, torch.tensor([1.0, 0.5])), 2) == [True, False, False]
    assert group_signal(torch.tensor([0.3, 0.3 + 1e-12]), 2) == [False]  # float noise


class ScriptedGroups:
    """The group sampler's part, scripted: each call must ask for the planned number of groups, and gets the planned
    tasks."""

    curriculum = None

    def __init__(self, plan: list[tuple[int, str]]):
        self.plan, self.totals = list(plan), {"unaligned_batches": 0}

    def compose(self, rows, size, step, *, attempt=0, groups=None, exclude=()):
        asked, tasks = self.plan.pop(0)
        assert groups == asked, f"asked for {groups} groups, the plan says {asked}"
        return [{"task_id": t, "prompt": t} for t in tasks.split() for _ in range(size)]

    def to_json(self):
        return {}


class ScriptedRounds:
    """The trainer at the edge dynamic sampling uses. Round r's tensors: prompts of 1 + (r % 2) tokens and
    completions of 2 + (r % 3) (so rounds pad differently), the row's number in completion_ids[:, 0] and in its
    advantage, and a wrong num_items_in_batch (the filter must recount it). `version` stands for the policy's
    weights: the log-probs it gives are that number."""

    num_generations = G
    reward_weights = torch.tensor([1.0])
    reward_func_names = ("scripted_reward",)
    pad_to_multiple_of = None

    def __init__(self):
        self.state = SimpleNamespace(global_step=0)
        cpu = torch.device("cpu")
        self.accelerator = SimpleNamespace(process_index=0, device=cpu, gather=lambda t: t.reshape(-1))
        self.processing_class = SimpleNamespace(pad_token_id=-1)
        self.model = SimpleNamespace(is_gradient_checkpointing=False)
        self.args = SimpleNamespace(gradient_checkpointing_kwargs=None, per_device_train_batch_size=4)
        self.version, self.rows, self.rounds = 0, 0, []

    def _score_round(self, rows):
        n, r = len(rows), len(self.rounds)
        uid = torch.arange(self.rows, self.rows + n)
        self.rows += n
        self.rounds.append([row["task_id"] for row in rows[::G]])
        prompt, completion = 1 + r % 2, 2 + r % 3
        output = {
            "prompt_ids": torch.full((n, prompt), 7),
            "prompt_mask": torch.ones(n, prompt, dtype=torch.long),
            "completion_ids": torch.cat([uid.unsqueeze(1), torch.full((n, completion - 1), 5)], dim=1),
            "completion_mask": torch.ones(n, completion, dtype=torch.long),
            "advantages": uid.float(),
            "num_items_in_batch": torch.tensor(999),
        }
        rewards = torch.tensor([SCRIPT[row["task_id"][0]][i % G] for i, row in enumerate(rows)]).unsqueeze(1)
        return output, rewards

    def _get_per_token_logps_and_entropies(self, model, ids, mask, keep, batch_size=None):
        return torch.full((ids.shape[0], keep), float(self.version)), None, None


def _fill(sampler: RolloutFilter, trainer: ScriptedRounds, groups: int = 2) -> dict:
    batch = fill_batch(sampler, TrainerBatches(trainer), [{"task_id": "x", "prompt": "x"}] * (groups * G))
    trainer.version += 1  # the update this batch trains
    trainer.state.global_step += 1
    return batch


def _trained(batch: dict) -> list[int]:
    """Which rows a batch holds (their numbers), checked to agree between completions and advantages."""
    rows = batch["completion_ids"][:, 0].tolist()
    assert batch["advantages"].tolist() == [float(r) for r in rows]
    return rows


def _rows(trainer: ScriptedRounds, round_: int, group: int) -> list[int]:
    """The numbers of the rows of the `group`th group of round `round_`."""
    start = sum(len(r) for r in trainer.rounds[:round_]) * G + group * G
    return list(range(start, start + G))


def test_dynamic_sampling_keeps_groups_that_differ_and_carries_the_rest_over_exactly():
    cfg = SamplingConfig(dynamic=True, oversample=2, max_attempts=2, carry_over=1)
    groups = ScriptedGroups(
        [
            (4, "c1 m1 d1 v1"),  # batch 1: two of four differ: exactly full
            (4, "v2 c2 v3 v4"),  # batch 2: three differ: v4 is carried over
            (2, "c1 c2"),  # batch 3: v4 fills one place; 2 x 1 missing asked for, none differs ...
            (2, "m1 v1"),  # ... so a second round: v1
            (4, "c1 c2 m1 c1"),  # batch 4: nothing differs
            (4, "c2 c1 d1 m1"),  # ... one group in the last round; topped up with the newest without a difference
        ]
    )
    trainer, sampler = ScriptedRounds(), RolloutFilter(cfg, groups)

    first = _fill(sampler, trainer)
    assert _trained(first) == _rows(trainer, 0, 2) + _rows(trainer, 0, 3)  # d1, v1
    assert "old_per_token_logps" not in first and sampler.pool == []  # on-policy: TRL's loss detaches its own
    assert first["num_items_in_batch"].item() == first["completion_mask"].sum().item() == 8 * 2
    assert sampler.metrics() == {
        "sampling/carried_over": 0,
        "sampling/kept_share": 0.5,
        "sampling/generated_per_trained": 2.0,
        "sampling/zero_variance_share": 0.0,
        "sampling/carried_in": 0,
        "sampling/short_groups": 0,
        "sampling/dropped_groups": 0,
        "sampling/rounds": 1,
        "sampling/unaligned_batches": 0,
    }

    second = _fill(sampler, trainer)
    assert _trained(second) == _rows(trainer, 1, 0) + _rows(trainer, 1, 2)  # v2, v3
    assert [g.task_id for g in sampler.pool] == ["v4"] and sampler.metrics()["sampling/carried_over"] == 1
    # The carried group's old log-probs are taken now, under the policy that generated it (version 1).
    assert sampler.pool[0].tensors["old_per_token_logps"].unique().tolist() == [1.0]

    third = _fill(sampler, trainer)
    carried, fresh = _rows(trainer, 1, 3), _rows(trainer, 3, 1)  # v4 from batch 2, v1 from this batch's 2nd round
    assert _trained(third) == carried + fresh
    # A batch with a carried group has old log-probs throughout: the carried rows' from their own policy (version 1),
    # the fresh rows' from the policy now (version 2), padded to the batch's width where the rounds' widths differ.
    old, mask = third["old_per_token_logps"], third["completion_mask"].bool()
    assert old[:G][mask[:G]].unique().tolist() == [1.0] and old[G:][mask[G:]].unique().tolist() == [2.0]
    assert third["completion_ids"].shape[1] == 3  # round 1's completions have 3 tokens, round 3's 2
    assert mask[:G].sum(1).tolist() == [3] * G and mask[G:].sum(1).tolist() == [2] * G
    metrics = sampler.metrics()
    assert (metrics["sampling/carried_in"], metrics["sampling/rounds"], metrics["sampling/kept_share"]) == (1, 2, 0.25)
    assert metrics["sampling/generated_per_trained"] == 2.0 and metrics["sampling/carried_over"] == 0

    fourth = _fill(sampler, trainer)
    assert _trained(fourth) == _rows(trainer, 5, 2) + _rows(trainer, 5, 3)  # d1, then m1 to top the batch up
    metrics = sampler.metrics()
    assert metrics["sampling/short_groups"] == 1 and metrics["sampling/zero_variance_share"] == 0.5
    assert groups.plan == []
    totals = sampler.totals
    assert (totals["generated"], totals["kept"], totals["trained"], totals["useful"]) == (20, 7, 8, 7)


def test_carried_groups_wait_at_most_carry_over_batches():
    groups = ScriptedGroups([(4, "v1 v2 v3 v4"), (4, "c1 c2 c3 v5")])
    trainer, sampler = ScriptedRounds(), RolloutFilter(SamplingConfig(dynamic=True, oversample=4, carry_over=1), groups)
    assert _trained(_fill(sampler, trainer, groups=1)) == _rows(trainer, 0, 0)
    assert [g.task_id for g in sampler.pool] == ["v2", "v3", "v4"] and sampler.metrics()["sampling/rounds"] == 1
    # The next batch is filled from the pool alone: no round (the plan's next entry is still there).
    assert _trained(_fill(sampler, trainer, groups=1)) == _rows(trainer, 0, 1) and len(groups.plan) == 1
    assert sampler.metrics()["sampling/rounds"] == 0
    # A batch later v3 and v4 have waited two batches: dropped, and a round is generated.
    assert _trained(_fill(sampler, trainer, groups=1)) == _rows(trainer, 1, 3)
    metrics = sampler.metrics()
    assert metrics["sampling/dropped_groups"] == 2 and metrics["sampling/rounds"] == 1
    # Without carry-over the surplus is dropped at once.
    groups = ScriptedGroups([(2, "v1 v2")])
    no_carry = RolloutFilter(SamplingConfig(dynamic=True, oversample=2, carry_over=0), groups)
    _fill(no_carry, ScriptedRounds(), groups=1)
    assert no_carry.pool == [] and no_carry.metrics()["sampling/dropped_groups"] == 1


def test_with_dynamic_sampling_off_a_round_passes_through_and_is_counted():
    class Plain(ScriptedRounds):
        def _score_round(self, rows):
            self.output, rewards = super()._score_round(rows)
            return self.output, rewards

    groups = ScriptedGroups([(None, "c1 v1 m1 d1")])
    trainer = Plain()
    sampler = RolloutFilter(SamplingConfig(dynamic=False), groups)
    assert _fill(sampler, trainer, groups=4) is trainer.output
    assert sampler.metrics()["sampling/zero_variance_share"] == 0.5
    assert (sampler.totals["generated"], sampler.totals["trained"], sampler.totals["useful"]) == (4, 4, 2)


def test_joining_one_rounds_groups_gives_back_its_tensors():
    trainer = ScriptedRounds()
    rows = [{"task_id": t, "prompt": t} for t in ("c1", "v1", "d1") for _ in range(G)]
    output, rewards = trainer._score_round(rows)
    output["completion_mask"][:, -1] = 0  # the round's last column is used by nobody: TRL would not have padded it
    groups = split_groups(output, rows, group_signal(weighted_totals(rewards, trainer.reward_weights), G), born=1)
    assert [(g.task_id, g.signal) for g in groups] == [("c1", False), ("v1", True), ("d1", True)]
    joined = join_groups(groups, pad_id=-1, multiple=None, device="cpu")
    assert joined.keys() == output.keys() - {"num_items_in_batch"}
    for key, value in joined.items():
        expected = output[key][:, :-1] if key.startswith("completion") else output[key]
        assert torch.equal(value, expected), key
    assert join_groups(groups, -1, 4, "cpu")["completion_ids"].shape[1] == 2  # kept a multiple of 4, within the width
    with pytest.raises(NotImplementedError, match="pixel_values"):
        split_groups({**output, "pixel_values": torch.zeros(3, 3)}, rows, [True] * 3, born=1)


# ------------------------------------------------------------------------------------- through TRL's trainer
def _kind(task_id: str) -> str:
    return "c" if task_id in _CONSTANT else "v"


_CONSTANT: set[str] = set()


def _scripted_reward(prompts=None, completions=None, task_id=None, **columns):
    """Constant on the chosen tasks, 0/1 alternating within every other group."""
    return [SCRIPT[_kind(t)][i % 2] for i, t in enumerate(task_id)]


_scripted_reward.__name__ = "tests_reward"


@pytest.fixture
def tiny_trainer(tiny_model_dir, tmp_path):
    """AZRGRPOTrainer on the tiny model with the scripted reward and dynamic sampling; two of six tasks constant."""

    from azr.config import ModelConfig
    from azr.data import load_tasks
    from azr.models.loading import build_model_and_tokenizer
    from azr.rollouts import GroupSampler
    from azr.training import grpo_dataset, grpo_rows
    from azr.training.trl.trainer import AZRGRPOTrainer

    tasks = load_tasks("train")[:6]
    _CONSTANT.clear()
    _CONSTANT.update(t.id for t in tasks[:2])
    model, tokenizer = build_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))
    rows = grpo_rows(tasks)
    cfg = SamplingConfig(dynamic=True, oversample=2, max_attempts=3, carry_over=1)
    sampler = RolloutFilter(cfg, GroupSampler({r["task_id"]: r for r in rows}, seed=0))
    args = tiny_grpo_args(
        tmp_path / "checkpoints",
        steps_per_generation=2,  # one generation batch of 4 groups, split by TRL into two steps' slices
        max_completion_length=8,
        max_steps=4,
        logging_steps=1,
        save_strategy="no",
    )
    trainer = AZRGRPOTrainer(
        model=model,
        reward_funcs=[_scripted_reward],
        args=args,
        train_dataset=grpo_dataset(tasks),
        processing_class=tokenizer,
        sampling=sampler,
    )
    return trainer, sampler, rows


def test_trls_generation_contract_that_dynamic_sampling_relies_on(tiny_trainer):
    """TRL 1.16: `_generate_and_score_completions` returns per-row tensors with the keys the filter knows how to split
    and pad (and num_items_in_batch); the log-probs helper takes (model, ids, mask, logits_to_keep, batch_size); and
    `policy_logps` gives what TRL itself takes as old_per_token_logps."""
    from trl import GRPOTrainer

    trainer, _, rows = tiny_trainer
    params = list(inspect.signature(GRPOTrainer._get_per_token_logps_and_entropies).parameters)
    assert params[:6] == ["self", "model", "input_ids", "attention_mask", "logits_to_keep", "batch_size"]
    trainer.model.train()
    batch = [row for row in rows[:2] for _ in range(2)]
    output, rewards = trainer._score_round(batch)
    assert rewards.shape == (4, 1) and set(output) <= KNOWN
    assert {"prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages"} <= set(output)
    # steps_per_generation 2 > gradient_accumulation_steps 1: TRL took the old log-probs itself, at generation.
    old = output["old_per_token_logps"]
    mask = output["completion_mask"].bool()
    assert torch.allclose(TrainerBatches(trainer).policy_logps(output)[mask], old[mask], atol=1e-5)


@pytest.mark.slow  # trains the tiny model
def test_a_dynamically_sampled_run_trains_only_groups_that_differ(tiny_trainer):
    trainer, sampler, _ = tiny_trainer
    trained = []
    prepare = trainer._prepare_inputs

    def recording(batch):
        inputs = prepare(batch)
        trained.append(inputs)
        return inputs

    trainer._prepare_inputs = recording
    trainer.train()
    assert trainer.state.global_step == 4 and len(trained) == 4  # two generation batches, two slices each
    for inputs in trained:
        assert inputs["completion_ids"].shape[0] == 4  # per_device_train_batch_size rows per step
        # Every trained row is in a group whose rewards differ (0 and 1): none has advantage 0.
        assert (inputs["advantages"] != 0).all()
    totals = sampler.totals
    assert totals["trained"] == totals["useful"] == 8 and totals["generated"] >= 8
    logged = [h for h in trainer.state.log_history if "sampling/zero_variance_share" in h]
    assert len(logged) == 2 and all(h["sampling/zero_variance_share"] == 0 for h in logged)


# ------------------------------------------------------------------------------------------ azr train, resumed
@pytest.mark.slow  # trains the tiny model
def test_azr_train_logs_sampling_and_resumes_the_curriculum_exactly(tiny_model_dir, tmp_path, monkeypatch):
    """`azr train` with dynamic sampling and the curriculum: sampling/* in metrics.jsonl, the curriculum's
    statistics beside each checkpoint (counting every graded completion of every round), and a run resumed from
    checkpoint-1 ends with the same statistics at checkpoint-2 as the run that was not interrupted."""
    import json
    import shutil

    from recipes import tiny_recipe, write_recipe

    from azr.config import load_config
    from azr.training.run import run_train

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(name, "1")
    out = tmp_path / "run"
    recipe = tiny_recipe(
        tiny_model_dir,
        out,
        grpo={"max_completion_length": 8, "save_steps": 1},
        sampling={"dynamic": True, "oversample": 1.5, "max_attempts": 2},
        curriculum={"enabled": True},
    )
    path = write_recipe(tmp_path / "recipe.yaml", recipe)
    assert run_train(load_config(path)) == 0

    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    grpo = [m for m in metrics if m["phase"] == "grpo"]
    assert [m["step"] for m in grpo] == [1, 2]
    for key in ("kept_share", "generated_per_trained", "zero_variance_share", "carried_over", "rounds"):
        assert all(f"sampling/{key}" in m for m in grpo), key
    generations = [json.loads(line) for p in sorted((out / "generations").glob("*.jsonl")) for line in p.open()]
    graded = sum(r["status"] != "error" for r in generations if r["step"] == 1)
    assert graded > 4  # more than one round's rows: a random model's groups never differ, so every round ran
    saved = {
        s: json.loads((out / "checkpoints" / f"checkpoint-{s}" / "sampling_state.json").read_text()) for s in (1, 2)
    }
    assert sum(t["attempts"] for t in saved[1]["groups"]["curriculum"].values()) == graded
    assert saved[1]["totals"]["trained"] == 2 and saved[2]["totals"]["trained"] == 4

    again = tmp_path / "again"
    shutil.copytree(out, again)
    recipe["output_dir"] = str(again)
    write_recipe(path, recipe)
    assert run_train(load_config(path), resume_from=str(again / "checkpoints" / "checkpoint-1")) == 0
    resumed = json.loads((again / "checkpoints" / "checkpoint-2" / "sampling_state.json").read_text())
    assert resumed == saved[2]


class ServedRounds(ScriptedRounds):
    """ScriptedRounds with adapter mode's backend at its one edge: a sync serves the weights of the step."""

    vllm_importance_sampling_mode, vllm_importance_sampling_clip_min, vllm_importance_sampling_clip_max = (
        "token_truncate",
        None,
        2.0,
    )

    def __init__(self):
        super().__init__()
        self._last_loaded_step, self.served = -1, -1
        self.vllm_generation = SimpleNamespace(sync_weights=self._serve)

    def _serve(self):
        self.served = self.state.global_step


class ServedEngine:
    """The pipeline's token sampler: every sample is drawn by the version served when it is drawn."""

    def __init__(self, trainer: ServedRounds):
        self.trainer = trainer

    def complete(self, contexts, sampling):
        return [Continuation([5], "", "length", [0.0], version=self.trainer.served) for _ in contexts]


def test_dynamic_sampling_under_asynchronous_grpo_keeps_groups_sampled_ahead_within_the_bound():
    from azr.rollouts.pipeline import AsyncRollouts

    cfg = SamplingConfig(dynamic=True, oversample=2, max_attempts=2, carry_over=1, max_staleness=1)
    groups = ScriptedGroups(
        [
            (4, "c1 m1 d1 v1"),  # batch 1 queues its round twice (the pipeline fills) and scores the first copy
            (4, "v2 c2 v3 v4"),  # batch 2 queues this and scores the second copy of batch 1's round
            (4, "c1 c2 c3 c1"),  # batch 3 scores v2 c2 v3 v4 (version 1): v4 is carried over ...
            (4, "v5 v6 c1 c2"),  # batch 4: v4 would be 2 versions old: dropped; c1 c2 c3 c1 teaches nothing ...
            (4, "d1 v7 c1 c1"),  # ... so a second round scores v5 v6, sampled during this batch (version 3)
        ]
    )
    trainer, sampler = ServedRounds(), RolloutFilter(cfg, groups)
    sampler.pipeline = pipeline = AsyncRollouts(ServedEngine(trainer), lambda ps: [[1]] * len(ps), 1, G)
    try:
        trained, metrics = [], []
        for _ in range(4):
            trained.append(_trained(_fill(sampler, trainer)))
            metrics.append(sampler.metrics())
            for queued in list(pipeline._queue):  # the producer has sampled what is queued, at the version served
                queued.done.wait(10)
    finally:
        pipeline.close()
    assert trainer.rounds == [
        ["c1", "m1", "d1", "v1"],
        ["c1", "m1", "d1", "v1"],
        ["v2", "c2", "v3", "v4"],
        ["c1", "c2", "c3", "c1"],
        ["v5", "v6", "c1", "c2"],
    ]
    assert trained[0] == _rows(trainer, 0, 2) + _rows(trainer, 0, 3)  # d1, v1
    assert trained[1] == _rows(trainer, 1, 2) + _rows(trainer, 1, 3)
    assert trained[2] == _rows(trainer, 2, 0) + _rows(trainer, 2, 2)  # v2, v3; v4 waits
    assert trained[3] == _rows(trainer, 4, 0) + _rows(trainer, 4, 1)  # v5, v6
    staleness = [m["async/staleness_mean"] for m in metrics]
    assert staleness == [0.0, 1.0, 1.0, 0.0] and all(m["async/dropped_samples"] == 0 for m in metrics)
    # The carried group was sampled by version 1 and batch 4 trains version 3: over the bound, dropped and counted.
    assert metrics[2]["sampling/carried_over"] == 1
    assert (metrics[3]["sampling/dropped_groups"], metrics[3]["sampling/carried_in"]) == (1, 0)
    assert metrics[3]["sampling/rounds"] == 2 and groups.plan == []


def test_with_two_processes_the_main_one_samples_ahead_for_both_and_each_takes_its_slice():
    """Rank 0's pipeline queues both ranks' rows as one batch; the batch it sampled ahead is handed out by slice,
    completions included, so TRL's round on each rank takes its own rows' completions (rank 1's producer never
    runs). The collectives are played by hand: rank 1 receives what rank 0's `on_main` returned."""
    from azr.rollouts.pipeline import AsyncRollouts

    def group(task):
        return [{"task_id": task, "prompt": task}] * G

    trainer = ServedRounds()
    trainer._serve()
    handed = []

    class Rank:
        def __init__(self, rank, other_rows):
            self.rank, self.world, self.main, self.other_rows = rank, 2, rank == 0, other_rows

        def gather(self, rows):
            return [rows, self.other_rows] if self.rank == 0 else [self.other_rows, rows]

        def on_main(self, fn, what):
            if self.main:
                handed.append(fn())
            return handed[-1]

    filters = []
    for rank, other in ((0, group("b")), (1, group("a"))):
        f = RolloutFilter(SamplingConfig(max_staleness=1), ScriptedGroups([]), ranks=Rank(rank, other))
        f.pipeline = AsyncRollouts(ServedEngine(trainer), lambda ps: [[len(p)] for p in ps], 1, G)
        filters.append(f)
    try:
        mine = [filters[0]._swap(group("a"), 0), filters[1]._swap(group("b"), 0)]
        assert [[r["task_id"] for r in rows] for rows in mine] == [["a"] * G, ["b"] * G]
        assert all(r["policy_version"] == 0 for rows in mine for r in rows)
        assert len(handed[0].rows) == 2 * G  # the whole batch, sampled once on the main process
        taken = [f.pipeline([r["prompt"] for r in rows], None) for f, rows in zip(filters, mine, strict=True)]
        assert [len(t["completion_ids"]) for t in taken] == [G, G]
        assert filters[1].pipeline._threads == []  # no producer on rank 1
    finally:
        for f in filters:
            f.pipeline.close()
