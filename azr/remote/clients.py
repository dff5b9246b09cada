"""Clients for remote models: any OpenAI-compatible server (/chat/completions, /completions) and OpenAI Responses.

Owns request bodies (native `tools` included), reply parsing (`tool_calls` and separated reasoning included), bounded
concurrency per event loop, timeouts and the retry loop (with the pieces of `azr.remote.resilience`; usage is counted
by `azr.remote.usage`); failures come back as `Reply(error=...)`, never raised. Built on httpx2
(huggingface_hub's HTTP stack, already installed) and tenacity rather than the openai SDK, whose built-in retries
hide attempts and Retry-After waits and which has no circuit breaker. Knows nothing of prompts, tasks or rewards.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import random
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

from azr.config import EndpointConfig, check_base_url
from azr.errors import ConfigError
from azr.inputs import env_limit, json_depth, load_json
from azr.remote.resilience import CircuitBreaker, Secret, redact, retry_after
from azr.remote.usage import Usage, UsageTotals, usage_from
from azr.secrets import public_url

log = logging.getLogger(__name__)
# A reply is a few kilobytes (a long completion with its reasoning, a megabyte): these bound what a broken or hostile
# server can make the client hold and parse.
MAX_RESPONSE_BYTES = ("AZR_MAX_RESPONSE_BYTES", 8 << 20)
MAX_RESPONSE_DEPTH = ("AZR_MAX_RESPONSE_DEPTH", 64)
_RETRY_STATUSES = frozenset({408, 409, 429})  # and every 5xx; any other 4xx is the request's fault, not retried


@dataclass
class Reply:
    text: str | None  # None when the request failed for good (after retries, or refused by the open circuit)
    finish_reason: str | None
    usage: Usage
    latency_s: float  # first attempt to last, backoff waits included, queueing for a slot not
    attempts: int
    error: str | None = None  # one line, never containing the API key
    tool_calls: list[dict] | None = None  # native tool calls, as the server sent them (arguments: JSON text)
    reasoning: str | None = None  # reasoning_content / reasoning, where the server separates it

    @property
    def ok(self) -> bool:
        return self.error is None and self.text is not None


class _AttemptError(Exception):
    def __init__(self, message: str, retryable: bool, retry_after: float | None = None):
        super().__init__(message)
        self.retryable, self.retry_after = retryable, retry_after


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts, as some servers send them
        content = "".join(p.get("text") or "" for p in content if isinstance(p, dict))
    if content is not None and not isinstance(content, str):
        raise TypeError(f"content is {type(content).__name__}, not text")
    return content or ""  # None: the budget went to reasoning or tool calls; an empty answer, not a failure


class ChatClient:
    """Any OpenAI-compatible server: /chat/completions and /completions under `base_url`.

    Concurrency is bounded per event loop (each loop gets its own semaphore and connection pool). The circuit opens
    after `breaker_threshold` consecutive failed requests (0: never) and half-opens after `breaker_cooldown_s`.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str | None = None,
        timeout_s: float = 120,
        max_retries: int = 4,
        concurrency: int = 8,
        extra_body: dict | None = None,
        reasoning_effort: str | None = None,
        prices: tuple[float, float] | None = None,
        backoff_s: float = 1.0,
        backoff_max_s: float = 30.0,
        retry_after_max_s: float = 60.0,
        breaker_threshold: int = 8,
        breaker_cooldown_s: float = 30.0,
    ):
        if not base_url or not model:
            raise ConfigError(f"endpoint: base_url and model are required (got {base_url!r}, {model!r})")
        check_base_url(base_url, "base_url")
        if timeout_s <= 0 or max_retries < 0 or concurrency < 1:
            raise ConfigError("endpoint: needs timeout_s > 0, max_retries >= 0 and concurrency >= 1")
        self.base_url, self.model, self.api_key_env = base_url.rstrip("/"), model, api_key_env
        public_url(base_url)  # registers the key a URL may carry (user:KEY@, ?api-key=KEY) with the redaction
        self.timeout_s, self.max_retries, self.concurrency = float(timeout_s), int(max_retries), int(concurrency)
        self.extra_body, self.reasoning_effort = dict(extra_body or {}), reasoning_effort
        self.prices = tuple(prices) if prices else None
        self.backoff_s, self.backoff_max_s, self.retry_after_max_s = backoff_s, backoff_max_s, retry_after_max_s
        self._key = Secret(_read_key(api_key_env)) if api_key_env else None
        self.breaker = CircuitBreaker(breaker_threshold, breaker_cooldown_s)
        self.usage = UsageTotals()
        # Semaphores and connection pools belong to one event loop; weak keys drop them with their loop.
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Any, Any]] = weakref.WeakKeyDictionary()
        self._loops_lock = threading.Lock()

    @classmethod
    def from_config(cls, cfg: EndpointConfig) -> ChatClient:
        """From an endpoint section of the recipe (`self_play`, `teacher`, `gen.endpoint`)."""
        names = ("api_key_env", "timeout_s", "max_retries", "concurrency", "extra_body", "reasoning_effort")
        prices = (cfg.price_in_per_mtok, cfg.price_out_per_mtok)
        kwargs = {name: getattr(cfg, name) for name in names}
        return cls(cfg.base_url, cfg.model, prices=prices if any(prices) else None, **kwargs)

    def __repr__(self) -> str:
        name, key_env = type(self).__name__, self.api_key_env
        return f"{name}(base_url={public_url(self.base_url)!r}, model={self.model!r}, api_key_env={key_env!r})"

    # -- request bodies and replies; ResponsesClient overrides these -------------------------------------------------

    def _chat_request(self, messages: list[dict], params: dict) -> tuple[str, dict]:
        body = {"model": self.model, "messages": messages, **params}
        if self.reasoning_effort:
            body["reasoning_effort"] = self.reasoning_effort
        return "chat/completions", {**body, **self.extra_body}

    def _complete_request(self, prompt: str, params: dict) -> tuple[str, dict]:
        body = {"model": self.model, "prompt": prompt, **params}
        return "completions", {**body, **self.extra_body}

    def _parse(self, path: str, data: dict) -> tuple[str, str | None, Usage, dict]:
        choice = data["choices"][0]
        # reasoning_content (vLLM, DeepSeek) stays out of the text: only the answer is graded
        text = _text(choice["text"] if path == "completions" else choice["message"].get("content"))
        extra = {}
        if path != "completions":
            message = choice["message"]
            calls = message.get("tool_calls")
            if calls is not None and not isinstance(calls, list):
                raise TypeError(f"tool_calls is {type(calls).__name__}, not a list")
            reasoning = message.get("reasoning_content", message.get("reasoning"))
            extra = {"tool_calls": calls or None, "reasoning": reasoning if isinstance(reasoning, str) else None}
        return text, choice.get("finish_reason"), usage_from(data.get("usage")), extra

    # -- public calls ------------------------------------------------------------------------------------------------

    async def achat(
        self,
        messages: list[dict],
        *,
        max_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop: list[str] | None = None,
        tools: list[dict] | None = None,
        tool_choice: str | dict | None = None,
    ) -> Reply:
        """One chat request. `tools` (JSON schemas) and `tool_choice` are sent as given; the reply's `tool_calls`
        come back as the server wrote them."""
        params = _params(max_tokens=max_tokens, temperature=temperature, top_p=top_p, seed=seed, stop=stop)
        params |= {k: v for k, v in (("tools", tools), ("tool_choice", tool_choice)) if v is not None}
        return await self._request(*self._chat_request(messages, params))

    async def acomplete(self, prompt: str, **params: Any) -> Reply:
        """A raw prompt to /completions; the keyword arguments of `achat`."""
        return await self._request(*self._complete_request(prompt, _params(**params)))

    def chat_many(self, conversations: list[list[dict]], **params: Any) -> list[Reply]:
        """Replies in input order; requests run concurrently, at most `concurrency` at once."""
        return self.run_all([self.achat(c, **params) for c in conversations])

    def complete_many(self, prompts: list[str], **params: Any) -> list[Reply]:
        return self.run_all([self.acomplete(p, **params) for p in prompts])

    async def aclose(self) -> None:
        """Close the running loop's connections (the *_many calls close their own)."""
        with self._loops_lock:
            state = self._loops.pop(asyncio.get_running_loop(), None)
        if state is not None:
            await state[1].aclose()

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- machinery ---------------------------------------------------------------------------------------------------

    def run_all(self, requests: list[Any]) -> list[Reply]:
        """Await these `achat`/`acomplete` coroutines together from sync code (a private loop if this thread already
        runs one) and close this loop's connections afterwards; the replies in order."""

        async def batch() -> list[Reply]:
            try:
                return list(await asyncio.gather(*requests))
            finally:
                await self.aclose()

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(batch())
        # Sync code on a thread whose loop is running: asyncio.run refuses there, so use a private loop elsewhere.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, batch()).result()

    def _loop_state(self) -> tuple[asyncio.Semaphore, Any]:
        import httpx2

        loop = asyncio.get_running_loop()
        with self._loops_lock:
            if loop not in self._loops:
                headers = {"Authorization": f"Bearer {self._key.value}"} if self._key else {}
                http = httpx2.AsyncClient(
                    base_url=self.base_url + "/",
                    headers=headers,
                    timeout=self.timeout_s,
                    limits=httpx2.Limits(max_connections=self.concurrency),
                )
                self._loops[loop] = (asyncio.Semaphore(self.concurrency), http)
            return self._loops[loop]

    async def _request(self, path: str, body: dict) -> Reply:
        semaphore, http = self._loop_state()
        async with semaphore:
            self.usage._add(in_flight=1)
            try:
                reply = await self._attempts(http, path, body)
            finally:
                self.usage._add(in_flight=-1)
        self.usage._record(reply, self.prices)
        if reply.error:
            log.warning("%s %s failed after %d attempt(s): %s", self.model, path, reply.attempts, reply.error)
        return reply

    async def _attempts(self, http: Any, path: str, body: dict) -> Reply:
        import tenacity

        admission = self.breaker.admit()
        if admission == "open":
            self.usage._add(fast_failures=1)
            return Reply(None, None, Usage(), 0.0, 0, error="circuit open: too many consecutive failures, cooling down")
        probe = admission == "probe"

        def should_retry(exc: BaseException) -> bool:  # and stop retrying once the circuit has opened meanwhile
            return isinstance(exc, _AttemptError) and exc.retryable and (probe or not self.breaker.is_open())

        retrying = tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            retry=tenacity.retry_if_exception(should_retry),
            before_sleep=self._before_sleep,
            reraise=True,
        )
        start, attempts = time.monotonic(), 0
        try:
            async for attempt in retrying:
                with attempt:
                    attempts += 1
                    text, finish_reason, usage, extra = await self._attempt(http, path, body)
        except _AttemptError as exc:
            self.breaker.record(ok=not exc.retryable, probe=probe)  # a bad request is no sign of an outage
            return Reply(None, None, Usage(), time.monotonic() - start, attempts, error=str(exc))
        except BaseException:  # cancelled: a probe must still report, or the circuit would stay half-open for good
            if probe:
                self.breaker.record(ok=False, probe=True)
            raise
        self.breaker.record(ok=True, probe=probe)
        return Reply(text, finish_reason, usage, time.monotonic() - start, attempts, **extra)

    async def _attempt(self, http: Any, path: str, body: dict) -> tuple[str, str | None, Usage, dict]:
        import httpx2

        try:  # wait_for bounds the whole exchange; httpx's own timeout is per read, which a trickling body defeats
            status, headers, raw = await asyncio.wait_for(self._post(http, path, body), self.timeout_s)
        except (TimeoutError, httpx2.TimeoutException):
            raise _AttemptError(f"timeout after {self.timeout_s:g}s", retryable=True) from None
        except httpx2.HTTPError as exc:  # refused, reset, truncated body, protocol error
            raise _AttemptError(redact(f"{type(exc).__name__}: {exc}", self._key, 500), retryable=True) from None
        text = raw.decode("utf-8", errors="replace")
        if status >= 400:
            retryable = status in _RETRY_STATUSES or status >= 500
            raise _AttemptError(redact(f"HTTP {status}: {text}", self._key, 500), retryable, retry_after(headers))
        max_depth = env_limit(*MAX_RESPONSE_DEPTH)
        if json_depth(raw) > max_depth:  # json.loads would recurse once per level: a RecursionError, not a reply
            raise _AttemptError(
                f"response too deep: nested more than {max_depth} levels ({MAX_RESPONSE_DEPTH[0]}=N raises it)", False
            )
        try:
            return self._parse(path, load_json(text))  # a reply's lone surrogates become U+FFFD
        except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError) as exc:
            reason = f"malformed response: {type(exc).__name__}: {exc}"
            raise _AttemptError(redact(reason, self._key, 500), True) from None

    async def _post(self, http: Any, path: str, body: dict) -> tuple[int, Any, bytes]:
        """Status, headers and body of one POST, the body read only up to its limit: a hostile or broken server
        cannot make the client hold more (a reply past it is refused, not retried: it would come back as large)."""
        max_bytes = env_limit(*MAX_RESPONSE_BYTES)
        async with http.stream("POST", path, json=body) as resp:
            chunks, size = [], 0
            async for chunk in resp.aiter_bytes():
                size += len(chunk)
                if size > max_bytes:
                    raise _AttemptError(
                        f"response too large: more than {max_bytes:,} bytes ({MAX_RESPONSE_BYTES[0]}=N raises it)",
                        False,
                    )
                chunks.append(chunk)
            return resp.status_code, resp.headers, b"".join(chunks)

    def _wait(self, state: Any) -> float:
        exc = state.outcome.exception() if state.outcome else None
        after = getattr(exc, "retry_after", None)
        if after is not None:  # the server said when; capped so a huge value cannot stall a run
            return min(after, self.retry_after_max_s)
        exponential = self.backoff_s * 2 ** (state.attempt_number - 1)
        return min(self.backoff_max_s, exponential) + random.uniform(0, self.backoff_s)  # jitter de-synchronises

    def _before_sleep(self, state: Any) -> None:
        self.usage._add(retries=1)
        exc = state.outcome.exception()
        wait = state.next_action.sleep if state.next_action else 0.0
        log.info("%s: attempt %d failed (%s); retrying in %.2fs", self.model, state.attempt_number, exc, wait)


