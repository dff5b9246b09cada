"""Teacher hints and solutions against a real HTTP server on 127.0.0.1 (the stub, scripted), solutions graded in a
real bwrap sandbox; hint sanitising on its own."""

from __future__ import annotations

import json
import logging

import pytest
from http_stub import COMPLETION_TOKENS, PROMPT_TOKENS, Fault, fast_client, stub_fixtures

from azr.config import AzrConfig, ModelConfig, TeacherAssistConfig, TeacherConfig, ThinkingConfig
from azr.data import encode_all
from azr.data.tasks import Task
from azr.prompts import ANSWER_PREFIX, HINT_MARKER, HINT_SYSTEM_PROMPT, SYSTEM_PROMPT, chat_messages, hinted_messages
from azr.remote.clients import ChatClient
from azr.selfplay.scoreboard import ProblemResult
from azr.selfplay.teacher import HintQueue, TeacherAssistant, sanitise_hint

KEY = "sk-fake-teacher-KEY-9876543210fedcba"
TASKS = [
    Task(f"t{i}", f"Write f(x) returning x * {i}.", [f"assert f(2) == {2 * i}", "assert f(0) == 0"]) for i in range(10)
]
BY_PROMPT = {t.prompt: i for i, t in enumerate(TASKS)}
RAW_HINT = (
    "<think>they forgot the factor</think>Multiply the input by the constant; `x * k` is all it takes.\n"
    "```python\ndef f(x):\n    return x * 3\n```\n"
    "Define it as `def f(x): return x * 3` and you are done.\n"
    "def f(x): return x * 3\n"
    "Final answer: f\n"
)


def teacher_payload(path: str, body: dict) -> dict:
    """A hint with code and an answer line in it, or a full solution (right on even tasks, wrong on odd ones)."""
    system, question = body["messages"][0]["content"], body["messages"][-1]["content"]
    i = BY_PROMPT[question]
    if system == HINT_SYSTEM_PROMPT:
        text = RAW_HINT
    else:
        assert system == SYSTEM_PROMPT
        text = f"```python\ndef f(x):\n    return x * {i if i % 2 == 0 else 0}\n```\n{ANSWER_PREFIX} f"
    usage = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS}
    message = {"role": "assistant", "content": text}
    return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": usage}


def row(task: Task, **extra) -> dict:
    return {
        "prompt": chat_messages(task.prompt),
        "task_id": task.id,
        "tests": encode_all(task.tests),
        "hint": "",
        **extra,
    }


def failed(outcome: str, tasks=TASKS) -> list[ProblemResult]:
    return [ProblemResult(t.id, outcome, 1, 4, 0, row(t, opponent_passed=outcome == "opponent_only")) for t in tasks]


def config(url: str, **assist) -> AzrConfig:
    teacher = {"enabled": True, "base_url": url, "model": "teach", "api_key_env": "AZR_FAKE_KEY", "max_tokens": 400}
    return AzrConfig(
        model=ModelConfig(name_or_path="unused"),
        teacher=TeacherConfig(**teacher),
        teacher_assist=TeacherAssistConfig(**{"enabled": True, "max_hint_chars": 200, **assist}),
        thinking=ThinkingConfig(teacher_budget_tokens=100),
    )


_env, stub = stub_fixtures(KEY, teacher_payload)


def client_for(url: str, **kw) -> ChatClient:
    return fast_client(url, "teach", **kw)


def assist(teacher: TeacherAssistant, problems, step: int = 1) -> TeacherAssistant:
    teacher.submit(problems, step)
    assert teacher.wait(60)
    teacher.close()
    return teacher


# --- sanitising -------------------------------------------------------------------------------------------------


def test_sanitising_strips_code_answer_lines_and_reasoning():
    hint, removed = sanitise_hint(RAW_HINT, 600)
    assert hint == "Multiply the input by the constant; `x * k` is all it takes.\n\nDefine it as  and you are done."
    assert removed == {"code_blocks": 1, "inline_code": 1, "code_lines": 1, "answer_lines": 1}


@pytest.mark.parametrize(
    "text",
    [
        "Use a loop.\n```\nfor i in range(3): pass\n",  # an unterminated fence takes the rest with it
        "Use a loop.\n    total = 0\n    for x in xs:",  # indented code
        "Use a loop.\nimport itertools\nfrom math import prod",
        "Use a loop.\n**Final Answer:** f",
        "Use a loop.\nSolution: f",
        "Use a loop. `lambda x: x`",
        "Use a loop. `y = x + 1`",
    ],
)
def test_no_code_or_answer_survives_sanitising(text):
    hint, _ = sanitise_hint(text, 600)
    assert hint.startswith("Use a loop.") and not any(s in hint for s in ("for ", "import", "f\n", "lambda", "= x"))
    assert "Final" not in hint and "Solution" not in hint and "```" not in hint


