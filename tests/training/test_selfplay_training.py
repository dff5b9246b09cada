"""Self-play wired into training: tiny-model GRPO runs on CPU against the vLLM-served tiny model as the opponent,
with a teacher (the HTTP stub) giving hints and frontier replay on; then the same run with ~30% of opponent and
teacher requests failing. Group replacement on its own, without a model.

Real parts throughout: the tiny model, TRL's trainer, the bwrap sandbox, vLLM on 127.0.0.1 and the stub's HTTP
server. Faults are injected by the stub: in front of the teacher, and as a proxy in front of vLLM for the opponent.
"""

from __future__ import annotations

import io
import json
import logging
import random
import urllib.request
import zlib
from collections import Counter
from pathlib import Path

import http_stub
import pytest
import yaml
from http_stub import COMPLETION_TOKENS, PROMPT_TOKENS, Fault, StubServer
from recipes import tiny_recipe
from run_files import read_generations, read_jsonl

from azr.config import load_config
from azr.prompts import HINT_MARKER
from azr.rewards.functions import FormatReward
from azr.rollouts.groups import GroupSampler, whole_groups
from azr.selfplay.replay import FrontierReplay, HintSource

KEY = "sk-fake-arena-KEY-5a5a5a5a5a5a5a5a"
HINT = "TEACHER-HINT-7f3a: check the smallest inputs first, then the general case."
TEACHER_REPLY = (
    f"<think>they missed it</think>{HINT}\n```python\ndef solve_it(x):\n    return 42\n```\nFinal answer: solve_it\n"
)
FAULTS = [
    Fault(status=500),
    Fault(status=503, echo_auth=True),  # a careless server echoing the key: it must be redacted everywhere
    Fault(status=429, headers={"Retry-After": "0"}),
    Fault(body="{not json"),
    Fault(truncate=True),
]


def _recipe(out: Path, model_dir: Path, opponent_url: str, opponent_model: str, teacher_url: str) -> dict:
    endpoint = {"enabled": True, "api_key_env": "AZR_FAKE_KEY", "timeout_s": 60, "max_retries": 1, "concurrency": 4}
    return tiny_recipe(
        model_dir,
        out,
        data={"max_tasks": 12},
        grpo={
            "per_device_train_batch_size": 8,  # four prompt groups of two completions
            "max_completion_length": 32,
            "max_steps": 3,
            "save_steps": 2,  # checkpoint-2 holds the self-play state a resume continues from
        },
        self_play={
            **endpoint,
            "base_url": opponent_url,
            "model": opponent_model,
            "max_tokens": 32,
            "scoreboard_every": 2,
        },
        teacher={**endpoint, "base_url": teacher_url, "model": "teach", "max_tokens": 64},
        teacher_assist={"enabled": True, "hint_prob_neither": 1.0, "hint_prob_opponent_only": 1.0},
        curriculum={"replay": True, "replay_rate": 0.25},
    )


def _payload(vllm_url: str):
    """The stubs' happy path: the teacher ("teach") answers a hint with code and an answer line in it; any other
    model is the opponent, forwarded to the live vLLM server (the stub is then a fault-injecting proxy)."""
    root = vllm_url.rsplit("/v1", 1)[0]
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def payload(path: str, body: dict) -> dict:
        if body.get("model") == "teach":
            usage = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS}
            message = {"role": "assistant", "content": TEACHER_REPLY}
            return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": usage}
        request = urllib.request.Request(
            root + path, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
        )
        with direct.open(request, timeout=120) as resp:
            return json.loads(resp.read())

    return payload


def _faulty(seed: int, rate: float = 0.15):
    """About 30% of requests fail: every attempt for the tasks whose question hashes to 0 mod 6 (those fail for
    good: unavailable), and a random `rate` of the others (a retry mostly recovers), cycling through the fault kinds."""
    rng, count = random.Random(seed), Counter()

    def fault_for(received):
        question = received.body["messages"][-1]["content"]
        if zlib.crc32(question.encode()) % 6 and rng.random() >= rate:
            return None
        count["faults"] += 1
        return FAULTS[count["faults"] % len(FAULTS)]

    return fault_for, count


