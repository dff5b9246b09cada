"""The episode seam on the tiny model: a scripted three-turn environment run by the one runner keeps every turn's
sampled ids inside the next turn's context unchanged, appends each observation as the chat template's own tokens,
masks them out of the loss, and hands TRL's `rollout_func` its columns; an endpoint policy plays the same
environment with messages only.

Real parts: the tiny model generates and its tokenizer's chat template renders; the environment is scripted (it is
the thing under test's caller, not a dependency).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from azr.rollouts import (
    ChatTokens,
    Continuation,
    Episode,
    GenerateSampler,
    Limits,
    Reply,
    Sampling,
    continuation,
    eos_ids,
    play_replies,
    rollout_columns,
    run_groups,
    run_text,
    start_groups,
)

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    return model, transformers.AutoTokenizer.from_pretrained(tiny_model_dir)


@dataclass(frozen=True)
class Task:
    id: str
    prompt: str


@dataclass
class Scripted:
    """Answers the policy `turns - 1` times ("try again, attempt k"), then ends; scores each episode by its turns."""

    turns: int = 3
    seen: list[str] = field(default_factory=list)
    tools = None

    def start(self, task: Task) -> list[dict]:
        return [{"role": "user", "content": task.prompt}]

    def respond(self, episode: Episode, text: str) -> list[dict] | None:
        self.seen.append(text)
        episode.turns[-1].info["attempt"] = len(episode.policy_turns)
        if len(episode.policy_turns) >= self.turns:
            return None
        return [{"role": "user", "content": f"try again, attempt {len(episode.policy_turns) + 1}"}]

    def score(self, episodes) -> None:
        for episode in episodes:
            episode.rewards = {"turns": float(len(episode.policy_turns))}
            episode.reward = episode.rewards["turns"]


class Recording:
    """A token sampler that records every context it is asked to continue (the real sampler behind it)."""

    def __init__(self, inner):
        self.inner, self.contexts, self.runs = inner, [], []

    def complete(self, contexts, sampling):
        self.contexts.append([list(c) for c in contexts])
        self.runs.append(sampling.n)
        return self.inner.complete(contexts, sampling)


class Fixed:
    """A token sampler that always writes `text` and ends its turn (eos), with a log-prob per token."""

    def __init__(self, tokenizer, text: str):
        self.tokenizer, self.text = tokenizer, text

    def complete(self, contexts, sampling) -> list[Continuation]:
        ids = self.tokenizer(self.text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
        return [continuation(self.tokenizer, list(ids), {self.tokenizer.eos_token_id}, [-0.5] * len(ids))] * len(
            contexts
        )


def test_three_turns_keep_each_turns_ids_in_the_next_context(tiny):
    model, tokenizer = tiny
    sampler = Recording(GenerateSampler(model, tokenizer, version=lambda: 5))  # the weights after 5 optimizer steps
    env = Scripted()
    sampling = Sampling(n=2, max_new_tokens=8, seed=3, temperature=1.0)
    groups = run_groups(
        env,
        [Task("a", "Say hi."), Task("b", "Add 1 and 2.")],
        sampler,
        ChatTokens(tokenizer),
        sampling,
        Limits(max_turns=3),
    )
    assert [[e.task_id for e in g] for g in groups] == [["a", "a"], ["b", "b"]]
    episodes = [e for g in groups for e in g]
    assert len(sampler.contexts) >= 3  # one call per turn (per token budget)
    assert sampler.runs[0] == 2 and set(sampler.runs[1:]) == {1}  # a group's first turn is one run of n contexts
    contexts = [c for call in sampler.contexts for c in call]
    for episode in episodes:
        assert episode.version == 5 and episode.reward == float(len(episode.policy_turns))
        policy = episode.policy_turns
        # every policy turn after the first continued exactly the ids sampled before it, never re-tokenized text
        for k in range(1, len(policy)):
            before = episode.prompt_ids + [i for t in episode.turns[: episode.turns.index(policy[k])] for i in t.ids]
            assert before in contexts
            first = episode.prompt_ids + policy[0].ids
            assert before[: len(first)] == first
        # the environment's tokens are masked out; the policy's are trained
        mask = episode.policy_mask
        assert len(mask) == len(episode.completion_ids)
        start = 0
        for turn in episode.turns:
            assert mask[start : start + len(turn.ids)] == [int(turn.kind == "policy")] * len(turn.ids)
            start += len(turn.ids)
    full = [e for e in episodes if e.finish_reason == "done"]
    assert full, "the tiny model always ends its turn within 8 tokens or runs out; at least one played 3 turns"
    for episode in full:
        assert [t.kind for t in episode.turns] == ["policy", "env", "policy", "env", "policy"]
        assert [t.info["attempt"] for t in episode.policy_turns] == [1, 2, 3]
        assert 0 in episode.policy_mask and episode.env_tokens > 0


def test_an_observation_is_the_chat_templates_own_tokens(tiny):
    _, tokenizer = tiny
    chat = ChatTokens(tokenizer)
    env = Scripted()
    (group,) = run_groups(
        env, [Task("a", "Say hi.")], Fixed(tokenizer, "hello there"), chat, Sampling(n=1), Limits(max_turns=3)
    )
    (episode,) = group
    assert episode.finish_reason == "done" and len(episode.policy_turns) == 3
    # the ids, decoded, are the template's rendering of the whole conversation: observations close the policy's
    # turn exactly as the template does and open the next one
    rendered = chat.render(episode.messages[:-1], generation=True) + "hello there" + tokenizer.eos_token
    assert tokenizer.decode(episode.context_ids) == rendered
    columns = rollout_columns([episode])
    assert columns["prompt_ids"] == [episode.prompt_ids] and columns["completion_ids"] == [episode.completion_ids]
    (logprobs,) = columns["logprobs"]
    (mask,) = columns["env_mask"]
    assert len(logprobs) == len(mask) == len(episode.completion_ids)
    assert all((lp == -0.5) == bool(m) for lp, m in zip(logprobs, mask, strict=True))  # 0.0 at environment tokens


def test_a_cut_off_turn_is_closed_before_the_observation(tiny):
    _, tokenizer = tiny
    chat = ChatTokens(tokenizer)
    assistant = {"role": "assistant", "content": "partial"}
    ended, _ = chat.observation(assistant, [{"role": "user", "content": "go on"}], ended=True)
    cut, text = chat.observation(assistant, [{"role": "user", "content": "go on"}], ended=False)
    assert text.startswith(tokenizer.eos_token) and cut[len(cut) - len(ended) :] == ended
    assert tokenizer.eos_token_id in eos_ids(tiny[0], tokenizer)


def test_single_turn_and_limits(tiny):
    model, tokenizer = tiny
    sampler = GenerateSampler(model, tokenizer)
    (group,) = run_groups(
        Scripted(turns=1),
        [Task("a", "Say hi.")],
        sampler,
        ChatTokens(tokenizer),
        Sampling(n=3, max_new_tokens=4, seed=1),
        Limits(max_turns=1),
    )
    assert all(e.finish_reason == "done" and e.env_mask == [1] * len(e.completion_ids) for e in group)
    assert "env_mask" not in rollout_columns(group)  # nothing to mask: TRL trains every token
    # A budget of 6 tokens over the episode stops it before a third turn of 4 tokens each could be drawn in full
    (group,) = run_groups(
        Scripted(),
        [Task("a", "Say hi.")],
        Fixed(tokenizer, "hi"),
        ChatTokens(tokenizer),
        Sampling(n=1, max_new_tokens=4),
        Limits(max_turns=5, max_tokens=4),
    )
    assert group[0].finish_reason == "max_tokens" and group[0].policy_tokens <= 4


class Endpoint:
    """A text policy: says `answer k` each turn, as an OpenAI-compatible endpoint would (messages, no ids)."""

    def __init__(self):
        self.calls = 0

    async def reply(self, messages, tools, max_new_tokens, seed):
        self.calls += 1
        return Reply({"role": "assistant", "content": f"answer {self.calls}"}, "stop", len(messages), 2)


def test_an_endpoint_policy_plays_the_same_environment():
    env = Scripted()
    episode = asyncio.run(run_text(env, Task("a", "Say hi."), Endpoint(), Sampling(max_new_tokens=16), Limits(3)))
    assert episode.finish_reason == "done" and not episode.tokenized
    assert [m["role"] for m in episode.messages] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert episode.answer == "answer 3" and episode.usage()["completion_tokens"] == 6
    with pytest.raises(ValueError, match="without token ids"):
        rollout_columns([episode])


class TwoProcesses:
    """This process of a world of two whose other process reports `other` live episodes at every gather."""

    rank, world, main = 0, 2, True

    def __init__(self, other: list[int]):
        self.other, self.seen = list(other), []

    def gather(self, obj):
        self.seen.append(obj)
        return [obj, self.other.pop(0) if self.other else 0]


def test_a_batched_message_policy_plays_the_same_environment_in_step_with_the_other_processes():
    """`play_replies` (an evaluation's sampler: many conversations a call): each turn one call for every live
    episode, as wide as the widest process's (the filler's replies dropped); a failed request ends its episode."""
    env, calls = Scripted(turns=2), []

    def reply(batch):
        calls.append([len(e.messages) for e in batch])
        return [
            Reply({"role": "assistant", "content": ""}, "error", error="boom")
            if e.task_id == "b"
            else Reply({"role": "assistant", "content": f"answer {len(e.policy_turns) + 1}"})
            for e in batch
        ]

    episodes = [g[0] for g in start_groups(env, [Task("a", "A."), Task("b", "B.")], None, 1)]
    processes = TwoProcesses([3, 3, 1])
    play_replies(env, episodes, reply, Limits(3), processes)
    a, b = episodes
    assert a.finish_reason == "done" and [t.text for t in a.policy_turns] == ["answer 1", "answer 2"]
    assert b.finish_reason == "error" and b.error == "boom" and not b.policy_turns
    assert processes.seen == [2, 1, 0]  # live episodes here at each turn; the loop ran while the other had any
    assert [len(c) for c in calls] == [3, 3, 1]  # as wide as the widest process: a's repeats filled the calls
    assert env.seen == ["answer 1", "answer 2"]  # the environment answered a's turns only, not the fillers'
