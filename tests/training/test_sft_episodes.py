"""SFT on `azr gen`'s execution-feedback episodes (`rollouts.env: feedback` with `sft.rollouts`): TRL's pre-tokenized
rows built from the ids the policy was sampled on, the labels -100 on exactly the prompt's and the feedback's tokens
(TRL's own dataset preparation and collator make them), an endpoint's episode tokenized as the runner would have,
malformed episodes refused naming `file:line` before any training, and a short SFT of the tiny model on such a file.

The episodes come from the real `azr gen` loop and sandbox, played by a scripted token-level policy on the tiny
model's tokenizer (`tests/feedback_policy.py`)."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
from feedback_policy import TASKS, scripted_local

import azr.envs.gen as gen_module
from azr.config import load_config
from azr.envs import run_gen
from azr.errors import ConfigError, DataError
from azr.rollouts import ChatTokens
from azr.tools import load_rollouts
from azr.training.sft import episode_dataset, episode_tokens

TEMPLATE = load_config(None, ["model.name_or_path=unused"]).template_kwargs()  # the recipe's, as in the episodes


@pytest.fixture(scope="module")
def episodes(tmp_path_factory, tokenizer) -> Path:
    """Six feedback episodes (right at once, repaired at turn 2, wrong twice) written by `azr gen`."""
    folder = tmp_path_factory.mktemp("episodes")
    recipe = folder / "gen.yaml"
    recipe.write_text(
        "model: {name_or_path: unused}\nsandbox: {workers: 1, backend: bwrap}\nlogging: {console: plain}\n"
        "rollouts: {env: feedback}\nfeedback: {max_turns: 2}\ngen: {max_tasks: 6, max_new_tokens: 400}\n"
    )
    saved = gen_module.build_policy
    gen_module.build_policy = lambda cfg, kind, stack: scripted_local(tokenizer, cfg.template_kwargs())
    try:
        assert run_gen(load_config(recipe, []), folder / "episodes.jsonl") == 0
    finally:
        gen_module.build_policy = saved
    return folder / "episodes.jsonl"


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _expected(record: dict) -> tuple[list[int], list[int]]:
    """The episode's ids through its last answer, and the labels a masked loss needs: each policy token itself,
    -100 on the prompt's and every feedback token."""
    turns = record["turns"]
    last = max(k for k, t in enumerate(turns) if t["kind"] == "policy")
    ids, labels = list(record["prompt_ids"]), [-100] * len(record["prompt_ids"])
    for turn in turns[: last + 1]:
        ids += turn["ids"]
        labels += turn["ids"] if turn["kind"] == "policy" else [-100] * len(turn["ids"])
    return ids, labels


def _trainer(tiny_model_dir, episodes, tokenizer, tmp_path, which="all", **args):
    from transformers import AutoModelForCausalLM
    from trl import SFTTrainer

    from azr.training import sft_args

    fields = [f"model.name_or_path={tiny_model_dir}", f"output_dir={tmp_path}", "sft.enabled=true"]
    recipe = load_config(None, [*fields, f"sft.rollouts={episodes}", "rollouts.env=feedback"])
    recipe.sft.args = {"max_steps": 1, "report_to": [], **args}
    dataset = episode_dataset(load_rollouts(episodes, which, "feedback"), tokenizer, recipe.template_kwargs())
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    return SFTTrainer(model=model, args=sft_args(recipe, cpu=True), train_dataset=dataset, processing_class=tokenizer)


