"""Evaluation draws from scripted policies, through the two faces `azr.evaluation.samplers.Draws` samples from:
`ScriptedEndpoint`, a `TextPolicy` that knows which (problem, sample index) each request is from the seed the draws
give it (`item_seed`), and answers what a test's `answer(problem, index, messages)` says; and `RecordingChat` /
`RecordingTokens`, a chat template and a `TokenSampler` that answer each context with the last message of the
conversation it renders, tagged with a policy version."""

from __future__ import annotations

import asyncio

from azr.data import Problem
from azr.evaluation.samplers import Draws, item_seed
from azr.rollouts import Continuation, Reply, Sampling


class ScriptedEndpoint:
    """A `TextPolicy` over `tasks`: each request's seed names its item (any of `samples` indices, `turns` turns);
    `seen` records the items asked, in order; `answer(task, index, messages)` is the test's."""

    def __init__(self, tasks, sampling: Sampling, samples: int = 8, turns: int = 3):
        self.items = {
            item_seed(sampling.seed, Problem(t), i, turn): (t, i)
            for t in tasks
            for i in range(samples)
            for turn in range(1, turns + 1)
        }
        self.seen: list[tuple[str, int]] = []

    def answer(self, task, index: int, messages: list[dict]) -> str:
        raise NotImplementedError

    async def reply(self, messages, tools, max_new_tokens, seed):
        task, index = self.items[seed]
        self.seen.append((task.id, index))
        return Reply({"role": "assistant", "content": self.answer(task, index, messages)})


def endpoint_draws(policy, sampling: Sampling, chunk: int = 3) -> Draws:
    """`policy`'s draws, its requests of a call awaited together."""

    def together(asked):
        async def every():
            return await asyncio.gather(*asked)

        return asyncio.run(every())

    return Draws(sampling, text=policy, replies=together, chunk=chunk)


class RecordingChat:
    """A chat template double: a conversation renders as one id, its index among those rendered."""

    tokenizer = type("Tokenizer", (), {"pad_token_id": 0})()

    def __init__(self):
        self.rendered: list[list[dict]] = []

    def prompt_ids(self, messages, tools=None):
        self.rendered.append(list(messages))
        return [len(self.rendered) - 1]


class RecordingTokens:
    """A token sampler that answers each context with the last message of the conversation it renders (or `text`),
    at `version`, and records the contexts and settings."""

    def __init__(self, chat: RecordingChat, version: int = 5, text: str | None = None):
        self.chat, self.version, self.text, self.calls = chat, version, text, []

    def complete(self, contexts, sampling):
        self.calls.append(([self.chat.rendered[c[0]] for c in contexts], sampling))
        return [
            Continuation([2], self.text or str(self.chat.rendered[c[0]][-1]["content"]), "stop", version=self.version)
            for c in contexts
        ]