def _run(out: Path, model_dir: Path, vllm, *, faults: bool, resume_from: str | None = None) -> dict:
    """One training run (or its resumption); returns its folder, captured log text and what the stubs saw."""
    from azr.training.run import run_train

    text = io.StringIO()
    handler = logging.StreamHandler(text)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    with pytest.MonkeyPatch.context() as env:
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
            env.setenv(name, "1")
        env.setenv("NO_PROXY", "127.0.0.1")
        env.setenv("AZR_FAKE_KEY", KEY)
        env.setattr(http_stub, "happy_payload", _payload(vllm.base_url))
        try:
            with StubServer() as teacher, StubServer() as proxy:
                counts = {}
                if faults:
                    teacher.fault_for, counts["teacher"] = _faulty(1)
                    proxy.fault_for, counts["opponent"] = _faulty(2)
                opponent_url = proxy.url if faults else vllm.base_url
                recipe = _recipe(out, model_dir, opponent_url, vllm.model, teacher.url)
                path = out.parent / f"{out.name}.yaml"
                path.write_text(yaml.safe_dump(recipe))
                assert run_train(load_config(path), resume_from=resume_from) == 0
                seen = {"teacher_requests": len(teacher.received), "proxy_requests": len(proxy.received)}
        finally:
            root.removeHandler(handler)
            root.setLevel(level)
    return {"out": out, "log": text.getvalue(), "faults": {k: v["faults"] for k, v in counts.items()}, **seen}


@pytest.fixture(scope="module")
def happy(vllm_server, tiny_model_dir, tmp_path_factory) -> dict:
    return _run(tmp_path_factory.mktemp("arena") / "happy", tiny_model_dir, vllm_server, faults=False)


@pytest.fixture(scope="module")
def faulty(vllm_server, tiny_model_dir, tmp_path_factory) -> dict:
    return _run(tmp_path_factory.mktemp("arena") / "faulty", tiny_model_dir, vllm_server, faults=True)


def _grpo_metrics(out: Path) -> list[dict]:
    return [r for r in read_jsonl(out / "metrics.jsonl") if r["phase"] == "grpo"]


def _check_scoreboard(out: Path) -> dict:
    """scoreboard.json and frontier.json agree with the generation log, the opponent's log and each other."""
    board = json.loads((out / "scoreboard.json").read_text())
    frontier = json.loads((out / "frontier.json").read_text())
    records = read_generations(out)
    plain = [r for r in records if not r["hinted"]]
    hinted = [r for r in records if r["hinted"]]
    assert sum(board["completions"].values()) == len(plain)
    assert board["hinted"]["completions"] == len(hinted)
    problems = {(r["step"], r["task_id"]) for r in plain}
    assert sum(board["problems"].values()) == len(problems)
    assert [h["step"] for h in board["history"]] == [1, 2, 3] and board["last_step"] == 3
    # Per problem, from the log: the opponent's verdict and whether any of the policy's completions passed.
    outcomes = {(s, t): _outcome(plain, s, t) for s, t in problems}
    assert {k: v for k, v in board["problems"].items() if v} == dict(Counter(outcomes.values()))
    missed = {t for (_, t), outcome in outcomes.items() if outcome in ("neither", "opponent_only")}
    assert set(frontier["entries"]) == missed and frontier["tasks"] == board["frontier_tasks"] == len(missed)
    # The opponent answered each problem once: its log's task counts are the scoreboard's problems.
    opponent = read_jsonl(out / "selfplay.jsonl")
    assert [r["step"] for r in opponent] == [1, 2, 3]
    assert sum(r["tasks"] for r in opponent) == len(problems)
    assert sum(r["unavailable"] for r in opponent) == board["problems"]["unavailable"]
    return board


def _outcome(plain: list[dict], step: int, task: str) -> str:
    """A problem's outcome as the scoreboard defines it, read from the generation log."""
    group = [r for r in plain if (r["step"], r["task_id"]) == (step, task)]
    opponent, policy = group[0]["opponent_passed"], any(r["status"] == "passed" for r in group)
    if opponent is None:
        return "unavailable"
    return {(True, True): "both", (True, False): "policy_only", (False, True): "opponent_only"}.get(
        (policy, opponent), "neither"
    )


