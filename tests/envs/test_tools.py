"""Parsing a turn and the tool environment played by the episode runner: every branch with a scripted endpoint
policy over the real toolbox and sandbox, and the local HF model on the tiny model at the token level (its template
renders the tools, its tokenizer's response template parses, each turn continues the episode's ids)."""

from __future__ import annotations

import asyncio

import pytest

from azr.config import SandboxConfig, ToolsConfig
from azr.envs import TaskPrompt, ToolEnvironment, events_of, final_answer, local_model
from azr.prompts import chat_messages
from azr.rollouts import Limits, Reply, Sampling, play, run_text, start_groups
from azr.sandbox import open_pool
from azr.tools import Toolbox, parse_turn

CALL = '<tool_call>\n{"name": "python_run", "arguments": {"code": "print(2 + 2)"}}\n</tool_call>'
ANSWER = "```python\ndef f(x):\n    return x + 1\n```\nFinal answer: f"


class Scripted:
    """A text policy that says the given texts in order (an endpoint without a tool parser: the calls stay in the
    text, read by the environment as a local model's would be)."""

    kind, name, control_tokens = "scripted", "scripted", ()

    def __init__(self, *texts: str, finish: str = "stop", fail_at: int | None = None):
        self.texts, self.finish, self.fail_at, self.seen = list(texts), finish, fail_at, []

    async def reply(self, messages, tools, max_new_tokens, seed):
        self.seen.append((list(messages), max_new_tokens, seed))
        index = len(self.seen) - 1
        if index == self.fail_at:
            return Reply({"role": "assistant", "content": ""}, "error", error="HTTP 503: overloaded")
        text = self.texts[min(index, len(self.texts) - 1)]
        return Reply(
            {"role": "assistant", "content": text}, self.finish if index == len(self.texts) - 1 else "stop", 10, 5
        )


@pytest.fixture(scope="module")
def toolbox():
    with open_pool("bwrap", workers=1) as pool:
        yield Toolbox(ToolsConfig(), SandboxConfig(timeout_s=5), pool=pool)


TASK = TaskPrompt("f", chat_messages("Write f."))


def episode(policy, toolbox, max_turns=6, max_tool_calls=8, max_tokens=4096, max_new_tokens=1024):
    env = ToolEnvironment(toolbox, None, max_turns, max_tool_calls)
    sampling = Sampling(n=1, max_new_tokens=max_new_tokens, seed=7)
    return asyncio.run(run_text(env, TASK, policy, sampling, Limits(max_turns, max_tokens)))


def test_a_direct_answer(toolbox):
    ep = episode(Scripted(ANSWER), toolbox)
    assert (
        ep.finish_reason == "answer" and final_answer(ep) == ANSWER and ep.usage()["turns"] == 1 and events_of(ep) == []
    )
    assert [m["role"] for m in ep.messages] == ["system", "user", "assistant"]


def test_a_call_its_result_then_the_answer(toolbox):
    policy = Scripted(f"Let me check.\n{CALL}", ANSWER)
    ep = episode(policy, toolbox)
    assert ep.finish_reason == "answer" and final_answer(ep) == ANSWER
    assistant, tool = ep.messages[2], ep.messages[3]
    assert assistant["content"] == "Let me check."
    call = assistant["tool_calls"][0]
    assert call["function"] == {"name": "python_run", "arguments": {"code": "print(2 + 2)"}}
    assert tool == {"role": "tool", "tool_call_id": call["id"], "name": "python_run", "content": "4"}
    assert [e.status for e in events_of(ep)] == ["ok"] and len(events_of(ep)) == 1
    assert policy.seen[1][0][-1] == tool and [s for _, _, s in policy.seen] == [7, 8]  # each turn its own seed


def test_several_calls_in_one_turn_string_arguments_and_the_parameters_alias(toolbox):
    text = (
        '<tool_call>{"name": "python_run", "arguments": "{\\"code\\": \\"print(1)\\"}"}</tool_call>'
        '<tool_call>{"name": "python_run", "parameters": {"code": "print(2)"}}</tool_call>'
    )
    ep = episode(Scripted(text, ANSWER), toolbox)
    assert [m["content"] for m in ep.messages if m["role"] == "tool"] == ["1", "2"]


def test_malformed_and_unknown_calls_get_error_messages_and_the_episode_goes_on(toolbox):
    text = (
        '<tool_call>{"name": "python_run", "arguments": {"code": </tool_call><tool_call>{"name": "shell"}</tool_call>'
    )
    ep = episode(Scripted(text, ANSWER), toolbox)
    tools = [m for m in ep.messages if m["role"] == "tool"]
    assert tools[0]["content"].startswith("[error] your tool call could not be read: the tool call is not valid JSON")
    assert tools[0]["name"] == "python_run"
    assert tools[1]["content"].startswith("[error] unknown tool 'shell'")
    assert ep.finish_reason == "answer" and [e.status for e in events_of(ep)] == ["error", "error"]