def test_labels_are_minus_100_on_exactly_the_prompt_and_feedback_tokens(tiny_model_dir, episodes, tokenizer, tmp_path):
    trainer = _trainer(tiny_model_dir, episodes, tokenizer, tmp_path)
    records = _records(episodes)
    rows = [trainer.train_dataset[i] for i in range(len(trainer.train_dataset))]
    assert len(rows) == len(records) == 6  # 'all': the wrong ones too
    batch = trainer.data_collator(rows)  # TRL's collator pads; the labels are TRL's from the dataset's mask
    by_ids = {tuple(row["input_ids"]): i for i, row in enumerate(rows)}
    feedback_tokens = 0
    for record in records:
        ids, labels = _expected(record)
        i = by_ids[tuple(ids)]  # the whole episode, the ids as sampled, nothing cut
        assert batch["input_ids"][i, : len(ids)].tolist() == ids
        assert batch["labels"][i].tolist() == labels + [-100] * (batch["labels"].shape[1] - len(ids))
        env = [t for t in record["turns"] if t["kind"] == "env" and t["shown"]]
        feedback_tokens += sum(len(t["ids"]) for t in env)
        trained = tokenizer.decode([t for t, label in zip(ids, labels, strict=True) if label != -100])
        for turn in env:  # the feedback never trained; every answer, closed by its end-of-turn token, is
            assert turn["content"].splitlines()[0] not in trained
        assert trained.count(tokenizer.eos_token) == sum(t["kind"] == "policy" for t in record["turns"])
    assert feedback_tokens > 100  # four episodes saw feedback: masking is put to the test


def test_the_passed_filter_keeps_episodes_whose_final_program_passed_the_hidden_tests(episodes):
    records = _records(episodes)
    kept = load_rollouts(episodes, "passed", "feedback")
    assert len(kept) == sum(r["grade"]["passed"] for r in records) == 4


def test_an_episode_without_ids_is_tokenized_as_the_runner_built_it(episodes, tokenizer):
    """An endpoint's episode (or one sampled under another tokenizer) has no usable ids: built from its messages,
    it gets the very ids and mask the runner gave the same episode played at the token level."""
    chat = ChatTokens(tokenizer, TEMPLATE)
    for row in load_rollouts(episodes, "all", "feedback"):
        ids, mask, recorded = episode_tokens(row, chat)
        assert recorded
        bare = copy.deepcopy(row)
        bare["prompt_ids"] = []
        for turn in bare["turns"]:
            turn["ids"] = []
        assert episode_tokens(bare, chat) == (ids, mask, False)
        other = copy.deepcopy(row)
        other["prompt_ids"] = [1, 2, 3]  # another tokenizer's prompt: its ids are not this one's
        assert episode_tokens(other, chat) == (ids, mask, False)


def _corrupt(episodes: Path, tmp_path: Path, change) -> Path:
    lines = episodes.read_text().splitlines()
    record = json.loads(lines[1])
    change(record)
    lines[1] = json.dumps(record)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    return bad


MALFORMED = [
    (lambda r: r["turns"][0].update(ids=["x"]), "turns[0].ids: expected a list of token ids"),
    (lambda r: r["turns"][0].update(kind="tool"), "turns[0]: expected a turn with kind 'policy' or 'env'"),
    (lambda r: r.update(prompt_ids="1 2 3"), "'prompt_ids' must be a list of token ids"),
    (lambda r: r.pop("turns"), "'turns' must be a non-empty list of turns"),
    (lambda r: r["turns"][0].update(ids=[]), "turns[0].ids: empty, but the episode has prompt ids"),
    (lambda r: r["messages"].append({"role": "assistant", "content": "x"}), "policy turns but 'messages'"),
    (lambda r: r.update(env="tools"), "not a feedback episode (env 'tools')"),
]


@pytest.mark.parametrize(("change", "message"), MALFORMED)
def test_a_malformed_episode_is_refused_naming_its_file_and_line(episodes, tmp_path, change, message):
    bad = _corrupt(episodes, tmp_path, change)
    with pytest.raises(DataError) as info:
        load_rollouts(bad, "all", "feedback")
    assert str(info.value).startswith(f"{bad}:2: ") and message in str(info.value), str(info.value)


def test_an_id_outside_the_vocabulary_is_refused_naming_its_file_and_line(episodes, tokenizer, tmp_path):
    bad = _corrupt(episodes, tmp_path, lambda r: r["turns"][0]["ids"].append(10**7))
    rows = load_rollouts(bad, "all", "feedback")
    with pytest.raises(DataError, match=rf"^{bad}:2: token id 10000000 is outside the tokenizer's vocabulary"):
        episode_dataset(rows, tokenizer, TEMPLATE)


def test_an_episode_the_policy_failed_is_skipped_not_refused(episodes, tmp_path):
    def failed(record):
        record.update(finish_reason="error", error="endpoint down", turns=[])
        record["messages"] = record["messages"][:2]

    bad = _corrupt(episodes, tmp_path, failed)
    assert len(load_rollouts(bad, "all", "feedback")) == 5


