"""`azr eval --turns N` and `eval.turns`: LiveCodeBench's self-repair scenario. Turn 1 is the plain attempt; an
answer whose program fails a public test gets the failures as a new chat message and answers again; every turn is
scored on the hidden tests; pass@1 after each turn and the share of turn-1 failures repaired are reported.

Real parts: the bwrap sandbox grades; a real HTTP server on loopback answers as an endpoint (scripted: right, wrong,
repaired, a wrong repair); the tiny model samples conversations through HF generate; the held-out evaluator runs
as during GRPO with a scripted policy (the expensive edge)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from feedback_policy import chat_endpoint
from hidden_scan import every_hidden_mark, hidden_marks, stasher
from scripted_draws import RecordingChat, RecordingTokens, ScriptedEndpoint, endpoint_draws

from azr.config import load_config
from azr.data import load_tasks
from azr.evaluation import build_heldout
from azr.evaluation.samplers import turn_of
from azr.prompts import reference_answer
from azr.rewards import build_rubric
from azr.rewards.plans import plan_test

HELD_OUT = load_tasks("held-out")
WRONG = "```python\ndef nothing():\n    return None\n```\nFinal answer: nothing"
BY_PROMPT = {t.prompt: (i, t) for i, t in enumerate(HELD_OUT)}


def _right(task) -> str:
    return reference_answer(task.solution, task.entry_point)


def _plan(i: int, turn: int) -> str:
    """Task i's script: i % 3 == 0 right at once; == 1 wrong, then repaired; == 2 wrong, and wrong again."""
    if i % 3 == 0 or (i % 3 == 1 and turn == 2):
        return "right"
    return "wrong"


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]


@pytest.fixture
def repairer(monkeypatch):
    """A real stub server answering each held-out task by `_plan`, the turn read from the conversation."""

    def reply(prompt: str, turn: int) -> str:
        i, task = BY_PROMPT[prompt]
        return _right(task) if _plan(i, turn) == "right" else WRONG

    with chat_endpoint(monkeypatch, reply) as stub:
        yield stub


def test_an_endpoint_repairs_on_feedback_scored_on_hidden_tests_and_sees_none(cli, repairer, tmp_path):
    out = tmp_path / "out"
    code, stdout, err = cli("eval", "--endpoint", repairer.url, "--endpoint-model", "m", "--dataset", "held-out",
                            "--turns", "2", "--output-dir", out, "--workers", "2")  # fmt: skip
    assert code == 0, err
    report = json.loads((out / "report.json").read_text())
    thirds = [sum(i % 3 == r for i in range(len(HELD_OUT))) for r in range(3)]
    first, second = report["turns"]["by_turn"]
    assert first["pass@1"] == pytest.approx(thirds[0] / len(HELD_OUT), abs=1e-4)
    assert second["pass@1"] == pytest.approx((thirds[0] + thirds[1]) / len(HELD_OUT), abs=1e-4)
    assert second["repaired"] == pytest.approx(thirds[1] / (thirds[1] + thirds[2]), abs=1e-4)  # a wrong repair stays
    assert report["turns"]["turn_1_failures"] == thirds[1] + thirds[2]
    assert report["pass_at_k"]["pass@1"] == pytest.approx(second["pass@1"], abs=1e-4)  # the final program's
    assert report["settings"]["turns"] == 2 and report["settings"]["feedback"]["max_failures"] == 2
    assert "turn-1 failures repaired" in stdout
    # right at once: one request (the public tests passed, so it stopped); the others two, the second after feedback
    assert len(repairer.received) == len(HELD_OUT) + thirds[1] + thirds[2]
    for record in _records(out):
        i, task = next((j, t) for j, t in enumerate(HELD_OUT) if t.id == record["task_id"])
        turns = record["turns"]
        assert len(turns) == (1 if i % 3 == 0 else 2)
        assert record["tests_total"] == len(task.tests) - 1  # scored on the hidden tests alone
        assert [t["passed"] for t in turns] == [_plan(i, t["turn"]) == "right" for t in turns]
        if i % 3:
            assert turns[0]["public_passed"] is False and turns[0]["feedback"].startswith("Your program failed 1 of")
    # every message the model was sent: the public test shown, nothing of a hidden one
    for request in repairer.received:
        messages = request.body["messages"]
        i, task = BY_PROMPT[messages[1]["content"]]
        if len(messages) == 2:
            continue
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
        assert messages[2]["content"] == WRONG
        feedback = messages[3]["content"]
        checks = plan_test(task.tests[0]).checks
        public = checks[0].expr if checks else task.tests[0].source.strip()[:100]
        assert public in feedback and "\nError: " in feedback, (public, feedback)
        for mark in hidden_marks(task):
            assert mark not in feedback, (task.id, mark)


