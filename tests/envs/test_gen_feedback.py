"""`azr gen` with `rollouts.env: feedback`: multi-turn execution-feedback episodes written one JSON line each (every
turn's kind and token ids, the public verdict of each answer, the final program's verdict on the hidden tests and
its reward), and nothing of a hidden test in any observation.

Real parts: the bwrap sandbox grades; a real HTTP server on loopback answers as an endpoint (scripted: right at
once, wrong then repaired, wrong twice); a scripted token-level policy plays through the real runner on the tiny
model's tokenizer, so the ids recorded can be checked against the contexts it was asked to continue (both scripted
by `tests/feedback_policy.py`)."""

from __future__ import annotations

import json

import pytest
from feedback_policy import BY_PROMPT, TASKS, ScriptedTokens, answer, chat_endpoint, plan, scripted_local
from hidden_scan import every_hidden_mark, hidden_marks, stasher

import azr.envs.gen as gen_module
from azr.config import load_config
from azr.envs import run_gen
from azr.rollouts import ChatTokens, Continuation
from azr.tools import SCHEMA


def recipe(write, feedback: dict | None = None, **gen) -> object:
    settings = {"max_tasks": len(TASKS), "samples": 1, "max_new_tokens": 400, "max_tokens": 2000, **gen}
    text = (
        "model: {name_or_path: unused}\nsandbox: {workers: 1, backend: bwrap}\nlogging: {console: plain}\n"
        f"rollouts: {{env: feedback}}\nfeedback: {json.dumps({'max_turns': 2, **(feedback or {})})}\n"
        f"gen: {json.dumps(settings)}\n"
    )
    return write("gen.yaml", text)


def _records(out) -> list[dict]:
    return [json.loads(line) for line in out.read_text().splitlines()]


def _observations(record: dict) -> list[str]:
    """Every text the environment wrote into the episode: its turns and the user messages after the task's."""
    users = [m["content"] for m in record["messages"] if m["role"] == "user"][1:]
    return users + [t["content"] for t in record["turns"] if t["kind"] == "env"]


@pytest.fixture
def repairer(monkeypatch):
    """A real stub server answering each task by `plan`."""
    with chat_endpoint(monkeypatch, lambda prompt, turn: answer(*BY_PROMPT[prompt], turn)) as stub:
        yield stub


def test_an_endpoint_episode_is_written_turn_by_turn_and_scored_on_hidden_tests(write, repairer, tmp_path):
    endpoint = {"base_url": repairer.url, "model": "m", "max_retries": 0}
    cfg = load_config(recipe(write, policy="endpoint", endpoint=endpoint), [])
    out = tmp_path / "episodes.jsonl"
    assert run_gen(cfg, out) == 0
    records = _records(out)
    assert sorted(r["task_id"] for r in records) == sorted(t.id for t in TASKS)
    for record in records:
        i, task = next((j, t) for j, t in enumerate(TASKS) if t.id == record["task_id"])
        assert record["schema"] == SCHEMA and record["env"] == "feedback" and record["tools"] == []
        assert record["sampling"]["env"] == "feedback" and record["sampling"]["max_turns"] == 2
        kinds = [t["kind"] for t in record["turns"]]
        policy = [t for t in record["turns"] if t["kind"] == "policy"]
        # right at once: stopped on the public pass; wrong twice: the last feedback kept but shown to no one
        assert kinds == [["policy"], ["policy", "env", "policy"], ["policy", "env", "policy", "env"]][i % 3]
        assert [t["public"]["passed"] for t in policy] == [plan(i, k + 1) == "right" for k in range(len(policy))]
        assert [t.get("shown") for t in record["turns"] if t["kind"] == "env"] == [True, False][: kinds.count("env")]
        assert record["prompt_ids"] == [] and all(t["ids"] == [] for t in record["turns"])  # an endpoint's: text
        assert record["finish_reason"] == ["done", "done", "max_turns"][i % 3]
        passed = i % 3 != 2
        assert record["grade"]["passed"] is passed and record["grade"]["tests_total"] == len(task.split_tests()[1])
        assert record["rewards"]["tests_reward"] == (1.0 if passed else 0.0)
        roles = {"policy": "assistant", "env": "user"}
        assert [m["role"] for m in record["messages"]] == ["system", "user", *(roles[k] for k in kinds)]
        shown = _observations(record)
        assert all(s.startswith("Your program failed 1 of the 1 public test") for s in shown), shown
        for text in shown:  # the public test shown, nothing of a hidden one
            for mark in hidden_marks(task):
                assert mark not in text, (task.id, mark)
    # every request the endpoint got, too
    for request in repairer.received:
        messages = request.body["messages"]
        task = BY_PROMPT[messages[1]["content"]][1]
        assert "tools" not in request.body or not request.body["tools"]
        for message in messages[2:]:
            for mark in hidden_marks(task):
                assert mark not in message["content"]


