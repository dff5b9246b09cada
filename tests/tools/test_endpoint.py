"""The endpoint policy against the real vLLM CPU server on the tiny model, started with tool calling on (the flags
`azr gen --vllm` adds). The random tiny model writes no sensible calls of its own, so the wiring is checked with a
forced tool choice (the server's structured output writes the call), by feeding a call and its result back, and by a
whole `azr gen` run over the endpoint. One server start for the module (about 40 s)."""

from __future__ import annotations

import json

import pytest
from conftest import vllm_python

from azr.config import load_config
from azr.remote import ChatClient
from azr.tools import SCHEMAS, run_gen, vllm_tool_args

PICK = {
    "type": "function",
    "function": {
        "name": "pick",
        "description": "Pick one option.",
        "parameters": {
            "type": "object",
            "properties": {"option": {"type": "string", "enum": ["left", "right"]}},
            "required": ["option"],
        },
    },
}


@pytest.fixture(scope="module")
def tool_server(tiny_model_dir, tmp_path_factory):
    import os

    from azr.serving import VllmServer

    python, reason = vllm_python()
    if python is None:
        if os.environ.get("AZR_REQUIRE_VLLM") == "1":
            pytest.fail(f"AZR_REQUIRE_VLLM=1 but {reason}")
        pytest.skip(reason)
    base = ["--enforce-eager", "--dtype", "float32", "--max-num-seqs", "8", "--max-num-batched-tokens", "8192"]
    server = VllmServer(
        model=str(tiny_model_dir),
        python=python,
        served_model_name="tiny",
        max_model_len=2048,
        extra_args=vllm_tool_args(base),
        env={"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        log_path=tmp_path_factory.mktemp("vllm-tools") / "server.log",
        startup_timeout_s=540,
    )
    with server:
        yield server


def client(server) -> ChatClient:
    return ChatClient(server.base_url, server.model_name, timeout_s=120, max_retries=0)


def test_the_server_flags_turn_tool_calling_on():
    args = vllm_tool_args(["--dtype", "float32"])
    assert args[-3:] == ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    assert vllm_tool_args(["--tool-call-parser=qwen3_xml"]).count("--enable-auto-tool-choice") == 1


def test_native_tool_calls_come_back_as_tool_calls(tool_server):
    c = client(tool_server)
    messages = [{"role": "user", "content": "Pick one."}]
    choice = {"type": "function", "function": {"name": "pick"}}
    [reply] = c.run_all([c.achat(messages, max_tokens=40, temperature=0, tools=[PICK], tool_choice=choice)])
    assert reply.ok, reply.error
    [call] = reply.tool_calls
    assert call["function"]["name"] == "pick" and call["type"] == "function" and call["id"]
    assert json.loads(call["function"]["arguments"]) in ({"option": "left"}, {"option": "right"})


def test_a_call_and_its_result_go_back_to_the_server(tool_server):
    c = client(tool_server)
    call = {"id": "call_1", "type": "function", "function": {"name": "python_run", "arguments": '{"code": "print(1)"}'}}
    messages = [
        {"role": "user", "content": "What does print(1) print?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "1"},
    ]
    [reply] = c.run_all([c.achat(messages, max_tokens=8, temperature=0, tools=list(SCHEMAS.values()))])
    assert reply.ok, reply.error
    assert reply.usage.prompt_tokens > 300  # the tool schemas and the tool result were rendered into the prompt


def test_azr_gen_over_the_endpoint(tool_server, tmp_path, write):
    recipe = write(
        "gen.yaml",
        "sandbox: {workers: 1, backend: bwrap}\nlogging: {console: plain}\ntools: {names: [python_run]}\n"
        f"gen: {{policy: endpoint, endpoint: {{base_url: '{tool_server.base_url}', model: tiny, max_retries: 0}}, "
        "max_tasks: 3, samples: 2, max_turns: 2, max_new_tokens: 24, concurrency: 6}\n",
    )
    out = tmp_path / "rollouts.jsonl"
    assert run_gen(load_config(recipe, []), out) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 6 and len({r["id"] for r in records}) == 6
    assert all(
        r["model"] == {"policy": "endpoint", "name": "tiny", "adapter": None, "base_url": tool_server.base_url}
        for r in records
    )
    assert all(r["usage"]["completion_tokens"] > 0 and r["finish_reason"] != "error" for r in records)
