"""API clients against real HTTP servers on 127.0.0.1: happy paths, faults, limits, key hygiene."""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from http_stub import COMPLETION_TOKENS, PROMPT_TOKENS, REASONING_TOKENS, Fault, StubServer

from azr.config import EndpointConfig
from azr.errors import ConfigError
from azr.remote.clients import ChatClient, ResponsesClient, build_client
from azr.remote.resilience import CircuitBreaker, parse_retry_after

KEY = "sk-test-SUPERSECRET-0123456789"
FAST = {"backoff_s": 0.01, "backoff_max_s": 0.05, "timeout_s": 5}  # small backoff keeps the file fast
ONE = [{"role": "user", "content": "hi"}]


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # a proxy in the environment must not sit between us and the stub


@pytest.fixture
def stub():
    with StubServer() as server:
        yield server


def convo(i: int) -> list[dict]:
    return [{"role": "system", "content": "be brief"}, {"role": "user", "content": f"q{i}"}]


def test_chat_many_sums_usage_over_concurrent_requests_and_keeps_order():
    with StubServer(delay_s=0.05) as stub:
        client = ChatClient(stub.url, "m", concurrency=4, prices=(2.0, 10.0), **FAST)
        replies = client.chat_many([convo(i) for i in range(50)], max_tokens=32, temperature=0.5)
    assert [r.text for r in replies] == [f"echo: q{i}" for i in range(50)]
    assert all(r.ok and r.finish_reason == "stop" and r.attempts == 1 for r in replies)
    assert replies[0].usage.reasoning_tokens == REASONING_TOKENS  # counted, but "let me think" is not in the text
    totals = client.usage.snapshot()
    assert (totals["requests"], totals["failures"], totals["retries"]) == (50, 0, 0)
    assert totals["prompt_tokens"] == 50 * PROMPT_TOKENS
    assert totals["completion_tokens"] == 50 * COMPLETION_TOKENS
    assert totals["reasoning_tokens"] == 50 * REASONING_TOKENS
    assert totals["cost_usd"] == pytest.approx(50 * (PROMPT_TOKENS * 2.0 + COMPLETION_TOKENS * 10.0) / 1e6)
    assert totals["max_in_flight"] == 4 and stub.max_in_flight == 4  # the bound is reached and never exceeded
    assert totals["in_flight"] == 0 and totals["latency_s"] > 0
    assert json.loads(json.dumps(client.usage.snapshot())) == totals


def test_request_bodies_carry_sampling_reasoning_and_extra_body(stub):
    extra = {"chat_template_kwargs": {"enable_thinking": True}, "top_k": 20}
    client = ChatClient(stub.url, "m", reasoning_effort="high", extra_body=extra, **FAST)
    reply = client.chat_many([ONE], max_tokens=64, temperature=0.2, top_p=0.9, seed=7, stop=["```"])[0]
    assert reply.ok
    sent = stub.received[0]
    assert sent.path == "/v1/chat/completions" and "Authorization" not in sent.headers  # no key configured
    assert sent.body == {
        "model": "m",
        "messages": ONE,
        "max_tokens": 64,
        "temperature": 0.2,
        "top_p": 0.9,
        "seed": 7,
        "stop": ["```"],
        "reasoning_effort": "high",
        **extra,
    }


def test_completions_send_the_raw_prompt(stub):
    client = ChatClient(stub.url, "m", **FAST)
    replies = client.complete_many(["def f():", "x = 1"], max_tokens=16)
    assert [r.text for r in replies] == ["echo: def f():", "echo: x = 1"]
    assert stub.received[0].path == "/v1/completions" and "seed" not in stub.received[0].body
    assert client.usage.snapshot()["completion_tokens"] == 2 * COMPLETION_TOKENS


def test_responses_api_text_usage_and_reasoning_effort(stub):
    client = ResponsesClient(stub.url, "m", reasoning_effort="low", extra_body={"store": False}, **FAST)
    replies = client.chat_many([convo(1), convo(2)], max_tokens=100, stop=["x"])
    assert [(r.text, r.finish_reason) for r in replies] == [("echo: q1", "stop"), ("echo: q2", "stop")]
    assert replies[0].usage.reasoning_tokens == REASONING_TOKENS
    body = stub.received[0].body
    assert stub.received[0].path == "/v1/responses"
    assert body["max_output_tokens"] == 100 and body["reasoning"] == {"effort": "low"} and body["store"] is False
    assert "stop" not in body and "max_tokens" not in body