def test_a_test_module_nested_700_deep_is_a_failed_sample_not_a_traceback(cli, monkeypatch, tmp_path):
    """The module is cut to its public tests for the feedback (by lines: `ast.unparse` recursed through the 700-deep
    expression), and grading, which cannot plan a module that deep, fails it: a sample like any other."""
    deep = "+".join(["1"] * 700)
    module = (
        f"from solution import f\n\ndef test_a():\n    assert f(1) == {deep}\n\ndef test_b():\n    assert f(2) == 2\n"
    )
    row = {"id": "deep", "prompt": "Write f.", "tests": [{"pytest": module}], "public_tests": 1}
    (tmp_path / "deep.jsonl").write_text(json.dumps(row) + "\n")
    answer = "```python\ndef f(x):\n    return 700 if x == 1 else x\n```\nFinal answer: f"
    with chat_endpoint(monkeypatch, lambda prompt, turn: answer) as stub:
        flags = ["--dataset", tmp_path / "deep.jsonl", "--turns", "2", "--output-dir", tmp_path / "out", "-n", "1"]
        code, _, err = cli("eval", "--endpoint", stub.url, "--endpoint-model", "m", *flags)
    assert code == 0 and "Traceback" not in err, err
    (record,) = _records(tmp_path / "out")
    assert not record["passed"] and record["turns"][0]["feedback"].startswith("Your program failed 1 of the 1")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--api", "completions"], "--turns: the feedback is a chat message; it needs --api chat"),
        (["--turns", "0"], "--turns"),
    ],
)
def test_turns_that_cannot_run_are_refused_in_one_line(cli, extra, message, tmp_path):
    code, _, err = cli("eval", "--endpoint", "http://127.0.0.1:9/v1", "--endpoint-model", "m", "--dataset",
                       "held-out", "--turns", "2", *extra, "--output-dir", tmp_path / "o")  # fmt: skip
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_turns_with_given_samples_or_a_file_without_hidden_tests_are_refused(cli, tmp_path):
    samples = tmp_path / "s.jsonl"
    samples.write_text(json.dumps({"task_id": HELD_OUT[0].id, "solution": "x = 1"}) + "\n")
    code, _, err = cli("eval", "--samples", samples, "--dataset", "held-out", "--turns", "2")
    assert code == 2 and "--turns: generates each turn from the feedback; not with --samples" in err
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps({"id": "a", "prompt": "p", "tests": ["assert f() == 1"]}) + "\n")
    code, _, err = cli("eval", "--endpoint", "http://127.0.0.1:9/v1", "--endpoint-model", "m", "--dataset", one,
                       "--turns", "2", "--output-dir", tmp_path / "o")  # fmt: skip
    assert code == 2 and "no task of" in err and "has a hidden test" in err, err


def test_the_tiny_model_answers_its_own_conversation_at_turn_two(cli, tiny_model_dir, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t.to_json()) + "\n" for t in HELD_OUT[:3]))
    out = tmp_path / "out"
    code, _, err = cli("eval", "--model", tiny_model_dir, "--dataset", tasks, "--turns", "2", "-n", "2",
                       "--max-new-tokens", "8", "--output-dir", out, "--workers", "2")  # fmt: skip
    assert code == 0, err
    report = json.loads((out / "report.json").read_text())
    assert [row["turn"] for row in report["turns"]["by_turn"]] == [1, 2]
    assert report["turns"]["samples"] == 6
    records = _records(out)
    assert len(records) == 6 and all(r["turns"][0]["feedback"] for r in records)  # no code: told so, and again
    assert all(len(r["turns"]) == 2 and r["turns"][1]["completion"] is not None for r in records)
    # the second turn drew new text from the conversation (its own seed), not the first answer again
    assert any(r["turns"][0]["completion"] != r["turns"][1]["completion"] for r in records)


class Repairing(ScriptedEndpoint):
    """The held-out evaluation's endpoint, scripted: turn 1 right for every other task, noise otherwise; at turn 2
    (a conversation holding an answer), the right answer; it keeps the turn-2 conversations it saw."""

    def __init__(self, tasks, sampling):
        super().__init__(tasks, sampling)
        self.conversations: list[list[dict]] = []

    def answer(self, task, index, messages):
        if turn_of(messages) > 1:
            self.conversations.append(list(messages))
            return _right(task)
        return _right(task) if HELD_OUT.index(task) % 2 == 0 else "no code"