def _check_groups_and_hints(out: Path) -> dict:
    """Whole groups; hinted and replayed groups only in later batches; hints only in prompts, never completions."""
    records = read_generations(out)
    by_step = Counter(r["step"] for r in records)
    assert by_step == {1: 8, 2: 8, 3: 8}
    for i in range(0, len(records), 2):
        a, b = records[i], records[i + 1]
        assert (a["step"], a["task_id"], a["source"], a["prompt"]) == (
            b["step"],
            b["task_id"],
            b["source"],
            b["prompt"],
        )
    sources = Counter((r["step"], r["source"]) for r in records)
    assert sources[(1, "data")] == 8  # nothing to hint or replay before the first batch is scored
    hinted = [r for r in records if r["hinted"]]
    assert hinted and all(r["step"] > 1 and r["source"] == "hint" for r in hinted)
    assert all(HINT_MARKER in r["prompt"] and HINT in r["prompt"] for r in hinted)
    replayed = [r for r in records if r["source"] == "replay"]
    first_seen = {}
    for r in records:
        first_seen.setdefault(r["task_id"], r["step"])
    assert replayed and all(first_seen[r["task_id"]] < r["step"] for r in replayed)
    for r in records:
        assert HINT not in r["completion"] and "TEACHER-HINT" not in r["completion"]
        assert "solve_it" not in r["completion"] + r["prompt"]  # the teacher's code never reached anyone
    return {"hinted_groups": len(hinted) // 2, "replayed_groups": len(replayed) // 2}


@pytest.mark.slow(minutes=1)  # a run against the session's vLLM server
def test_selfplay_training_against_a_live_vllm_opponent_writes_a_consistent_scoreboard(happy):
    out = happy["out"]
    board = _check_scoreboard(out)
    assert board["problems"]["unavailable"] == 0  # a healthy opponent: every problem was a match
    mixed = _check_groups_and_hints(out)
    last = _grpo_metrics(out)[-1]
    assert last["selfplay/requests"] == sum(board["problems"].values()) and last["selfplay/failures"] == 0
    assert last["selfplay/completion_tokens"] > 0 and 1 < last["selfplay/max_in_flight"] <= 4
    assert last["selfplay/hinted_groups"] == mixed["hinted_groups"]
    assert last["selfplay/replayed_groups"] == mixed["replayed_groups"]
    teacher = read_jsonl(out / "teacher.jsonl")
    assert teacher and all(r["ok"] and r["kind"] == "hint" for r in teacher)
    print(
        f"\nhappy: scoreboard problems {board['problems']}, frontier {board['frontier_tasks']}, "
        f"opponent max in flight {last['selfplay/max_in_flight']}, wait {last['selfplay/wait_s']}s, {mixed}"
    )


def test_selfplay_training_completes_when_thirty_percent_of_requests_fail(faulty):
    out = faulty["out"]
    board = _check_scoreboard(out)
    mixed = _check_groups_and_hints(out)  # hints still flowed into later batches
    last = _grpo_metrics(out)[-1]
    assert faulty["faults"]["opponent"] > 0 and faulty["faults"]["teacher"] > 0
    assert last["selfplay/retries"] > 0 and last["teacher/retries"] > 0
    assert board["problems"]["unavailable"] > 0  # some opponent requests failed for good, and no step crashed
    assert last["selfplay/failures"] == board["problems"]["unavailable"]  # failed for good: unavailable, no loss
    records = read_generations(out)
    for r in records:
        if r["opponent_passed"] is None:
            assert r["rewards"]["selfplay_reward"] is None  # masked, never scored as a loss
    teacher = read_jsonl(out / "teacher.jsonl")
    assert sum(not r["ok"] for r in teacher) == last["teacher/failures"]
    print(
        f"\nfaults: opponent {faulty['faults']['opponent']} of {faulty['proxy_requests']} requests faulted, "
        f"{last['selfplay/retries']} retries, {last['selfplay/failures']} failed for good; teacher "
        f"{faulty['faults']['teacher']} of {faulty['teacher_requests']} faulted, {last['teacher/retries']} retries, "
        f"{last['teacher/failures']} failed for good; max in flight {last['selfplay/max_in_flight']}; "
        f"scoreboard {board['problems']}; {mixed}"
    )


def test_hinted_groups_are_rewarded_on_the_policys_own_completions(happy):
    records = read_generations(happy["out"])
    hinted = [r for r in records if r["hinted"]]
    assert hinted
    # The rewards logged with each hinted row are those of the completion logged beside it (the policy's tokens as
    # TRL decoded them): recomputing the format reward from that text gives the same value.
    assert [r["rewards"]["format_reward"] for r in hinted] == FormatReward()(
        completions=[r["completion"] for r in hinted]
    )
    for r in hinted:
        assert r["rewards"]["tests_reward"] is not None  # graded: the policy's code (or lack of it) was run
        assert r["rewards"]["selfplay_reward"] is None and r["opponent_passed"] is None  # no match on a retry
        assert r["completion"] != TEACHER_REPLY and HINT not in r["completion"]


def test_a_selfplay_run_resumed_from_a_checkpoint_counts_and_logs_each_batch_once(
    happy, vllm_server, tiny_model_dir, tmp_path
):
    """Resuming a copy of the finished happy run from checkpoint-2 re-runs step 3, as after a crash just before the
    end: the scoreboard continues from the state saved with the checkpoint, and the opponent's, the teacher's and the
    generation logs keep each batch's records once."""
    import shutil

    saved = json.loads((happy["out"] / "checkpoints" / "checkpoint-2" / "selfplay_state.json").read_text())
    assert [h["step"] for h in saved["board"]["history"]] == [1, 2] and saved["opponent"]["totals"]["batches"] == 2
    out = tmp_path / "resumed"
    shutil.copytree(happy["out"], out)
    checkpoint = str(out / "checkpoints" / "checkpoint-2")
    resumed = _run(out, tiny_model_dir, vllm_server, faults=False, resume_from=checkpoint)
    assert "self-play: resumed from" in resumed["log"] and "scoreboard at step 2" in resumed["log"]
    board = _check_scoreboard(out)  # history [1, 2, 3]; one opponent record per step; counts match the logs
    assert Counter(r["step"] for r in read_generations(out)) == {1: 8, 2: 8, 3: 8}
    last = _grpo_metrics(out)[-1]
    assert [r["step"] for r in _grpo_metrics(out)] == [1, 2, 3]
    assert last["selfplay/requests"] == sum(board["problems"].values())  # usage carried over, not restarted
    # The teacher's records up to the checkpoint are the original run's; those after it, this run's requests only.
    before, after = read_jsonl(happy["out"] / "teacher.jsonl"), read_jsonl(out / "teacher.jsonl")
    assert [r for r in after if r["step"] <= 2] == [r for r in before if r["step"] <= 2]
    assert len([r for r in after if r["step"] > 2]) == resumed["teacher_requests"]


@pytest.mark.slow  # trains the tiny model against the vLLM server (its runs' fixtures)
@pytest.mark.parametrize("run", ["happy", "faulty"])
def test_the_api_key_is_in_no_output_file_and_no_log(run, request):
    result = request.getfixturevalue(run)
    files = [p for p in result["out"].rglob("*") if p.is_file()]
    assert len(files) > 10
    leaked = [str(p) for p in files if KEY.encode() in p.read_bytes()]
    assert not leaked
    assert result["log"] and KEY not in result["log"]


# ------------------------------------------------------------------------------------ group replacement alone
def _batch(task_ids: list[str], size: int = 2) -> list[dict]:
    return [{"prompt": f"p{t}", "task_id": t, "tests": ["assert 1"], "hint": "", "source": "data"}
            for t in task_ids for _ in range(size)]  # fmt: skip


def _sampler(rows: dict, *sources) -> GroupSampler:
    """The one group sampler with self-play's sources, as training builds it (no curriculum: TRL's order)."""
    return GroupSampler(rows, sources=sources)


def test_groups_are_replaced_whole_with_the_batchs_own_keys():
    hints = [{"prompt": "hinted a", "task_id": "a", "tests": ["assert 1"], "hint": "h", "opponent_passed": True}]
    rows = {t: r for r in _batch(["x", "y", "z"], 1) for t in [r["task_id"]]}
    hinted = HintSource(lambda n: [hints.pop(0) for _ in range(min(n, len(hints)))], 0.25)
    replay = FrontierReplay(rows, lambda: ["b", "x", "y"], 0.25)
    sampler = _sampler(rows, hinted, replay)
    batch = _batch(["a", "b", "c", "d"])
    mixed = sampler.compose(batch, 2, step=1)
    assert batch == _batch(["a", "b", "c", "d"])  # the input is left as it was
    assert [r["task_id"] for r in mixed] == ["a", "a", "b", "b", "x", "x", "a", "a"]
    assert [r["source"] for r in mixed[4:]] == ["replay", "replay", "hint", "hint"]
    assert all(set(r) == set(batch[0]) for r in mixed)  # no stale opponent_passed, nothing missing
    assert mixed[6]["hint"] == "h" and mixed[6] is not mixed[7]
    # Replay: frontier tasks already in the batch are skipped, the least replayed go first.
    assert [r["task_id"] for r in sampler.compose(_batch(["c", "d", "e", "f"]), 2, step=2)][6:] == ["y", "y"]
    assert (hinted.given, replay.given, sampler.totals["unaligned_batches"]) == (1, 2, 0)


def test_nothing_is_replaced_when_the_batch_is_not_whole_groups():
    rows = {"x": _batch(["x"], 1)[0]}
    sampler = _sampler(rows, FrontierReplay(rows, lambda: ["x"], 1.0))
    split = _batch(["a", "b"])[1:]  # a group cut by a process boundary
    assert whole_groups(split, 2) == [] and sampler.compose(split, 2, step=1) == split
    assert sampler.totals["unaligned_batches"] == 1
    assert int(0.25 * 3) == 0 and sampler.compose(_batch(["a", "b", "c"]), 2, step=1) != _batch(["a", "b", "c"])
    small = _sampler(rows, FrontierReplay(rows, lambda: ["x"], 0.25))
    assert small.compose(_batch(["a", "b", "c"]), 2, step=1) == _batch(["a", "b", "c"])  # 0.25 of 3 rounds to none
