"""A scripted policy for feedback episodes, for tests that need them without a model that can repair: on the first
six training tasks, task i answers right at once (i % 3 == 0), wrong then repaired (1), or wrong twice (2). As an
endpoint the tests serve `answer` from a loopback stub; at the token level `ScriptedTokens` reads the task and the turn
from the context it is asked to continue and records every context and every answer's ids."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import http_stub
from http_stub import StubServer

from azr.data import load_tasks
from azr.prompts import reference_answer
from azr.rollouts import ChatTokens, Continuation

TASKS = load_tasks("train")[:6]
BY_PROMPT = {t.prompt: (i, t) for i, t in enumerate(TASKS)}
WRONG = "```python\ndef nothing():\n    return None\n```\nFinal answer: nothing"


def plan(i: int, turn: int) -> str:
    return "right" if i % 3 == 0 or (i % 3 == 1 and turn == 2) else "wrong"


def answer(i: int, task, turn: int) -> str:
    return reference_answer(task.solution, task.entry_point) if plan(i, turn) == "right" else WRONG


class ScriptedTokens:
    """A `TokenSampler`: each answer's ids closed by the end-of-turn token; `contexts` and `sampled` in order."""

    model = None  # no generation config of its own

    def __init__(self, tokenizer):
        self.tokenizer, self.contexts, self.sampled = tokenizer, [], []

    def complete(self, contexts, sampling):
        outs = []
        for context in contexts:
            text = self.tokenizer.decode(context)
            i, task = next((i, t) for p, (i, t) in BY_PROMPT.items() if p in text)
            reply = answer(i, task, text.count("<|im_start|>assistant"))
            ids = self.tokenizer(reply, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
            self.contexts.append(list(context))
            self.sampled.append(ids)
            outs.append(Continuation(ids, reply, "stop", [-0.5] * len(ids)))
        return outs


def scripted_local(tokenizer, template_kwargs: dict, sampler: ScriptedTokens | None = None):
    """`azr gen`'s local policy over `sampler` (a fresh `ScriptedTokens` by default), its chat template rendered with
    the recipe's `template_kwargs` as a local model's is."""
    from azr.envs.gen import LocalModel

    return LocalModel(sampler or ScriptedTokens(tokenizer), ChatTokens(tokenizer, template_kwargs), None, "scripted")


@contextmanager
def chat_endpoint(monkeypatch, reply: Callable[[str, int], str]) -> Iterator[StubServer]:
    """A real loopback chat endpoint whose answer is `reply(user prompt, turn)`, the turn read from the conversation
    (1 + the assistant messages in it)."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")

    def payload(path: str, body: dict) -> dict:
        messages = body["messages"]
        text = reply(messages[1]["content"], 1 + sum(m["role"] == "assistant" for m in messages))
        message = {"role": "assistant", "content": text}
        usage = {"prompt_tokens": 5, "completion_tokens": 5}
        return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": usage}

    monkeypatch.setattr(http_stub, "happy_payload", payload)
    with StubServer() as stub:
        yield stub