def test_429_waits_for_retry_after(stub):
    stub.script(Fault(429, headers={"Retry-After": "1"}))
    client = ChatClient(stub.url, "m", **FAST)
    start = time.monotonic()
    reply = client.chat_many([ONE], max_tokens=8)[0]
    assert reply.ok and reply.attempts == 2
    assert time.monotonic() - start >= 0.9  # the server's 1 s, not the 0.01 s backoff
    assert client.usage.snapshot()["retries"] == 1


def test_retry_after_is_read_as_seconds_or_http_date_and_capped(stub):
    assert parse_retry_after("2.5") == 2.5
    assert parse_retry_after(email.utils.formatdate(1_000_030, usegmt=True), now=1_000_000) == pytest.approx(30)
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past: no wait
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None
    stub.script(Fault(503, headers={"Retry-After": "3600"}))
    client = ChatClient(stub.url, "m", retry_after_max_s=0.2, **FAST)
    start = time.monotonic()
    assert client.chat_many([ONE], max_tokens=8)[0].ok
    assert time.monotonic() - start < 5


def test_500_and_503_are_retried_then_succeed(stub):
    stub.script(Fault(500), Fault(503))
    client = ChatClient(stub.url, "m", **FAST)
    reply = client.chat_many([ONE], max_tokens=8)[0]
    assert (reply.ok, reply.attempts, len(stub.received)) == (True, 3, 3)


def test_a_permanent_503_gives_up_after_max_retries_with_an_error_reply(stub):
    stub.always = Fault(503)
    client = ChatClient(stub.url, "m", max_retries=2, **FAST)
    reply = client.chat_many([ONE], max_tokens=8)[0]
    assert not reply.ok and reply.text is None and reply.attempts == 3 and len(stub.received) == 3
    assert reply.error.startswith("HTTP 503") and "\n" not in reply.error
    snap = client.usage.snapshot()
    assert (snap["requests"], snap["failures"], snap["retries"]) == (1, 1, 2)


def test_a_hang_past_the_timeout_is_retried_and_an_endless_one_fails_cleanly(stub):
    stub.script(Fault(hang_s=3))
    client = ChatClient(stub.url, "m", **{**FAST, "timeout_s": 0.3})
    reply = client.chat_many([ONE], max_tokens=8)[0]
    assert reply.ok and reply.attempts == 2
    stub.always = Fault(hang_s=3)
    start = time.monotonic()
    reply = ChatClient(stub.url, "m", max_retries=1, **{**FAST, "timeout_s": 0.3}).chat_many([ONE], max_tokens=8)[0]
    assert not reply.ok and "timeout" in reply.error and reply.attempts == 2
    assert time.monotonic() - start < 2.5


@pytest.mark.parametrize(
    "fault",
    [Fault(body="{not json"), Fault(body='{"choices": []}'), Fault(truncate=True)],
    ids=["malformed-json", "missing-choices", "truncated-body"],
)
def test_malformed_or_truncated_bodies_are_retried(stub, fault):
    stub.script(fault)
    client = ChatClient(stub.url, "m", **FAST)
    reply = client.chat_many([ONE], max_tokens=8)[0]
    assert reply.ok and reply.attempts == 2 and reply.text == "echo: hi"


def test_400_is_not_retried(stub):
    stub.always = Fault(400, body='{"error": {"message": "context too long"}}')
    client = ChatClient(stub.url, "m", **FAST)
    reply = client.chat_many([ONE], max_tokens=8)[0]
    assert (reply.ok, reply.attempts, len(stub.received)) == (False, 1, 1)
    assert "400" in reply.error and "context too long" in reply.error


def test_a_refused_connection_comes_back_as_an_error_reply():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    client = ChatClient(f"http://127.0.0.1:{port}/v1", "m", max_retries=1, **FAST)
    reply = client.chat_many([ONE], max_tokens=8)[0]
    assert not reply.ok and reply.attempts == 2 and "Connect" in reply.error


def test_circuit_breaker_opens_fails_fast_and_half_opens(stub):
    stub.always = Fault(503)
    client = ChatClient(stub.url, "m", max_retries=0, breaker_threshold=2, breaker_cooldown_s=0.5, **FAST)
    assert [r.ok for r in client.chat_many([ONE, ONE], max_tokens=8)] == [False, False]
    assert len(stub.received) == 2
    refused = client.chat_many([ONE] * 5, max_tokens=8)
    assert all(r.error.startswith("circuit open") and r.attempts == 0 for r in refused)
    assert len(stub.received) == 2  # failed fast: the server saw nothing
    time.sleep(0.6)
    assert not client.chat_many([ONE], max_tokens=8)[0].ok  # the half-open probe fails: open again at once
    assert len(stub.received) == 3 and client.chat_many([ONE], max_tokens=8)[0].attempts == 0
    time.sleep(0.6)
    stub.always = None
    assert client.chat_many([ONE], max_tokens=8)[0].ok  # the probe succeeds: closed
    assert all(r.ok for r in client.chat_many([ONE] * 3, max_tokens=8))
    assert client.usage.snapshot()["fast_failures"] == 6


