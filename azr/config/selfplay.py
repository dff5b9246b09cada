"""Recipe sections for remote models: the endpoint fields an opponent and a teacher share, self-play and teacher
assistance. Frontier replay is part of the curriculum (`azr.config.sampling`)."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any, Literal

from azr.config.schema import field
from azr.errors import ConfigError


@dataclass
class EndpointConfig:
    """Fields shared by the remote models (opponent, teacher)."""

    enabled: bool = field(False, "Use this remote model.")
    api: Literal["chat", "responses"] = field(
        "chat", "Chat Completions (any OpenAI-compatible server) or OpenAI Responses."
    )
    base_url: str = field("", "API base URL, e.g. https://api.together.xyz/v1 or http://127.0.0.1:8000/v1.")
    model: str = field("", "Model name at the endpoint.")
    api_key_env: str | None = field(None, "Name of the environment variable holding the API key (never the key).")
    max_tokens: int = field(
        4096, "Completion token budget; large enough for the answer after any reasoning.", gt=0, le=1 << 20
    )
    temperature: float = field(0.7, "Sampling temperature.", ge=0, le=10)
    top_p: float = field(1.0, "Nucleus sampling threshold.", gt=0, le=1)
    timeout_s: float = field(120.0, "Per-request timeout.", gt=0, le=86_400)
    max_retries: int = field(4, "Retries on 429/5xx/timeouts, with exponential backoff and jitter.", ge=0, le=100)
    concurrency: int = field(8, "Requests in flight at once.", gt=0, le=1024)
    reasoning_effort: Literal["low", "medium", "high"] | None = field(None, "Reasoning effort for models that take it.")
    extra_body: dict[str, Any] = field(
        factory=dict, help="Extra JSON fields sent with every request (provider options)."
    )
    price_in_per_mtok: float = field(0.0, "USD per million prompt tokens, for the cost in usage logs (0: none).", ge=0)
    price_out_per_mtok: float = field(0.0, "USD per million completion tokens (reasoning included).", ge=0)


def check_base_url(url: str, where: str) -> None:
    """A base URL a client can send to: http(s), a host, a port that is a number. A malformed one is the user's
    error (exit 2), not an outage to retry. The message never repeats the URL: it may carry a key."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"{where}: not a URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise ConfigError(f"{where}: expected an http:// or https:// URL, e.g. http://127.0.0.1:8000/v1")
    if not parts.hostname:
        raise ConfigError(f"{where}: the URL names no host")
    if port == 0:
        raise ConfigError(f"{where}: port 0 is not a port")


@dataclass
class SelfPlayConfig(EndpointConfig):
    weight: float = field(0.3, "w in the blended reward (1 - w) * base + w * self-play.", ge=0, le=1)
    scoreboard_every: int = field(
        10,
        "Write scoreboard.json and frontier.json into output_dir every this many steps, and at the end.",
        gt=0,
        le=10_000_000,
    )
    max_wait_s: float | None = field(
        None,
        "Longest wait for a batch's opponent after the policy has generated; late tasks count unavailable "
        "(null: wait; timeout_s and max_retries bound it).",
        gt=0,
        le=86_400,
    )


@dataclass
class TeacherConfig(EndpointConfig):
    pass


@dataclass
class TeacherAssistConfig:
    enabled: bool = field(
        False, "Ask the teacher for hints on tasks the policy failed; needs teacher and self_play enabled."
    )
    hint_prob_neither: float = field(0.5, "Chance of a hint when both policy and opponent failed a task.", ge=0, le=1)
    hint_prob_opponent_only: float = field(0.5, "Chance of a hint when only the opponent solved a task.", ge=0, le=1)
    max_hint_chars: int = field(600, "Hints are cut to this many characters (after removing code).", gt=0, le=1 << 24)
    solution_prob: float = field(0.0, "Chance of also asking for a full solution, saved to the SFT buffer.", ge=0, le=1)
    sft_buffer: str = field("teacher_solutions.jsonl", "SFT buffer file for teacher solutions, relative to output_dir.")
    hint_share: float = field(
        0.25, "Most share of a batch's prompt groups (rounded down) replaced by hinted retries, each whole.", ge=0, le=1
    )