class OneRank:
    main, rank, world = True, 0, 1

    def split(self, items):
        return items, len(items)

    def gather(self, obj):
        return [obj]

    def broadcast(self, obj):
        return obj


def test_the_held_out_evaluation_during_grpo_reports_each_turn():
    cfg = load_config(None, ["model.name_or_path=tiny", "eval.every_steps=2", "eval.max_tasks=6", "eval.turns=2"])
    sampling = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": None, "repetition_penalty": 1.0}
    evaluator = build_heldout(cfg, sampling=sampling, max_completion_length=64, ranks=OneRank(), metrics=None,
                              rubric=build_rubric(cfg.rewards, cfg.sandbox))  # fmt: skip
    policy = Repairing(HELD_OUT, evaluator.sampling)
    record = evaluator.evaluate(endpoint_draws(policy, evaluator.sampling, chunk=4), step=2)
    first, second = record["turns"]["by_turn"]
    even = sum(HELD_OUT.index(p.task) % 2 == 0 for p in evaluator.problems)
    assert first["pass@1"] == pytest.approx(even / 6, abs=1e-4) and second["pass@1"] == 1.0
    assert second["repaired"] == 1.0 and record["pass_at_k"]["1"]["value"] == 1.0
    keys = evaluator.logger_keys(record)
    assert keys["eval/turn_1/pass@1"] == first["pass@1"] and keys["eval/turn_2/repaired"] == 1.0
    assert len(policy.conversations) == 4 * (6 - even)  # eval.samples 4, the failures' only
    for conversation in policy.conversations:
        assert conversation[-2] == {"role": "assistant", "content": "no code"}
        assert conversation[-1]["content"].startswith("Your answer held no Python code to run.")


def test_the_run_samplers_sample_each_conversation_once_with_a_seed_of_its_turn():
    from azr.data import Problem
    from azr.evaluation.measure import Sampling
    from azr.evaluation.samplers import Draws

    items = [(Problem(HELD_OUT[0]), 0), (Problem(HELD_OUT[1]), 1)]
    chats = [[{"role": "user", "content": f"task {i}"}, {"role": "assistant", "content": "a"},
              {"role": "user", "content": f"feedback {i}"}] for i in range(2)]  # fmt: skip
    chat = RecordingChat()
    served = RecordingTokens(chat)
    out = Draws(Sampling(n=4, max_new_tokens=8), served, chat, served=True).sample(items, chats)
    assert [g.text for g in out] == ["feedback 0", "feedback 1"] and {g.version for g in out} == {5}
    ((conversations, sampling),) = served.calls
    assert sampling.n == 1 and conversations == chats
    chat = RecordingChat()
    local = RecordingTokens(chat)
    model = Draws(Sampling(n=4, max_new_tokens=8, seed=3), local, chat)
    assert [g.text for g in model.sample(items, chats)] == ["feedback 0", "feedback 1"]
    model.sample(items)
    (_, second), (_, first) = local.calls
    assert second.n == first.n == 1 and second.seed != first.seed  # turn 2 draws from a seed of its own


def test_a_program_that_stashes_its_hidden_tests_between_runs_finds_nothing_to_show(cli, monkeypatch, tmp_path):
    """Turn 1 grades on the hidden tests, then the same pool runs the public ones: with one worker every program's
    public run follows hidden runs on the same worker. What they stashed there (a message queue, a key) is gone, so
    no feedback holds a hidden test of any task."""
    tasks = HELD_OUT[:4]

    def reply(prompt: str, turn: int) -> str:
        return stasher(BY_PROMPT[prompt][1].entry_point)

    dataset = tmp_path / "tasks.jsonl"
    dataset.write_text("".join(json.dumps(t.to_json()) + "\n" for t in tasks))
    with chat_endpoint(monkeypatch, reply) as stub:
        out = tmp_path / "out"
        code, _, err = cli("eval", "--endpoint", stub.url, "--endpoint-model", "m", "--dataset", dataset,
                           "--turns", "2", "--output-dir", out, "--workers", "1", "--public-tests", "1")  # fmt: skip
        assert code == 0, err
        received = [r.body["messages"] for r in stub.received]
    feedbacks = {BY_PROMPT[m[1]["content"]][1].id: m[3]["content"] for m in received if len(m) > 2}
    assert sorted(feedbacks) == sorted(t.id for t in tasks)
    for task in tasks:
        feedback = feedbacks[task.id]
        assert "ValueError: stashed:" in feedback, feedback  # the public run ran, and found nothing stashed
        for mark in every_hidden_mark(tasks):
            assert mark not in feedback, (task.id, mark, feedback)