def test_a_program_that_stashes_hidden_tests_between_episodes_shows_none(write, monkeypatch, tmp_path):
    """One episode at a time on one worker: each episode's public runs follow the hidden run that scored the one
    before, on the same worker (as GRPO's feedback rounds follow the last round's scoring). What an answer stashed
    there (a message queue, a key) is gone: no observation holds a hidden test of any task."""
    with chat_endpoint(monkeypatch, lambda prompt, turn: stasher(BY_PROMPT[prompt][1].entry_point)) as stub:
        endpoint = {"base_url": stub.url, "model": "m", "max_retries": 0}
        cfg = load_config(recipe(write, policy="endpoint", endpoint=endpoint, concurrency=1), [])
        out = tmp_path / "episodes.jsonl"
        assert run_gen(cfg, out) == 0
        sent = [m["content"] for r in stub.received for m in r.body["messages"][2:]]
    shown = [text for record in _records(out) for text in _observations(record)] + sent
    assert shown and all("ValueError: stashed:" in text or "```python" in text for text in shown), shown
    for text in shown:
        for mark in every_hidden_mark(TASKS):
            assert mark not in text, (mark, text)


def test_a_records_rewards_are_those_grpo_pays_the_episode_shaping_included(write, repairer, tmp_path):
    """With `feedback.turn_penalty` and `feedback.improvement_bonus` set, a record's rewards hold the shaping GRPO
    adds (`episode_reward`: -0.1 per answer after the first, 0.5 times the rise of the public pass fraction) and
    its total, so rollouts filtered by reward for fine-tuning are ranked as GRPO ranks them."""
    endpoint = {"base_url": repairer.url, "model": "m", "max_retries": 0}
    shaping = {"turn_penalty": 0.1, "improvement_bonus": 0.5}
    totals = {}
    for name, feedback in (("plain", None), ("shaped", shaping)):
        cfg = load_config(recipe(write, feedback=feedback, policy="endpoint", endpoint=endpoint), [])
        out = tmp_path / f"{name}.jsonl"
        assert run_gen(cfg, out) == 0
        totals[name] = {r["task_id"]: r["rewards"] for r in _records(out)}
    for task_id, rewards in totals["shaped"].items():
        i = next(j for j, t in enumerate(TASKS) if t.id == task_id)
        # right at once: no shaping; wrong then repaired: -0.1 + 0.5 * (1 - 0); wrong twice: -0.1
        assert rewards["episode_reward"] == pytest.approx([0.0, 0.4, -0.1][i % 3])
        assert "episode_reward" not in totals["plain"][task_id]  # nothing set: no shaping, as in GRPO
        assert rewards["total"] == pytest.approx(totals["plain"][task_id]["total"] + rewards["episode_reward"])