def test_an_open_circuit_stops_retries_in_flight(stub):
    breaker = CircuitBreaker(threshold=1, cooldown_s=60)
    assert breaker.admit() == "closed"
    breaker.record(ok=False, probe=False)
    assert breaker.is_open() and breaker.admit() == "open"
    stub.always = Fault(503)
    client = ChatClient(stub.url, "m", max_retries=1000, breaker_threshold=1, **FAST)

    async def scenario():
        async with client:
            task = asyncio.create_task(client.achat(ONE, max_tokens=8))
            await asyncio.sleep(0.3)
            client.breaker.record(ok=False, probe=False)  # another request's failure opens the circuit meanwhile
            return await asyncio.wait_for(task, 5)

    reply = asyncio.run(scenario())
    assert not reply.ok and 1 < reply.attempts == len(stub.received) < 1000


def test_a_cancelled_probe_does_not_leave_the_circuit_half_open(stub):
    stub.always = Fault(hang_s=2)
    client = ChatClient(stub.url, "m", breaker_threshold=1, breaker_cooldown_s=0.05, **FAST)
    client.breaker.record(ok=False, probe=False)
    time.sleep(0.1)

    async def cancel_the_probe():
        async with client:
            task = asyncio.create_task(client.achat(ONE, max_tokens=8))
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(cancel_the_probe())
    time.sleep(0.1)
    stub.always = None
    assert client.chat_many([ONE], max_tokens=8)[0].ok


def test_batches_on_different_event_loops_and_threads(stub):
    client = ChatClient(stub.url, "m", concurrency=3, **FAST)
    assert [r.text for r in client.chat_many([convo(1)], max_tokens=8)] == ["echo: q1"]
    assert [r.text for r in client.chat_many([convo(2)], max_tokens=8)] == ["echo: q2"]  # a new loop

    with ThreadPoolExecutor(2) as pool:  # two loops at once, one client
        batches = list(
            pool.map(lambda k: client.chat_many([convo(k * 10 + i) for i in range(6)], max_tokens=8), [1, 2])
        )
    assert [[r.text for r in b] for b in batches] == [[f"echo: q{k * 10 + i}" for i in range(6)] for k in (1, 2)]

    async def from_async_code():  # sync call from a thread whose loop is running
        sync = client.chat_many([convo(3)], max_tokens=8)
        async with client:
            native = await asyncio.gather(client.achat(convo(4), max_tokens=8), client.acomplete("p", max_tokens=8))
        return sync + list(native)

    assert [r.text for r in asyncio.run(from_async_code())] == ["echo: q3", "echo: q4", "echo: p"]
    assert [r.text for r in asyncio.run(from_async_code())] == ["echo: q3", "echo: q4", "echo: p"]  # again
    assert client.usage.snapshot()["failures"] == 0