def test_assistant_only_loss_is_refused_for_feedback_episodes(episodes, tiny_model_dir):
    fields = [f"model.name_or_path={tiny_model_dir}", "sft.enabled=true", f"sft.rollouts={episodes}"]
    with pytest.raises(ConfigError, match=r"^sft.args.assistant_only_loss: feedback episodes train from their"):
        load_config(None, [*fields, "rollouts.env=feedback", "sft.args.assistant_only_loss=true"])


def test_azr_train_refuses_a_malformed_episode_in_one_line_before_the_model_loads(
    episodes, tiny_model_dir, tmp_path, write, cli, monkeypatch
):
    import azr.models as models

    def must_not_load(*args, **kwargs):
        raise AssertionError("the model loaded before the episodes file was checked")

    monkeypatch.setattr(models, "build_model_and_tokenizer", must_not_load)
    bad = _corrupt(episodes, tmp_path, lambda r: r["turns"][0].update(ids=[-1]))
    tasks = write("tasks.jsonl", "".join(json.dumps(t.to_json()) + "\n" for t in TASKS[:2]))
    path = write(
        "train.yaml",
        f"model: {{name_or_path: '{tiny_model_dir}'}}\ndata: {{train: '{tasks}'}}\noutput_dir: '{tmp_path / 'run'}'\n"
        f"sandbox: {{workers: 1, backend: bwrap}}\nlogging: {{console: plain}}\nrollouts: {{env: feedback}}\n"
        f"sft: {{enabled: true, rollouts: '{bad}'}}\n",
    )
    code, _, err = cli("train", "--config", path)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{bad}:2: turns[0].ids: expected a list of token ids" in err


@pytest.mark.slow(minutes=1)  # two SFT steps of the tiny model
@pytest.mark.timeout(300)
def test_a_short_sft_on_feedback_episodes_trains_the_tiny_model(tiny_model_dir, episodes, tokenizer, tmp_path):
    trainer = _trainer(tiny_model_dir, episodes, tokenizer, tmp_path, "passed", max_steps=2)
    assert len(trainer.train_dataset) == 4
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    result = trainer.train()
    assert math.isfinite(result.training_loss) and result.training_loss > 0
    assert any(not p.detach().equal(before[n]) for n, p in trainer.model.named_parameters())


@pytest.mark.timeout(120)  # the tiny model samples two short feedback episodes: seconds
def test_the_tiny_models_own_episodes_are_trained_on_the_ids_it_sampled(tiny_model_dir, tokenizer, tmp_path):
    """`azr gen` with the real local policy (HF generate through the runner), then SFT's rows: the recorded ids are
    this tokenizer's and the recipe's template's, so the rows are those ids, not a tokenization of the text."""
    recipe = tmp_path / "gen.yaml"
    recipe.write_text(
        f"model: {{name_or_path: '{tiny_model_dir}'}}\nsandbox: {{workers: 1, backend: bwrap}}\n"
        "logging: {console: plain}\nrollouts: {env: feedback}\nfeedback: {max_turns: 2}\n"
        "gen: {max_tasks: 2, max_new_tokens: 24, concurrency: 1}\n"
    )
    out = tmp_path / "episodes.jsonl"
    assert run_gen(load_config(recipe, []), out) == 0
    records = _records(out)
    assert len(records) == 2
    for record in records:  # a random model writes no code: each answer gets feedback, the second goes unread
        assert [t["kind"] for t in record["turns"]] == ["policy", "env", "policy", "env"]
        assert all(0 < len(t["ids"]) <= 24 for t in record["turns"] if t["kind"] == "policy")
        assert record["turns"][1]["shown"] and record["turns"][1]["ids"] and not record["turns"][3]["ids"]
    chat = ChatTokens(tokenizer, TEMPLATE)
    for row in load_rollouts(out, "all", "feedback"):
        ids, mask, recorded = episode_tokens(row, chat)
        expected, labels = _expected(next(r for r in records if r["messages"] == row["messages"]))
        assert recorded and ids == expected and mask == [int(label != -100) for label in labels]