def test_a_local_policy_records_the_ids_it_was_sampled_on(write, tmp_path, tiny_model_dir, monkeypatch):
    """The record's prompt ids and turn ids, laid end to end, are the very contexts the policy continued: turn 2's
    context is the prompt, turn 1's sampled ids and the feedback's ids."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    sampler = ScriptedTokens(tokenizer)
    policy = lambda cfg, kind, stack: scripted_local(tokenizer, cfg.template_kwargs(), sampler)  # noqa: E731
    monkeypatch.setattr(gen_module, "build_policy", policy)
    out = tmp_path / "episodes.jsonl"
    cfg = load_config(recipe(write), [])
    assert run_gen(cfg, out) == 0
    chat = ChatTokens(tokenizer, cfg.template_kwargs())
    records = _records(out)
    assert len(records) == len(TASKS)
    for record in records:
        i, task = next((j, t) for j, t in enumerate(TASKS) if t.id == record["task_id"])
        turns = record["turns"]
        ids = [record["prompt_ids"]] + [t["ids"] for t in turns]
        assert record["prompt_ids"] and record["prompt_ids"] == chat.prompt_ids(record["messages"][:2])
        contexts = [c for c in sampler.contexts if c[: len(record["prompt_ids"])] == record["prompt_ids"]]
        policy = [k for k, t in enumerate(turns) if t["kind"] == "policy"]
        assert len(contexts) == len(policy)
        for n, k in enumerate(policy):  # what the policy was asked to continue at each turn, exactly
            assert contexts[n] == [x for part in ids[: k + 1] for x in part]
            assert turns[k]["ids"] == sampler.sampled[sampler.contexts.index(contexts[n])]
        for turn in turns:
            if turn["kind"] == "env":
                assert bool(turn["ids"]) is turn["shown"]  # the feedback's ids where it was shown
                if turn["shown"]:
                    assert turn["content"] in tokenizer.decode(turn["ids"])
        assert record["usage"]["env_tokens"] == sum(len(t["ids"]) for t in turns if t["kind"] == "env")
        assert record["grade"]["passed"] is (i % 3 != 2)
        for text in _observations(record):
            for mark in hidden_marks(task):
                assert mark not in text


def test_feedback_gen_on_tasks_without_a_hidden_test_is_refused_in_one_line(write, cli, tmp_path):
    one = write("one.jsonl", json.dumps({"id": "a", "prompt": "p", "tests": ["assert f() == 1"]}) + "\n")
    out = tmp_path / "x.jsonl"
    code, _, err = cli("gen", "--config", recipe(write), "--out", out, "--set", f"gen.tasks={one}")
    assert code == 2 and "rollouts.env: no task of" in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_a_key_the_policy_writes_is_redacted_and_the_episode_keeps_no_ids_that_spell_it(
    write, tmp_path, tiny_model_dir, monkeypatch
):
    from transformers import AutoTokenizer

    key = "sk-feedback-gen-4242424242-SECRET"
    monkeypatch.setenv("AZR_FAKE_KEY", key)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)

    class Leaky(ScriptedTokens):
        def complete(self, contexts, sampling):
            outs = super().complete(contexts, sampling)
            ids = self.tokenizer(f"my key is {key}", add_special_tokens=False)["input_ids"]
            return [Continuation(ids + o.ids, f"my key is {key}" + o.text, "stop") for o in outs]

    policy = lambda cfg, kind, stack: scripted_local(tokenizer, cfg.template_kwargs(), Leaky(tokenizer))  # noqa: E731
    monkeypatch.setattr(gen_module, "build_policy", policy)
    path = recipe(write, max_tasks=2)
    path.write_text(path.read_text() + "self_play: {api_key_env: AZR_FAKE_KEY}\n")
    out = tmp_path / "episodes.jsonl"
    assert run_gen(load_config(path, []), out) == 0
    text = out.read_text()
    assert key not in text and "<redacted>" in text
    for record in _records(out):
        assert record["prompt_ids"] == [] and all(t["ids"] == [] for t in record["turns"])