def test_hints_are_capped_at_a_word_boundary():
    hint, removed = sanitise_hint("word " * 100, 30)
    assert len(hint) <= 30 and hint.endswith("…") and "wor…" not in hint and removed["truncated"] == 1
    assert sanitise_hint("Compare `a == b` first.", 600)[0] == "Compare `a == b` first."  # no definition: kept


# --- hints into the training stream ---------------------------------------------------------------------------


def test_hints_become_new_conversational_prompts_for_the_policy(stub, grader, tmp_path):
    log_path = tmp_path / "teacher.jsonl"
    teacher = TeacherAssistant(config(stub.url, hint_prob_neither=1.0), grader, log_path=log_path)
    assist(teacher, failed("neither", TASKS[:2]), step=3)
    for sent in stub.received:
        assert [m["role"] for m in sent.body["messages"]] == ["system", "user"] and "<|" not in json.dumps(sent.body)
        assert sent.body["max_tokens"] == 400 + 100 and "stop" not in sent.body
    rows = teacher.queue.take(10)
    hint = sanitise_hint(RAW_HINT, 200)[0]
    assert [r["task_id"] for r in rows] == ["t0", "t1"] and len(teacher.queue) == 0
    for r, task in zip(rows, TASKS, strict=False):
        assert r["prompt"] == hinted_messages(task.prompt, hint)  # the original question, then the marked hint
        assert r["prompt"][1]["content"].startswith(task.prompt) and HINT_MARKER in r["prompt"][1]["content"]
        assert r["tests"] == encode_all(task.tests) and r["hint"] == hint
        assert "opponent_passed" not in r and "completion" not in r  # a new prompt; no completion is ever supplied
    records = [json.loads(line) for line in log_path.read_text().splitlines()]
    assert [(r["step"], r["kind"], r["ok"]) for r in records] == [(3, "hint", True)] * 2
    assert records[0]["removed"]["code_blocks"] == 1 and records[0]["prompt_tokens"] == PROMPT_TOKENS


def test_hints_follow_the_configured_chances_and_skip_what_needs_none(stub, grader):
    queue = HintQueue()
    queue.put(row(TASKS[5], hint="earlier hint"))  # t5 already has a hint waiting: not asked again
    cfg = config(stub.url, hint_prob_neither=0.0, hint_prob_opponent_only=1.0)
    problems = failed("neither", TASKS[:2]) + failed("opponent_only", TASKS[2:6]) + failed("policy_only", TASKS[6:7])
    problems += [ProblemResult("t7", "opponent_only", 1, 2, 0, row(TASKS[7], hint="a hint"))]  # a hinted retry
    assist(TeacherAssistant(cfg, grader, queue=queue), problems)
    assert sorted(BY_PROMPT[r.body["messages"][-1]["content"]] for r in stub.received) == [2, 3, 4]
    assert [r["task_id"] for r in queue.take(10)] == ["t5", "t2", "t3", "t4"]


def test_the_hint_queue_is_bounded_and_hands_each_row_out_once():
    queue = HintQueue(maxlen=2)
    for i in range(3):
        queue.put({"task_id": f"t{i}"})
    assert queue.pending("t2") and not queue.pending("t0")
    assert [r["task_id"] for r in queue.take(5)] == ["t1", "t2"] and queue.take(5) == []
    assert dict(queue.stats) == {"added": 3, "taken": 2, "dropped": 1}


# --- solutions, failures, keys ----------------------------------------------------------------------------------


def test_teacher_solutions_go_to_the_sft_buffer_with_provenance(stub, grader, tmp_path):
    cfg = config(stub.url, hint_prob_neither=0.0, solution_prob=1.0)
    cfg.output_dir = str(tmp_path)
    teacher = assist(TeacherAssistant(cfg, grader), failed("neither", TASKS[:2]), step=9)
    records = [json.loads(line) for line in (tmp_path / "teacher_solutions.jsonl").read_text().splitlines()]
    assert [(r["task_id"], r["passed"], r["status"], r["tests_passed"]) for r in records] == [
        ("t0", True, "passed", 2),  # graded in the sandbox
        ("t1", False, "failed", 1),
    ]
    for r in records:
        assert (r["step"], r["teacher_model"], r["tests_total"]) == (9, "teach", 2) and r["time"].endswith("Z")
        assert r["prompt"] == chat_messages(TASKS[int(r["task_id"][1:])].prompt)
        assert r["completion"][0]["role"] == "assistant" and ANSWER_PREFIX in r["completion"][0]["content"]
    assert teacher.stats["solutions_saved"] == 2 and teacher.stats["solutions_passed"] == 1
    assert len(teacher.queue) == 0


