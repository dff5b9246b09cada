"""GRPO's execution-feedback episodes (`rollouts.env: feedback`) on the real sandbox and the tiny model's tokenizer:
the ids of each turn stay in the next turn's context exactly as sampled, the feedback's tokens are the environment's
(masked), an episode stops once its public tests pass, a wrong repair stays wrong, and no feedback turn ever shows a
hidden test. The sampler here is scripted (it answers what a test needs); the slow tests at the end train two steps
on the tiny model through TRL's own generation and round, and through `azr train` with dynamic sampling and the
curriculum.
"""

from __future__ import annotations

import ast

import pytest
from recipes import tiny_grpo_args

from azr.config import FeedbackConfig
from azr.data import encode_all, load_tasks
from azr.envs import FeedbackEnvironment, TaskPrompt, public_checks
from azr.prompts import reference_answer
from azr.rollouts import ChatTokens, Continuation, Limits, Sampling, play, start_groups
from azr.training.episodes.feedback import FeedbackRollout, transcript
from azr.training.episodes.rounds import episode_completions

TASK = next(t for t in load_tasks("train") if t.id == "str-alternating-caps")
PUBLIC, HIDDEN = TASK.split_tests()
WRONG = reference_answer(TASK.solution.replace("upper = not upper", "upper = upper"), TASK.entry_point)
ALSO_WRONG = reference_answer(TASK.solution.replace('"".join(out)', '"".join(out).lower()'), TASK.entry_point)
RIGHT = reference_answer(TASK.solution, TASK.entry_point)


class Scripted:
    """A `TokenSampler` that answers the k-th turn of every episode with `answers[k]`'s ids (closed by the
    end-of-turn token) and records every context it was asked to continue."""

    def __init__(self, tokenizer, answers: list[str]):
        self.tokenizer = tokenizer
        self.ids = [tokenizer(a)["input_ids"] + [tokenizer.eos_token_id] for a in answers]
        self.turn, self.contexts, self.sampled = 0, [], []

    def complete(self, contexts, sampling):
        self.contexts.append([list(c) for c in contexts])
        ids = [list(self.ids[self.turn]) for _ in contexts]
        self.sampled.append(ids)
        self.turn += 1
        text = self.tokenizer.decode(ids[0], skip_special_tokens=True)
        return [Continuation(i, text, "stop", [-0.5] * len(i)) for i in ids]


def _row():
    """A feedback run's GRPO row: its `tests` are the hidden ones."""
    return {"task_id": TASK.id, "tests": encode_all(HIDDEN), "setup": "", "timeout_s": None}


def _episodes(tokenizer, grader, answers, n=2, max_turns=2, stop_on_pass=True):
    env = FeedbackEnvironment(grader, FeedbackConfig(max_turns=max_turns, stop_on_pass=stop_on_pass))
    chat = ChatTokens(tokenizer)
    (episodes,) = start_groups(env, [TaskPrompt.of(TASK)], chat, n)
    sampler = Scripted(tokenizer, answers)
    play(env, episodes, sampler, chat, Sampling(n=1), Limits(max_turns=max_turns))
    return episodes[0].prompt_ids, sampler, episodes


def test_turn_two_continues_from_the_ids_turn_one_sampled_and_the_feedback_is_masked(tokenizer, grader):
    prompt, sampler, episodes = _episodes(tokenizer, grader, [WRONG, RIGHT])
    assert len(sampler.contexts) == 2  # turn 1 for the group, turn 2 for both (both failed their public test)
    first = sampler.sampled[0][0]
    for episode, context in zip(episodes, sampler.contexts[1], strict=True):
        # the second turn's context: the prompt, then turn 1's ids exactly as sampled, then the feedback's ids
        assert context[: len(prompt)] == prompt
        assert context[len(prompt) : len(prompt) + len(first)] == first
        feedback = context[len(prompt) + len(first) :]
        assert episode.completion_ids == context[len(prompt) :] + sampler.sampled[1][0]
        assert episode.env_mask == [1] * len(first) + [0] * len(feedback) + [1] * len(sampler.sampled[1][0])
        assert episode.logprobs == [-0.5] * len(first) + [0.0] * len(feedback) + [-0.5] * len(sampler.sampled[1][0])
        assert episode.env_tokens == len(feedback) > 0
        text = tokenizer.decode(feedback)
        assert text.startswith("\n<|im_start|>user\n") and text.endswith("<|im_end|>\n<|im_start|>assistant\n")
        assert "Input: alternate_caps('hello world')" in text  # the failing public test is shown
        assert [c["passed"] for c in public_checks(episode)] == [False, True]
        assert episode.finish_reason == "done" and len(episode.policy_turns) == 2
    # what TRL would decode and score: the final answer, not the transcript
    columns = FeedbackRollout.columns(episodes)
    rows = [{key: values[i] for key, values in columns.items()} for i in range(len(episodes))]
    assert episode_completions(rows, ["transcript"] * 2) == [[{"role": "assistant", "content": RIGHT}]] * 2


