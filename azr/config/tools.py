"""Recipe sections for tool use: the toolbox (`tools:`, with `tools.python` and `tools.web`) and episode collection
(`gen:`, which also collects execution-feedback episodes under `rollouts.env: feedback`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from azr.config.schema import field
from azr.config.selfplay import EndpointConfig

TOOL_NAMES = ("python_run", "web_search", "web_fetch")


@dataclass
class PythonToolConfig:
    timeout_s: float | None = field(
        None, "Wall-clock limit for one python_run program; null for sandbox.timeout_s.", gt=0, le=3600
    )
    allow_process_backend: bool = field(
        False,
        "Let python_run use the sandbox's 'process' backend, which has no network or filesystem isolation. Off: "
        "python_run is refused there, even when sandbox.backend resolved to it.",
    )


@dataclass
class WebToolConfig:
    search_backend: Literal["ddgs", "searxng"] = field(
        "ddgs", "web_search through the ddgs package, or a SearXNG-compatible JSON endpoint (searxng_url)."
    )
    searxng_url: str = field("", "Base URL of the SearXNG instance (its /search?format=json is asked).")
    max_results: int = field(5, "Results one web_search returns.", gt=0, le=100)
    search_timeout_s: float = field(15.0, "Deadline for one whole web_search.", gt=0, le=3600)
    fetch_timeout_s: float = field(
        20.0, "Deadline for one whole web_fetch, redirects and body included.", gt=0, le=3600
    )
    max_bytes: int = field(2_000_000, "Most bytes of a page's decoded body web_fetch reads.", gt=0, le=1 << 30)
    max_redirects: int = field(5, "Most redirects web_fetch follows, each checked by the address guard.", ge=0, le=100)
    allow_ports: list[int] = field(factory=lambda: [80, 443], help="Ports web_fetch may connect to.", le=65_535)
    allow_networks: list[str] = field(
        factory=list,
        help="FOR TESTS ONLY: networks (e.g. 127.0.0.1/32) web_fetch may reach although the address guard refuses "
        "them (loopback, private, link-local, ...). Empty in any real recipe.",
    )
    user_agent: str = field("azr-web-fetch/0.6 (+tool use in RL training)", "User-Agent header of web_fetch.")


@dataclass
class ToolsConfig:
    enabled: bool = field(
        False,
        "GRPO with tools: each completion is an episode of the tool loop (the episode runner, as in `azr gen`): the "
        "policy's calls are run and answered, the tool results masked out of the loss. `azr gen` always uses the "
        "tools.",
    )
    names: list[str] = field(
        factory=lambda: list(TOOL_NAMES), help="The tools the model is offered: python_run, web_search, web_fetch."
    )
    max_output_chars: int = field(
        8000, "A tool result longer than this is cut (and marked truncated).", gt=0, le=1 << 24
    )
    python: PythonToolConfig = field(factory=PythonToolConfig, help="python_run: the sandbox.")
    web: WebToolConfig = field(factory=WebToolConfig, help="web_search and web_fetch.")


@dataclass
class GenConfig:
    policy: Literal["local", "endpoint", "vllm"] = field(
        "local",
        "Who answers: 'local' (model: with gen.adapter, through transformers), 'endpoint' (gen.endpoint, any "
        "OpenAI-compatible server with native tool calls) or 'vllm' (azr starts a vLLM server on model: with the "
        "vllm: settings and tool calling on; the same as --vllm).",
    )
    adapter: str | None = field(None, "A peft adapter directory applied to the local model; null for none.")
    endpoint: EndpointConfig = field(
        factory=EndpointConfig, help="The endpoint for policy 'endpoint' (base_url, model, api_key_env, ...)."
    )
    tasks: str | None = field(None, "Tasks to run episodes on, as data.train takes them; null for data.train.")
    max_tasks: int | None = field(
        None, "Use at most this many tasks (in file order); null for all.", gt=0, le=10_000_000
    )
    samples: int = field(1, "Episodes per task.", gt=0, le=1024)
    max_turns: int = field(
        6, "Most model turns in one tool episode (a feedback episode takes feedback.max_turns).", gt=0, le=1000
    )
    max_tool_calls: int = field(
        8, "Most tool calls in one episode; calls past it are answered with an error.", ge=0, le=1000
    )
    max_tokens: int = field(4096, "Most tokens the model may generate over a whole episode.", gt=0, le=1 << 20)
    max_new_tokens: int = field(1024, "Most tokens in one model turn.", gt=0, le=1 << 20)
    temperature: float = field(0.7, "Sampling temperature.", ge=0, le=10)
    top_p: float = field(1.0, "Nucleus sampling threshold.", gt=0, le=1)
    concurrency: int = field(4, "Episodes in flight at once (requests to an endpoint run concurrently).", gt=0, le=1024)