class ResponsesClient(ChatClient):
    """OpenAI Responses (/responses). `stop` and `seed` are not part of that API and are not sent."""

    def _chat_request(self, messages: list[dict], params: dict) -> tuple[str, dict]:
        return "responses", self._responses_body(messages, params)

    def _complete_request(self, prompt: str, params: dict) -> tuple[str, dict]:
        return "responses", self._responses_body(prompt, params)

    def _responses_body(self, input_: Any, params: dict) -> dict:
        if "tools" in params:
            raise ConfigError("api: 'responses' does not take tools in azr; use an endpoint with api 'chat'")
        body = {"model": self.model, "input": input_, "max_output_tokens": params["max_tokens"]}
        body |= {"temperature": params["temperature"], "top_p": params["top_p"]}
        if self.reasoning_effort:
            body["reasoning"] = {"effort": self.reasoning_effort}
        return {**body, **self.extra_body}

    def _parse(self, path: str, data: dict) -> tuple[str, str | None, Usage, dict]:
        if data.get("status") == "failed" or data.get("error"):
            raise ValueError(f"response failed: {data.get('error')}")
        text = data.get("output_text")
        if not isinstance(text, str):  # the raw API has no output_text (the SDK computes it): read message items
            parts = [
                part.get("text") or ""
                for item in data["output"]
                if item.get("type") == "message"
                for part in item.get("content") or []
                if part.get("type") == "output_text"
            ]
            text = "".join(parts)
        reason = (data.get("incomplete_details") or {}).get("reason")
        finish = "length" if reason == "max_output_tokens" else reason or data.get("status")
        return text, "stop" if finish == "completed" else finish, usage_from(data.get("usage")), {}


def build_client(cfg: EndpointConfig) -> ChatClient:
    """The client for an `EndpointConfig`, by its `api` ("chat" or "responses")."""
    kinds = {"chat": ChatClient, "responses": ResponsesClient}
    if cfg.api not in kinds:
        raise ConfigError(f"api: expected 'chat' or 'responses', got {cfg.api!r}")
    return kinds[cfg.api].from_config(cfg)


def _params(
    *, max_tokens: int, temperature: float = 1.0, top_p: float = 1.0, seed: int | None = None, stop: list | None = None
) -> dict:
    """Sampling fields of a chat or completions body; seed and stop only when given."""
    params = {"max_tokens": max_tokens, "temperature": temperature, "top_p": top_p, "seed": seed, "stop": stop}
    return {k: v for k, v in params.items() if v is not None}


def _read_key(name: str) -> str:
    value = os.environ.get(name, "").strip()
    if not value:
        raise ConfigError(f"api_key_env: environment variable {name} is not set or empty")
    return value