def test_an_episode_stops_once_its_public_tests_pass(tokenizer, grader):
    _, sampler, episodes = _episodes(tokenizer, grader, [RIGHT, WRONG], max_turns=3)
    assert len(sampler.contexts) == 1
    assert all(len(e.policy_turns) == 1 and e.env_tokens == 0 and set(e.env_mask) == {1} for e in episodes)
    _, sampler, episodes = _episodes(tokenizer, grader, [RIGHT, RIGHT], max_turns=2, stop_on_pass=False)
    assert len(sampler.contexts) == 2 and all(len(e.policy_turns) == 2 for e in episodes)


def test_a_wrong_repair_stays_wrong_on_the_hidden_tests(tokenizer, grader):
    from azr.rewards import Rubric
    from azr.rewards.functions import TestsReward

    _, _, episodes = _episodes(tokenizer, grader, [WRONG, ALSO_WRONG], max_turns=2)
    assert [c["passed"] for c in public_checks(episodes[0])] == [False, False]
    rubric = Rubric((TestsReward(grader, partial_credit=False),), (1.0,), grader)
    env = FeedbackEnvironment(grader, FeedbackConfig(), rubric)
    env.score(episodes)
    assert [e.reward for e in episodes] == [0.0, 0.0]
    assert all(e.info["grade"]["tests_total"] == len(HIDDEN) for e in episodes)  # scored on the hidden tests only
    _, _, repaired = _episodes(tokenizer, grader, [WRONG, RIGHT], max_turns=2)
    env.score(repaired)
    assert [e.reward for e in repaired] == [1.0, 1.0]


def test_no_feedback_turn_shows_a_hidden_test(tokenizer, grader):
    """Every feedback turn of episodes that fail everything (each answer wrong on every test) is scanned for each
    hidden test's text and for its expected value."""
    broken = reference_answer(f"def {TASK.entry_point}(s):\n    return None\n", TASK.entry_point)
    _, _, episodes = _episodes(tokenizer, grader, [broken, broken, broken], n=2, max_turns=3)
    shown = [t["feedback"] for e in episodes for t in transcript(e) if t["feedback"]]
    assert len(shown) == 4
    shown += [tokenizer.decode(t.ids) for e in episodes for t in e.turns if t.kind == "env" and t.ids]
    assert len(shown) == 8
    literals = {
        str(node.value)
        for test in HIDDEN
        for node in ast.walk(ast.parse(test.source))
        if isinstance(node, ast.Constant)
    }
    literals = {v for v in literals if len(v) >= 3}  # every hidden input and expected value the test spells out
    assert {"a1b2c3", "A1b2C3", "123 !?", "ABCD", "AbCd"} <= literals
    for text in shown:
        for test in HIDDEN:
            assert test.source not in text
        for value in literals:
            assert value not in text, (value, text)