def test_calls_inside_reasoning_are_not_run(toolbox):
    ep = episode(Scripted(f"<think>maybe {CALL}</think>\n{ANSWER}"), toolbox)
    assert ep.finish_reason == "answer" and events_of(ep) == []
    assert ep.messages[-1]["reasoning_content"].startswith("maybe <tool_call>")
    assert ep.messages[-1]["content"] == ANSWER


def test_an_unclosed_call_on_the_last_turn_is_a_parse_error(toolbox):
    ep = episode(Scripted('<tool_call>{"name": "python_run", "arguments": {"code": "pri'), toolbox, max_turns=2)
    assert ep.finish_reason == "parse_error"
    assert all("never closed" in m["content"] for m in ep.messages if m["role"] == "tool")


def test_turn_call_and_token_limits(toolbox):
    assert episode(Scripted(CALL), toolbox, max_turns=3).finish_reason == "max_turns"
    many = episode(Scripted(CALL + CALL + CALL, ANSWER), toolbox, max_tool_calls=2)
    assert [m["content"][:30] for m in many.messages if m["role"] == "tool"][2].startswith("[error] tool call limit")
    assert [e.status for e in events_of(many)] == ["ok", "ok", "error"]
    cut = Scripted(CALL, CALL, CALL)
    ep = episode(cut, toolbox, max_tokens=12, max_new_tokens=5)  # 5 tokens a turn: the third gets 2, then none
    assert ep.finish_reason == "max_tokens" and [b for _, b, _ in cut.seen] == [5, 5, 2]
    assert episode(Scripted("```python\nx", finish="length"), toolbox).finish_reason == "max_tokens"


def test_a_policy_failure_ends_the_episode_with_error(toolbox):
    ep = episode(Scripted(CALL, ANSWER, fail_at=1), toolbox)
    assert (ep.finish_reason, ep.error) == ("error", "HTTP 503: overloaded")


def test_parse_with_the_tiny_tokenizer_response_template(tiny_model_dir):
    from transformers import AutoTokenizer

    from azr.tools import SCHEMAS

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tools = list(SCHEMAS.values())
    prefix = tok.apply_chat_template(
        chat_messages("t"), tools=tools, tokenize=False, add_generation_prompt=True, enable_thinking=False
    )
    parsed = parse_turn(f"Checking.\n{CALL}", tok, prefix, tools)
    assert parsed.content == "Checking." and parsed.reasoning == ""
    assert (parsed.tool_calls[0].name, parsed.tool_calls[0].arguments) == ("python_run", {"code": "print(2 + 2)"})
    broken = parse_turn('<tool_call>{"name": "python_run", "arguments": {</tool_call>', tok, prefix, tools)
    assert broken.tool_calls[0].error and "not valid JSON" in broken.tool_calls[0].error


def test_the_tiny_template_renders_a_whole_tool_episode_prefix_preserving(tiny_model_dir):
    from transformers import AutoTokenizer
    from trl.chat_template_utils import (
        is_chat_template_prefix_preserving,
        is_chat_template_stop_token_trained,
        supports_tool_calling,
    )

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert supports_tool_calling(tok) and is_chat_template_prefix_preserving(tok)
    assert is_chat_template_stop_token_trained(tok)


def test_a_local_model_plays_the_tool_environment_at_the_token_level(tiny_model_dir, toolbox):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    local = local_model(model, tok, {"enable_thinking": False}, "tiny")
    env = ToolEnvironment(toolbox, None, 2, 8, local.parser(toolbox.schemas()))

    def play_once():
        (ep,) = start_groups(env, [TASK], local.chat, 1)[0]
        play(env, [ep], local.sampler, local.chat, local.sampling(1.0, 1.0, 24, seed=7), Limits(2, 4096))
        return ep

    first, again = play_once(), play_once()
    assert first.messages == again.messages and first.completion_ids == again.completion_ids  # the seed decides
    assert first.finish_reason in ("answer", "max_tokens", "max_turns", "parse_error")
    assert first.messages[2]["role"] == "assistant" and first.policy_tokens > 0
    assert "<tool_call>" not in first.messages[2]["content"]
    assert first.prompt_ids == local.chat.prompt_ids(TASK.messages, toolbox.schemas())  # the tools rendered


def test_a_tool_calls_arguments_with_a_lone_surrogate_escape_are_read_as_valid_text():
    text = '<tool_call>\n{"name": "python_run", "arguments": {"code": "print(\'\\ud800\')"}}\n</tool_call>'
    (call,) = parse_turn(text).tool_calls
    assert call.error is None and call.arguments == {"code": "print('\ufffd')"}
