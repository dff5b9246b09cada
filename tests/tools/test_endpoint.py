"""The endpoint policy against the real vLLM CPU server on the tiny model, started with tool calling on (the flags
`azr gen --vllm` adds). The random tiny model writes no sensible calls of its own, so the wiring is checked with a
structured output that makes it write one call (the server's hermes parser returns it as a native tool call), by
feeding a call and its result back, and by a whole `azr gen` run over the endpoint. One server start for the module
(about 40 s on an idle machine)."""

from __future__ import annotations

import json

import pytest
from conftest import VLLM_CPU_ARGS, VLLM_CPU_ENV, require_vllm_python

from azr.config import load_config
from azr.envs import run_gen, vllm_tool_args
from azr.remote import ChatClient
from azr.tools import SCHEMAS


@pytest.fixture(scope="module")
def tool_server(tiny_model_dir, tmp_path_factory):
    from azr.serving import VllmServer

    python = require_vllm_python()
    server = VllmServer(
        model=str(tiny_model_dir),
        python=python,
        served_model_name="tiny",
        max_model_len=2048,
        extra_args=vllm_tool_args(VLLM_CPU_ARGS),
        env=VLLM_CPU_ENV,
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


CALL_TEXT = '<tool_call>\n{"name": "python_run", "arguments": {"code": "print(6 * 7)"}}\n</tool_call>'
# The random tiny model writes no call of its own: vLLM's structured output makes it write this one, as text, and the
# server's hermes parser turns it into a native tool call (a forced tool_choice only constrains the call's opening).
# The budget leaves room for a path through the tokenizer other than its shortest (51 tokens with the tiny one).
FORCE_CALL = {"structured_outputs": {"choice": [CALL_TEXT]}}


@pytest.mark.slow(minutes=0.8)  # starts a vLLM server
def test_native_tool_calls_come_back_as_tool_calls(tool_server):
    c = ChatClient(tool_server.base_url, tool_server.model_name, timeout_s=120, max_retries=0, extra_body=FORCE_CALL)
    messages = [{"role": "user", "content": "What is 6 * 7?"}]
    [reply] = c.run_all([c.achat(messages, max_tokens=200, temperature=0, tools=list(SCHEMAS.values()))])
    assert reply.ok, reply.error
    [call] = reply.tool_calls
    assert call["function"]["name"] == "python_run" and call["type"] == "function" and call["id"]
    assert json.loads(call["function"]["arguments"]) == {"code": "print(6 * 7)"}


@pytest.mark.slow  # starts a vLLM server
def test_an_endpoint_episode_runs_the_calls_and_sends_the_results_back(tool_server):
    import asyncio

    from azr.config import SandboxConfig, ToolsConfig
    from azr.envs import TaskPrompt, ToolEnvironment, events_of
    from azr.prompts import chat_messages
    from azr.rollouts import Limits, run_text
    from azr.rollouts import Sampling as Budget
    from azr.tools import EndpointPolicy, Sampling, Toolbox

    c = ChatClient(tool_server.base_url, tool_server.model_name, timeout_s=120, max_retries=0, extra_body=FORCE_CALL)
    toolbox = Toolbox(ToolsConfig(names=["python_run"]), SandboxConfig(workers=1, backend="bwrap"))
    policy = EndpointPolicy(c, Sampling(temperature=0), "tiny")
    env, task = ToolEnvironment(toolbox, None, 2, 8), TaskPrompt("q", chat_messages("What is 6 * 7?"))
    episode = asyncio.run(run_text(env, task, policy, Budget(max_new_tokens=1024, seed=1), Limits(max_turns=2)))
    assert [m["role"] for m in episode.messages] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    call, result = episode.messages[2]["tool_calls"][0], episode.messages[3]
    assert call["function"]["arguments"] == {"code": "print(6 * 7)"}  # an object in the record
    assert result == {"role": "tool", "tool_call_id": call["id"], "name": "python_run", "content": "42"}
    assert episode.finish_reason == "max_turns" and [e.status for e in events_of(episode)] == ["ok", "ok"]
    assert episode.usage()["prompt_tokens"] > 0 and episode.usage()["completion_tokens"] > 0


@pytest.mark.slow  # starts a vLLM server
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


@pytest.mark.slow  # starts a vLLM server
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


@pytest.mark.slow(minutes=0.8)  # starts a vLLM server
def test_azr_gen_with_vllm_serves_the_adapter_as_lora_and_stops_the_server(tiny_model_dir, tmp_path, write):
    """`azr gen --vllm` starts its own server (tool calling on) on model: with gen.adapter hot-loaded as LoRA, samples
    every episode through it, and leaves no server process behind."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    adapter = tmp_path / "adapter"
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir), LoraConfig(r=8, target_modules="all-linear")
    )
    model.save_pretrained(adapter)
    vllm = {"python": require_vllm_python(), "extra_args": VLLM_CPU_ARGS, "env": VLLM_CPU_ENV, "max_model_len": 2048}
    recipe = write(
        "gen-vllm.yaml",
        "sandbox: {workers: 1, backend: bwrap}\nlogging: {console: plain}\ntools: {names: [python_run]}\n"
        f"model: {{name_or_path: '{tiny_model_dir}'}}\nvllm: {json.dumps(vllm)}\n"
        f"gen: {{adapter: '{adapter}', max_tasks: 2, samples: 2, max_turns: 1, max_new_tokens: 16, concurrency: 4}}\n",
    )
    out = tmp_path / "rollouts.jsonl"
    before = set(vllm_servers_of(tiny_model_dir))
    assert run_gen(load_config(recipe, []), out, vllm=True) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 4 and all(
        r["model"]["policy"] == "vllm" and r["model"]["adapter"] == str(adapter) for r in records
    )
    assert all(r["finish_reason"] != "error" and r["usage"]["completion_tokens"] > 0 for r in records)
    assert set(vllm_servers_of(tiny_model_dir)) <= before  # the server it started is gone


def vllm_servers_of(model_dir) -> list[int]:
    """Pids of live vLLM API servers on this machine that serve `model_dir` (this test worker's own tiny model: the
    module's tool_server may be one of them; another worker's servers, such as the asynchronous demo's, are not)."""
    import os
    from pathlib import Path

    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"vllm.entrypoints.openai.api_server" in cmdline and os.fsencode(str(model_dir)) in cmdline:
                pids.append(int(entry.name))
    return [p for p in pids if p != os.getpid()]