def test_the_rollout_reports_turns_repairs_and_public_overfit(grader):
    """The observer's per-turn figures from scored rows: one episode repaired at turn 2, one passing its public test
    but failing hidden ones (an alarm record), one right at once."""
    from azr.rollouts import ScoredBatch

    class Writer:
        def __init__(self):
            self.records = []

        def write(self, record):
            self.records.append(record)

    import torch

    writer = Writer()
    rollout = FeedbackRollout(grader, FeedbackConfig(max_turns=2), {TASK.id: TASK}, metrics=writer)
    turns = [
        [
            {"answer": WRONG, "public_passed": False, "feedback": "x", "feedback_tokens": 9},
            {"answer": RIGHT, "public_passed": True, "feedback": ""},
        ],
        [{"answer": WRONG, "public_passed": True, "feedback": "", "feedback_tokens": 0}],
        [{"answer": RIGHT, "public_passed": True, "feedback": "", "feedback_tokens": 0}],
    ]
    rows = [_row() | {"feedback_episode": t} for t in turns]
    details = [{"status": "passed"}, {"status": "failed", "tests_passed": 1, "tests_total": 4}, {"status": "passed"}]
    rollout.observe(ScoredBatch(3, rows, [None] * 3, [None] * 3, torch.zeros(3, 1), ["tests"], details))
    metrics = rollout.metrics()
    assert metrics["feedback/turns"] == pytest.approx(4 / 3, abs=1e-3)
    assert metrics["feedback/pass_turn1"] == pytest.approx(1 / 3, abs=1e-3)
    assert metrics["feedback/pass_turn2"] == pytest.approx(2 / 3, abs=1e-3)
    assert metrics["feedback/repaired_turn2"] == pytest.approx(1 / 2, abs=1e-3)
    assert metrics["feedback/feedback_tokens"] == pytest.approx(3.0, abs=1e-3)
    assert metrics["alarms/public_overfit"] == 1.0
    assert [r["rule"] for r in writer.records] == ["public_overfit"] and writer.records[0]["step"] == 3


@pytest.mark.slow(minutes=2)  # two GRPO steps of the tiny model, three turns per episode
@pytest.mark.timeout(600)
def test_grpo_trains_feedback_episodes_through_trls_round(tiny_model_dir, grader, tmp_path):
    """Two GRPO steps on the tiny model with TRL's own generation (HF generate): every later turn continues from
    the ids of the turns before it as they were sampled, TRL's batch masks exactly the feedback tokens out of the
    loss (its tool mask is our env mask), and the rewards score each episode's final answer on the hidden tests."""

    from azr.config import ModelConfig
    from azr.models.loading import build_model_and_tokenizer
    from azr.rewards.functions import TestsReward
    from azr.training import grpo_dataset
    from azr.training.trl.private import TrainerBatches
    from azr.training.trl.trainer import AZRGRPOTrainer

    model, tokenizer = build_model_and_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))
    tasks = load_tasks("train")[:4]
    rollout = FeedbackRollout(grader, FeedbackConfig(max_turns=3, max_chars=120), {t.id: t for t in tasks})
    scored: list[list] = []

    def tests(completions, **columns):
        scored.append([c[0]["content"] for c in completions])
        return TestsReward(grader)(completions=completions, **columns)

    tests.__name__ = "tests_reward"
    trainer = AZRGRPOTrainer(
        model=model,
        reward_funcs=[tests],
        args=tiny_grpo_args(
            tmp_path / "checkpoints",
            max_completion_length=16,
            max_steps=2,
            logging_steps=1,
            learning_rate=1e-3,
            save_strategy="no",
        ),
        train_dataset=grpo_dataset(tasks, hidden_only=True),
        processing_class=tokenizer,
        rollout_func=rollout,
        grader=grader,
    )
    calls: list[tuple[list[list[int]], list[list[int]]]] = []
    generate = TrainerBatches.generate_ids

    def recorded(self, prompt_ids, n):
        ids, logprobs = generate(self, prompt_ids, n)
        calls.append(([list(p) for p in prompt_ids], ids))
        return ids, logprobs

    batches = []
    prepare = AZRGRPOTrainer._generate_and_score_completions

    def kept(self, inputs):
        batch = prepare(self, inputs)
        batches.append((batch, [e.env_mask for e in rollout.last], list(rollout.last)))
        return batch

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TrainerBatches, "generate_ids", recorded)
        patch.setattr(AZRGRPOTrainer, "_generate_and_score_completions", kept)
        trainer.train()
    # a random policy fails its public test: every episode takes all three turns
    assert len(calls) == 2 * 3
    for round_ in range(2):
        first, second, third = calls[3 * round_ : 3 * round_ + 3]
        for i, context in enumerate(second[0]):
            prompt = first[0][i]
            assert context[: len(prompt) + len(first[1][i])] == prompt + first[1][i]
        for i, context in enumerate(third[0]):
            assert context[: len(second[0][i]) + len(second[1][i])] == second[0][i] + second[1][i]
    for batch, masks, episodes in batches:
        for row, (mask, episode) in enumerate(zip(masks, episodes, strict=True)):
            width = len(mask)
            assert batch["tool_mask"][row, :width].tolist() == mask
            assert batch["completion_ids"][row, :width].tolist() == episode.completion_ids
            assert 0 in mask and len(episode.policy_turns) == 3
    # each scored completion is an episode's last answer, not its transcript
    assert [len(s) for s in scored] == [4, 4]
    assert scored[-1] == [e.answer for e in batches[-1][2]]