def test_the_api_key_is_sent_but_never_shown(stub, monkeypatch, caplog):
    monkeypatch.setenv("STUB_API_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    stub.script(Fault(500, echo_auth=True), Fault(500, body=f"upstream said {KEY}"), Fault(401, echo_auth=True))
    client = ChatClient(stub.url, "m", api_key_env="STUB_API_KEY", **FAST)
    reply = client.chat_many([ONE], max_tokens=8)[0]
    assert stub.received[0].headers["Authorization"] == f"Bearer {KEY}"
    assert not reply.ok and reply.attempts == 3 and "bad key" in reply.error  # 401 is final
    shown = [
        reply.error,
        repr(reply),
        repr(client),
        str(vars(client)),
        json.dumps(client.usage.snapshot()),
        caplog.text,
    ]
    shown += [record.getMessage() for record in caplog.records]
    assert caplog.records and all(KEY not in text and "SUPERSECRET" not in text for text in shown)


def test_a_missing_key_variable_is_a_config_error_naming_it(monkeypatch):
    monkeypatch.delenv("AZR_NO_SUCH_KEY", raising=False)
    with pytest.raises(ConfigError, match="AZR_NO_SUCH_KEY"):
        ChatClient("http://127.0.0.1:9/v1", "m", api_key_env="AZR_NO_SUCH_KEY")


def test_build_client_from_config(stub, monkeypatch):
    monkeypatch.setenv("STUB_API_KEY", KEY)
    cfg = EndpointConfig(base_url=stub.url, model="m", api_key_env="STUB_API_KEY", api="responses", concurrency=2)
    cfg.price_in_per_mtok = 1.0
    client = build_client(cfg)
    assert isinstance(client, ResponsesClient) and client.concurrency == 2 and client.prices == (1.0, 0.0)
    assert client.chat_many([ONE], max_tokens=8)[0].text == "echo: hi"
    cfg.api = "chat"
    assert type(build_client(cfg)) is ChatClient


def test_usage_totals_are_exact_under_threads():
    from azr.remote.clients import Reply, Usage, UsageTotals

    totals = UsageTotals()
    reply = Reply("x", "stop", Usage(3, 5, 1), 0.001, 1)

    def hammer():
        for _ in range(2000):
            totals._record(reply, None)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    snap = totals.snapshot()
    assert (snap["requests"], snap["prompt_tokens"], snap["completion_tokens"]) == (8000, 24000, 40000)


def test_usage_carried_from_a_snapshot_continues_its_totals():
    from azr.remote.clients import Reply, Usage, UsageTotals

    earlier = UsageTotals()
    earlier._record(Reply("x", "stop", Usage(3, 5, 1), 0.5, 2), (1.0, 2.0))
    earlier.max_in_flight = 3
    resumed = UsageTotals()
    resumed.carry(earlier.snapshot())
    resumed._record(Reply("y", "stop", Usage(1, 1, 0), 0.25, 1), None)
    snap = resumed.snapshot()
    assert (snap["requests"], snap["prompt_tokens"], snap["completion_tokens"]) == (2, 4, 6)
    assert snap["cost_usd"] == pytest.approx(13e-6) and snap["latency_s"] == 0.75
    assert snap["max_in_flight"] == 3 and snap["in_flight"] == 0


# ---------------------------------------------------------------------------------------------- hostile replies
def test_a_reply_nested_100000_levels_is_a_failed_request_not_a_recursion_error(stub, monkeypatch):
    monkeypatch.setenv("AZR_FAKE_KEY", KEY)
    stub.always = Fault(body="[" * 100_000 + "]" * 100_000)
    client = ChatClient(stub.url, "m", api_key_env="AZR_FAKE_KEY", **FAST)
    reply = client.chat_many([ONE], max_tokens=8)[0]
    assert not reply.ok and reply.error.startswith("response too deep") and "AZR_MAX_RESPONSE_DEPTH" in reply.error
    assert reply.attempts == 1  # the same server would send the same body again


def test_a_60_mb_reply_is_refused_not_kept_whole(stub):
    text = json.dumps({"choices": [{"message": {"content": "x" * (60 << 20)}, "finish_reason": "stop"}]})
    stub.always = Fault(body=text)
    reply = ChatClient(stub.url, "m", **FAST).chat_many([ONE], max_tokens=8)[0]
    assert not reply.ok and reply.error.startswith("response too large") and "AZR_MAX_RESPONSE_BYTES" in reply.error
    assert reply.text is None and reply.attempts == 1


@pytest.mark.parametrize("url", ["notaurl", "ftp://host/v1", "http:///v1", "http://host:notaport/v1"])
def test_a_malformed_base_url_is_a_user_error_not_an_outage(url):
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"^base_url: "):
        ChatClient(url, "m")
    assert time.monotonic() - started < 1


def test_a_key_in_the_url_stays_out_of_logs_errors_and_reprs(stub, caplog):
    secret_url = stub.url.replace("http://", "http://user:URLKEY-0123456789@") + "?api-key=QUERYKEY-0123456789"
    stub.always = Fault(status=400, body="bad request for URLKEY-0123456789 and QUERYKEY-0123456789")
    from azr.secrets import redact_logs

    caplog.set_level(logging.DEBUG)
    redact_logs(logging.getLogger())  # what the CLI's logging setup does
    for handler in logging.getLogger().handlers:
        handler.setLevel(logging.DEBUG)
    client = ChatClient(secret_url, "m", **FAST)
    reply = client.chat_many([ONE], max_tokens=8)[0]
    assert not reply.ok
    for text in (reply.error, repr(client), *(r.getMessage() for r in caplog.records)):
        assert "URLKEY" not in text and "QUERYKEY" not in text, text
