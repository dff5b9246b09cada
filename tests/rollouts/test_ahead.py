"""Episodes played ahead by the asynchronous pipeline (`azr.rollouts.ahead`) against a token sampler that stands in for
the vLLM sidecar at its one edge (`LoraSync.complete`): a one-turn batch is still one request per batch, under the
batch's seed, whatever the environment; a feedback episode's second turn continues from the ids its first turn
sampled and the feedback's (run on the real sandbox in the producer), is seeded apart, and the episode is tagged with
its first turn's version."""

from __future__ import annotations

import copy
import time

import pytest

from azr.config import FeedbackConfig
from azr.data import load_tasks
from azr.envs import CodeEnvironment, FeedbackEnvironment, TaskPrompt
from azr.prompts import reference_answer
from azr.rollouts import VERSION, ChatTokens, Limits, Playbook
from azr.rollouts.pipeline import AsyncRollouts, batch_seed
from azr.rollouts.samplers import continuation
from azr.training.episodes.feedback import FeedbackRollout
from azr.training.episodes.rounds import COMPLETION, assistant
from azr.training.grpo import grpo_rows

G = 2
TASK = next(t for t in load_tasks("train") if t.id == "str-alternating-caps")
WRONG = reference_answer(TASK.solution.replace("upper = not upper", "upper = upper"), TASK.entry_point)
RIGHT = reference_answer(TASK.solution, TASK.entry_point)


class Engine:
    """Answers a context that is a first prompt with `first`'s ids, any other with `then`'s, decoded by its own copy
    of the tokenizer as `LoraSync` decodes; the version goes up by one after every request (the trainer publishing
    meanwhile). Records (one context per run of n, n, seed, version) per request."""

    def __init__(self, tokenizer, first: str, then: str, prompts: list[list[int]]):
        end = [tokenizer.eos_token_id]
        self.first, self.then = tokenizer(first)["input_ids"] + end, tokenizer(then)["input_ids"] + end
        self.prompts, self.version, self.calls = prompts, 0, []
        self.tokenizer, self.eos = copy.deepcopy(tokenizer), {tokenizer.eos_token_id}

    def complete(self, contexts, sampling):
        version, n = self.version, max(sampling.n, 1)
        self.calls.append(([list(c) for c in contexts[::n]], n, sampling.seed, version))
        self.version += 1
        return [
            continuation(self.tokenizer, ids, self.eos, [-0.25] * len(ids), version=version)
            for ids in (list(self.first if c in self.prompts else self.then) for c in contexts)
        ]


def _rows(hidden_only: bool) -> list[dict]:
    (row,) = grpo_rows([TASK], hidden_only=hidden_only)
    return [dict(row) for _ in range(G)] + [dict(row, task_id="again") for _ in range(G)]  # two groups


def _tokenize(tokenizer):
    chat = ChatTokens(tokenizer)
    return lambda prompts: [chat.prompt_ids(p) for p in prompts]


def _wait_for(condition, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _task(row):
    return TaskPrompt(str(row["task_id"]), row["prompt"], TASK)


@pytest.mark.parametrize("environment", ["none", "code"])
def test_a_one_turn_batch_is_one_request_under_the_batch_seed_as_before(tokenizer, environment):
    rows = _rows(hidden_only=False)
    prompt = _tokenize(tokenizer)([rows[0]["prompt"]])[0]
    engine = Engine(tokenizer, RIGHT, WRONG, [prompt])
    playbook = Playbook() if environment == "none" else Playbook(CodeEnvironment(), _task, tokenizer)
    pipeline = AsyncRollouts(engine, _tokenize(tokenizer), 1, G, seed=7, playbook=playbook)
    try:
        tagged = pipeline.swap(rows, 0)
        out = pipeline([r["prompt"] for r in tagged], trainer=None)
        _wait_for(lambda: len(engine.calls) == 2)  # the batch queued ahead, sampled by its own producer meanwhile
    finally:
        pipeline.close()
    # the pipeline's fill: the rows queued twice, each batch one request for both groups' G completions
    assert [(c[0], c[1], c[2]) for c in engine.calls] == [([prompt, prompt], G, batch_seed(7, 0, i)) for i in (0, 1)]
    assert set(out) == {"prompt_ids", "completion_ids", "logprobs", VERSION}  # no env_mask: no environment token
    assert out["prompt_ids"] == [prompt] * 2 * G
    assert out["completion_ids"] == [engine.first] * 2 * G
    assert out["logprobs"] == [[-0.25] * len(engine.first)] * 2 * G
    assert out[VERSION] == [0] * 2 * G == [r[VERSION] for r in tagged]


def test_feedback_episodes_play_ahead_turn_by_turn_with_the_sandbox_between(tokenizer, grader):
    rows = _rows(hidden_only=True)
    prompt = _tokenize(tokenizer)([rows[0]["prompt"]])[0]
    engine = Engine(tokenizer, WRONG, RIGHT, [prompt])
    feedback = FeedbackRollout(grader, FeedbackConfig(max_turns=2), {TASK.id: TASK})
    playbook = Playbook(feedback.env, _task, tokenizer, limits=Limits(max_turns=2), columns=feedback.columns)
    pipeline = AsyncRollouts(engine, _tokenize(tokenizer), 1, G, seed=3, playbook=playbook)
    try:
        tagged = pipeline.swap(rows, 0)
        out = pipeline([r["prompt"] for r in tagged], trainer=None)
        episodes = pipeline.last
    finally:
        pipeline.close()
    # the first batch's two turns, told apart by their seeds from the batch queued ahead (its producer runs alongside)
    seed = batch_seed(3, 0, 0)
    first, second = (next(c for c in engine.calls if c[2] == s) for s in (seed, seed + 1))
    assert (first[0], first[1], first[2]) == ([prompt, prompt], G, batch_seed(3, 0, 0))
    # turn 2: every episode on its own (n 1), seeded apart from turn 1, continuing from turn 1's ids as sampled
    assert second[1] == 1 and second[2] == batch_seed(3, 0, 0) + 1 and len(second[0]) == 2 * G
    for episode, context, mask, ids, logprobs in zip(
        episodes, second[0], out["env_mask"], out["completion_ids"], out["logprobs"], strict=True
    ):
        assert context[: len(prompt) + len(engine.first)] == prompt + engine.first
        shown = context[len(prompt) + len(engine.first) :]
        assert "Input: alternate_caps('hello world')" in tokenizer.decode(shown)  # the public test's feedback
        assert ids == context[len(prompt) :] + engine.then
        assert mask == [1] * len(engine.first) + [0] * len(shown) + [1] * len(engine.then)
        assert logprobs == [-0.25] * len(engine.first) + [0.0] * len(shown) + [-0.25] * len(engine.then)
        assert episode.finish_reason == "done" and len(episode.policy_turns) == 2
    # tagged with the version of its first turn, the older of the two that sampled it
    assert out[VERSION] == [first[3]] * 2 * G == [r[VERSION] for r in tagged] and second[3] > first[3]
    assert out[COMPLETION] == [assistant(RIGHT)] * 2 * G and out["feedback_turns"] == [2] * 2 * G
    assert [t["public_passed"] for t in out["feedback_episode"][0]] == [False, True]


def test_a_playbook_used_by_a_producer_thread_has_a_tokenizer_of_its_own(tokenizer):
    playbook = Playbook(FeedbackEnvironment(None, FeedbackConfig()), _task, tokenizer)  # type: ignore[arg-type]
    assert playbook.for_thread().tokenizer is not tokenizer
    ids_only = Playbook()
    assert ids_only.for_thread() is ids_only