def test_asynchronous_grpo_with_feedback_is_taken_at_load():
    """The pipeline plays whole episodes ahead (the public tests run between turns in its producer), so feedback
    episodes and `sampling.max_staleness` go together."""
    from azr.config import load_config
    from azr.config.recipe import check_staleness

    sets = ["model.name_or_path=m", "rollouts.env=feedback", "sampling.max_staleness=1", "vllm.mode=adapter"]
    cfg = load_config(None, sets)
    check_staleness(cfg)
    assert cfg.rollouts.env == "feedback" and cfg.sampling.max_staleness == 1


@pytest.mark.slow(minutes=3)  # azr train: two GRPO steps of the tiny model, up to three rounds a step
@pytest.mark.timeout(900)
def test_feedback_episodes_with_dynamic_sampling_and_the_curriculum(tiny_model_dir, tmp_path):
    """Issue 40: `rollouts.env: feedback` with `sampling.dynamic` and the curriculum through `azr train` on the tiny
    model and the real sandbox. A group is `num_generations` episodes of one task; dynamic sampling keeps a group by
    its episodes' rewards (a reward that tells the random policy's final answers apart), carries the extra group
    over to the next batch, and every trained row is an episode with its feedback masked; the curriculum counts
    each graded episode once (not once per turn), and metrics.jsonl has both sections' keys."""
    import json

    from recipes import tiny_recipe, write_recipe

    from azr.config import load_config
    from azr.training.run import run_train
    from azr.training.trl.trainer import AZRGRPOTrainer

    out = tmp_path / "run"
    recipe = tiny_recipe(
        tiny_model_dir,
        out,
        grpo={"max_completion_length": 8, "save_steps": 1},
        rewards=[{"name": "tests", "weight": 1.0}, {"name": "recipes:answer_parity_reward", "weight": 1.0}],
        rollouts={"env": "feedback"},
        feedback={"max_turns": 2, "max_chars": 60},
        sampling={"dynamic": True, "oversample": 1.5, "max_attempts": 2, "carry_over": 1},
        curriculum={"enabled": True},
    )
    trained = []  # (tool_mask, completion_mask) of every row of every batch TRL trained
    prepare = AZRGRPOTrainer._generate_and_score_completions

    def kept(self, inputs):
        batch = prepare(self, inputs)
        trained.append((batch["tool_mask"].tolist(), batch["completion_mask"].tolist()))
        return batch

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(AZRGRPOTrainer, "_generate_and_score_completions", kept)
        assert run_train(load_config(write_recipe(tmp_path / "recipe.yaml", recipe))) == 0

    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    grpo = [m for m in metrics if m.get("phase") == "grpo" and "sampling/kept_share" in m]
    assert [m["step"] for m in grpo] == [1, 2]
    assert all("feedback/turns" in m and "feedback/pass_turn2" in m for m in grpo)
    assert grpo[0]["sampling/carried_over"] >= 1  # three groups of differing episodes for a batch of two
    generations = [json.loads(line) for p in sorted((out / "generations").glob("*.jsonl")) for line in p.open()]
    for start in range(0, len(generations), 2):  # in generation order: groups of num_generations episodes
        group = generations[start : start + 2]
        assert len({r["task_id"] for r in group}) == 1 and all(r["turns"] for r in group)
    saved = {
        s: json.loads((out / "checkpoints" / f"checkpoint-{s}" / "sampling_state.json").read_text()) for s in (1, 2)
    }
    graded = sum(r["status"] != "error" for r in generations if r["step"] == 1)
    assert sum(t["attempts"] for t in saved[1]["groups"]["curriculum"].values()) == graded  # one per episode
    assert saved[1]["totals"]["trained"] == 2 and saved[2]["totals"]["trained"] == 4
    assert len(trained) == 2
    for tool_mask, completion_mask in trained:  # every trained row: an episode, its feedback tokens masked out
        assert len(tool_mask) == 4
        for tools, completion in zip(tool_mask, completion_mask, strict=True):
            assert 0 in [t for t, c in zip(tools, completion, strict=True) if c]
