"""Self-play against real HTTP servers on 127.0.0.1 (the stub, scripted to answer right or wrong; a live vLLM
server where available), graded in a real bwrap sandbox. Faults are injected by the stub, per prompt."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import http_stub
import pytest
from http_stub import (
    COMPLETION_TOKENS,
    PROMPT_TOKENS,
    Fault,
    StubServer,
    fast_client,
    stub_fixtures,
)

from azr.config import AzrConfig, ModelConfig, SelfPlayConfig, ThinkingConfig
from azr.data import encode_all
from azr.data.tasks import Task
from azr.prompts import ANSWER_PREFIX, SYSTEM_PROMPT, chat_messages, parse_answer
from azr.remote.clients import ChatClient
from azr.rewards import Rubric
from azr.rewards import functions as rewards
from azr.rewards.functions import SelfPlayReward, selfplay_score
from azr.selfplay.opponent import SelfPlayManager, blend, opponent_column

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-fake-selfplay-KEY-0123456789abcdef"
TASKS = [
    Task(f"t{i}", f"Write f(x) that returns x + {i}.", [f"assert f(1) == {1 + i}", f"assert f(5) == {5 + i}"])
    for i in range(10)
]
BY_PROMPT = {t.prompt: i for i, t in enumerate(TASKS)}


def answer(i: int, right: bool) -> str:
    """A strict-format answer, reasoning first, the answer line last (where a careless stop sequence would cut)."""
    body = f"return x + {i}" if right else "return 0"
    return f"Let me think.\n```python\ndef f(x):\n    {body}\n```\n{ANSWER_PREFIX} f"


def opponent_payload(path: str, body: dict) -> dict:
    """Right on even tasks, wrong on odd ones; honours `stop` as real servers do (the text ends before it)."""
    i = BY_PROMPT[body["messages"][-1]["content"]]
    text = answer(i, right=i % 2 == 0)
    for stop in body.get("stop") or []:
        text = text.split(stop, 1)[0]
    usage = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS}
    message = {"role": "assistant", "content": text}
    return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": usage}


def rows(tasks=TASKS, group: int = 2) -> list[dict]:
    """Dataset rows as TRL hands them to rewards: one per completion, conversational prompts."""
    return [
        {"prompt": chat_messages(t.prompt), "task_id": t.id, "tests": encode_all(t.tests), "hint": ""}
        for t in tasks
        for _ in range(group)
    ]


def config(url: str = "http://127.0.0.1:9/v1", **play) -> AzrConfig:
    fields = {"enabled": True, "base_url": url, "model": "opp", "api_key_env": "AZR_FAKE_KEY", "max_tokens": 300}
    return AzrConfig(
        model=ModelConfig(name_or_path="unused"),
        self_play=SelfPlayConfig(**{**fields, **play}),
        thinking=ThinkingConfig(opponent=True, opponent_budget_tokens=200),
    )


_env, stub = stub_fixtures(KEY, opponent_payload)


def client_for(url: str, **kw) -> ChatClient:
    return fast_client(url, "opp", **kw)


def play(manager: SelfPlayManager, batch: list[dict], step: int = 1) -> dict:
    try:
        return manager.collect(manager.submit(batch, step))
    finally:
        manager.close()


def test_the_opponent_gets_plain_messages_one_request_per_task_and_no_stop(stub, grader):
    manager = SelfPlayManager(config(stub.url, temperature=0.6), grader)  # the client built from config
    results = play(manager, rows(TASKS[:3], group=4))
    assert len(stub.received) == 3 and list(results) == ["t0", "t1", "t2"]
    for sent in stub.received:
        raw = json.dumps(sent.body)
        assert "<|im_start|>" not in raw and "<|" not in raw  # never a chat-templated string
        assert [m["role"] for m in sent.body["messages"]] == ["system", "user"]
        assert sent.body["messages"][0]["content"] == SYSTEM_PROMPT
        assert sent.body["messages"][1]["content"] in BY_PROMPT  # the original question, nothing added
        assert "stop" not in sent.body
        assert sent.body["max_tokens"] == 300 + 200  # max_tokens + thinking.opponent_budget_tokens
        assert sent.body["temperature"] == 0.6
        assert sent.headers["Authorization"] == f"Bearer {KEY}"


def test_the_answer_line_survives_so_right_answers_pass_in_the_sandbox(stub, grader):
    results = play(SelfPlayManager(config(stub.url), grader), rows(TASKS[:4]))
    assert [(r.status, r.reward, r.grade_status) for r in results.values()] == [
        ("passed", 1.0, "passed"),
        ("failed", 0.0, "failed"),
        ("passed", 1.0, "passed"),
        ("failed", 0.0, "failed"),
    ]
    # The stub honours stop sequences: the same right answer under a stop on the answer line is unreadable.
    reply = client_for(stub.url).chat_many([chat_messages(TASKS[0].prompt)], max_tokens=10, stop=[ANSWER_PREFIX])[0]
    assert reply.ok and ANSWER_PREFIX not in reply.text and not parse_answer(reply.text).format_ok


def test_a_chat_templated_prompt_is_refused():
    templated = {"task_id": "x", "tests": ["assert True"], "prompt": "<|im_start|>user\nWrite f.<|im_end|>"}
    manager = SelfPlayManager(config(), grader=None, client=client_for("http://127.0.0.1:9/v1"))
    with pytest.raises(ValueError, match="chat-templated"):
        manager.submit([templated], 1)
    manager.close()


def test_thirty_percent_failed_requests_are_unavailable_never_a_loss(stub, grader, tmp_path, caplog):
    # t0, t1: HTTP 500 on every attempt; t2: hangs past the client's timeout on every attempt. 3 of 10 tasks.
    def fault_for(received):
        i = BY_PROMPT[received.body["messages"][-1]["content"]]
        return {0: Fault(status=500), 1: Fault(status=503, echo_auth=True), 2: Fault(hang_s=3.0)}.get(i)

    stub.fault_for = fault_for
    client = client_for(stub.url, timeout_s=1.5, max_retries=1, breaker_threshold=0)
    log_path = tmp_path / "selfplay.jsonl"
    manager = SelfPlayManager(config(stub.url), grader, client, log_path=log_path)
    batch = rows()
    with caplog.at_level(logging.INFO):
        results = play(manager, batch, step=7)
    status = {t: r.status for t, r in results.items()}
    assert [t for t, s in status.items() if s == "unavailable"] == ["t0", "t1", "t2"]
    assert all(s == ("passed" if int(t[1:]) % 2 == 0 else "failed") for t, s in status.items() if int(t[1:]) > 2)
    assert all(results[t].reward is None and results[t].attempts == 2 for t in ("t0", "t1", "t2"))
    totals = client.usage.snapshot()
    assert (totals["requests"], totals["failures"]) == (10, 3)
    assert totals["retries"] >= 3  # one per failed task; a healthy request slowed by a busy machine may add one

    column = opponent_column(batch, results)
    assert column[:6] == [None] * 6 and column[6:8] == [False, False] and column[8:10] == [True, True]
    completions = [answer(int(r["task_id"][1:]), right=True) for r in batch]  # the policy solves everything
    scores = SelfPlayReward(grader)(completions=completions, tests=[r["tests"] for r in batch], opponent_passed=column)
    assert scores[:6] == [None] * 6  # masked, not a loss
    assert scores[6:10] == [1.0, 1.0, 0.5, 0.5]  # t3: the opponent failed, a win; t4: both pass, a tie at 0.5

    (record,) = [json.loads(line) for line in log_path.read_text().splitlines()]
    counts = (record["step"], record["tasks"], record["unavailable"], record["passed"], record["failed"])
    assert counts == (7, 10, 3, 3, 4)  # passed: t4, t6, t8; failed: t3, t5, t7, t9
    assert record["prompt_tokens"] == 7 * PROMPT_TOKENS and record["completion_tokens"] == 7 * COMPLETION_TOKENS
    assert record["client"]["retries"] == totals["retries"]
    assert KEY not in log_path.read_text() and KEY not in caplog.text  # the 503 echoed the key: redacted
    assert all(KEY not in r.error for r in results.values())


def test_opponent_calls_run_concurrently_in_the_background(grader, monkeypatch):
    monkeypatch.setattr(http_stub, "happy_payload", opponent_payload)
    with StubServer(delay_s=0.3) as stub:
        client = client_for(stub.url, concurrency=4)
        manager = SelfPlayManager(config(stub.url), grader, client)
        handle = manager.submit(rows(TASKS[:8]), 1)
        assert not handle.done()  # submit returned while the requests are in flight: the caller scores meanwhile
        results = manager.collect(handle)
        manager.close()
    assert len(results) == 8 and stub.max_in_flight > 1
    assert 1 < client.usage.snapshot()["max_in_flight"] <= 4


def test_collect_past_its_timeout_counts_the_batch_unavailable_everywhere(grader, monkeypatch, tmp_path):
    """A batch the trainer stopped waiting for is unavailable in the totals and the log too, even though its answers
    arrive later; a batch still queued behind it when abandoned sends no request at all."""
    monkeypatch.setattr(http_stub, "happy_payload", opponent_payload)
    with StubServer(delay_s=1.0) as stub:
        log_path = tmp_path / "selfplay.jsonl"
        manager = SelfPlayManager(config(stub.url), grader, client_for(stub.url), log_path=log_path)
        first, second = manager.submit(rows(TASKS[:2]), 1), manager.submit(rows(TASKS[2:4]), 2)
        results = manager.collect(first, timeout_s=0.05)
        late = manager.collect(second, timeout_s=0.0)
        manager.close()
        requests = len(stub.received)
    assert {r.status for r in [*results.values(), *late.values()]} == {"unavailable"}
    assert manager.totals == {"batches": 2, "passed": 0, "failed": 0, "unavailable": 4}
    records = [json.loads(line) for line in log_path.read_text().splitlines()]
    assert [(r["step"], r["late"], r["unavailable"]) for r in records] == [(1, True, 2), (2, True, 2)]
    assert requests == 2  # the first batch's two questions; the abandoned second batch never started


def test_the_arena_waits_at_most_max_wait_s_and_masks_the_late_tasks(grader, tmp_path, monkeypatch):
    import dataclasses

    from azr.selfplay.arena import Arena

    monkeypatch.setattr(http_stub, "happy_payload", opponent_payload)
    with StubServer(delay_s=1.0) as stub:
        cfg = dataclasses.replace(config(stub.url, max_wait_s=0.05), output_dir=str(tmp_path))
        arena = Arena(cfg, grader, rows(TASKS[:2]), opponent=client_for(stub.url))
        batch = arena.start(rows(TASKS[:2]), step=1)
        arena.finish(batch)
        arena.close()
    assert [r["opponent_passed"] for r in batch] == [None] * 4  # masked: unavailable, never a loss
    assert arena.wait_s < 0.5


def test_tie_rules_and_the_blend_through_reward_weights(grader):
    assert [selfplay_score(p, o) for p, o in [(True, False), (True, True), (False, False), (False, True)]] == [
        1.0,  # win
        0.5,  # both pass: a tie, half a win
        0.0,  # both fail: no credit for failing together
        0.0,  # loss
    ]
    assert selfplay_score(True, None) is None and selfplay_score(None, True) is None

    tests, fmt = rewards.TestsReward(grader), lambda completions, **_: [0.0 for _ in completions]
    blended = Rubric((tests, fmt), (1.0, 0.1), grader).blended(0.3)
    funcs, weights = blended.funcs, blended.weights
    assert isinstance(funcs[2], SelfPlayReward) and weights == pytest.approx([0.7, 0.07, 0.3])
    batch = rows(TASKS[:3], group=1)
    completions = [answer(0, right=True), answer(1, right=False), answer(2, right=True)]
    columns = {"tests": [r["tests"] for r in batch], "opponent_passed": [True, True, None]}
    per_func = [f(completions=completions, **columns) for f in funcs]
    rows_of_scores = zip(*per_func, strict=True)
    total = [sum(w * s for w, s in zip(weights, r, strict=True) if s is not None) for r in rows_of_scores]  # nansum
    assert total == pytest.approx([blend(1.0, 0.5, 0.3), blend(0.0, 0.0, 0.3), blend(1.0, None, 0.3)])
    again = Rubric(funcs, (1.0, 0.1, 1.0), grader).blended(0.2)
    assert again.weights == pytest.approx([0.8, 0.08, 0.2]) and len(again.funcs) == 3  # kept, reweighted


def test_hint_rows_get_no_opponent_request_and_no_self_play_part(stub, grader):
    hinted = [{**r, "hint": "think about addition"} for r in rows(TASKS[:1])]
    results = play(SelfPlayManager(config(stub.url), grader), rows(TASKS[1:2]) + hinted)
    assert list(results) == ["t1"] and len(stub.received) == 1
    assert opponent_column(hinted, results) == [None, None]


def test_a_live_vllm_opponent_answers_plain_messages(vllm_server, grader):
    client = ChatClient(vllm_server.base_url, vllm_server.model, timeout_s=120, max_retries=1)
    manager = SelfPlayManager(config(vllm_server.base_url, max_tokens=16), grader, client)
    results = play(manager, rows(TASKS[:3]))
    assert [r.status for r in results.values()] == ["failed"] * 3  # answered (no outage), and wrong
    assert all(r.usage.completion_tokens > 0 for r in results.values())


def test_check_providers_prints_answers_and_usage_without_the_key(stub, tmp_path, monkeypatch):
    monkeypatch.setattr(http_stub, "happy_payload", check_payload)
    recipe = tmp_path / "recipe.yaml"
    endpoint = {"enabled": True, "base_url": stub.url, "api_key_env": "AZR_FAKE_KEY", "max_tokens": 64}
    cfg = {
        "model": {"name_or_path": "unused"},
        "self_play": {**endpoint, "model": "opp"},
        "teacher": {**endpoint, "model": "teach", "api": "responses"},
    }
    recipe.write_text(json.dumps(cfg))
    env = {"NO_PROXY": "127.0.0.1", "AZR_FAKE_KEY": KEY, "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "check_providers.py"), "--config", str(recipe)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "opponent" in proc.stdout and "teacher" in proc.stdout and "format ok: True" in proc.stdout
    assert '"prompt_tokens": 11' in proc.stdout
    assert KEY not in proc.stdout + proc.stderr
    assert [r.path for r in stub.received] == ["/v1/chat/completions", "/v1/responses"]


def check_payload(path: str, body: dict) -> dict:
    if path.endswith("/responses"):
        return _responses("Consider what f must add to x.")
    return opponent_payload(path, {**body, "messages": [{"role": "user", "content": TASKS[0].prompt}]})


def _responses(text: str) -> dict:
    message = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
    usage = {"input_tokens": PROMPT_TOKENS, "output_tokens": COMPLETION_TOKENS}
    return {"object": "response", "status": "completed", "output": [message], "usage": usage}