def test_failed_teacher_requests_are_recorded_and_skipped(stub, grader, tmp_path, caplog):
    def fault_for(received):  # 3 of 10 tasks fail on every attempt; one of them echoes the key back
        i = BY_PROMPT[received.body["messages"][-1]["content"]]
        return {0: Fault(status=500), 1: Fault(status=503, echo_auth=True), 2: Fault(status=429)}.get(i)

    stub.fault_for = fault_for
    cfg = config(stub.url, hint_prob_neither=1.0, solution_prob=1.0)
    cfg.output_dir = str(tmp_path)
    client = client_for(stub.url, max_retries=1, breaker_threshold=0)
    with caplog.at_level(logging.INFO):
        teacher = assist(TeacherAssistant(cfg, grader, client, log_path=tmp_path / "teacher.jsonl"), failed("neither"))
    assert teacher.stats["hint_failures"] == 3 and teacher.stats["solution_failures"] == 3
    assert teacher.stats["hints_queued"] == 7 and teacher.stats["solutions_saved"] == 7
    assert sorted(r["task_id"] for r in teacher.queue.take(20)) == [f"t{i}" for i in range(3, 10)]
    records = [json.loads(line) for line in (tmp_path / "teacher.jsonl").read_text().splitlines()]
    failures = [r for r in records if not r["ok"]]
    assert len(failures) == 6 and all(r["error"].startswith("HTTP ") for r in failures)
    for path in tmp_path.rglob("*"):  # every file this run wrote
        assert KEY not in path.read_text(errors="replace"), path
    assert KEY not in caplog.text and KEY not in repr(client)


def test_a_teacher_that_is_down_never_raises(grader, tmp_path):
    cfg = config("http://127.0.0.1:9/v1", hint_prob_neither=1.0)  # nothing listens on port 9
    teacher = TeacherAssistant(cfg, grader, client_for("http://127.0.0.1:9/v1", max_retries=0))
    assist(teacher, failed("neither", TASKS[:2]))
    assert teacher.stats["hint_failures"] == 2 and len(teacher.queue) == 0


# --- resume -----------------------------------------------------------------------------------------------------


def test_the_self_play_state_saved_with_a_checkpoint_comes_back_whole(grader, stub, tmp_path):
    """Arena.save then Arena(checkpoint=...): waiting hints, replay counts, scoreboard and frontier, totals, usage
    and the teacher's random state are what they were (JSON round trip included)."""
    import dataclasses

    from azr.config import CurriculumConfig, SelfPlayConfig
    from azr.selfplay.arena import Arena

    play = SelfPlayConfig(enabled=True, base_url=stub.url, model="opp", api_key_env="AZR_FAKE_KEY")
    cfg = dataclasses.replace(
        config(stub.url), output_dir=str(tmp_path), self_play=play, curriculum=CurriculumConfig(replay=True)
    )
    rows = [row(t, source="data") for t in TASKS]

    def arena(checkpoint=None) -> Arena:
        return Arena(
            cfg, grader, rows, opponent=client_for(stub.url), teacher=client_for(stub.url), checkpoint=checkpoint
        )

    first = arena()
    waiting = {**rows[0], "hint": "check x = 0", "source": "hint"}
    first.teacher.queue.put(waiting)
    first.replay.replayed["t1"] += 3
    first.replay.given += 3
    first.board.record(1, [{**rows[1], "opponent_passed": True}] * 2, [False, False])  # opponent_only: frontier
    first.manager.totals["batches"] += 1
    first.manager.client.usage._add(requests=5, prompt_tokens=50)
    first.teacher._rng.random()
    first.save(tmp_path / "checkpoint-1")
    board, frontier = first.board.to_json(), first.board.frontier.to_json()
    expected_draws = [first.teacher._rng.random() for _ in range(3)]
    first.close()

    back = arena(str(tmp_path / "checkpoint-1"))
    try:
        assert back.teacher.queue.rows() == [waiting]
        assert back.replay.replayed == {"t1": 3} and back.replay.given == 3
        assert back.board.to_json() == board and back.board.frontier.to_json() == frontier
        assert back.board.frontier.task_ids(unsolved_only=True) == ["t1"]
        assert back.manager.totals["batches"] == 1
        usage = back.manager.client.usage.snapshot()
        assert (usage["requests"], usage["prompt_tokens"]) == (5, 50)
        assert [back.teacher._rng.random() for _ in range(3)] == expected_draws
    finally:
        back.close()
