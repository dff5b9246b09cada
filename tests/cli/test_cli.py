"""CLI contract: every command has --help, user errors exit 2 with one line, the shipped data validates."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import shutil
import stat
import subprocess
import sys

import pytest
import yaml

from azr.cli import invoke
from azr.cli.evaluate import eval_
from azr.cli.gen import gen
from azr.cli.train import train

COMMANDS = [
    [],
    ["train"],
    ["eval"],
    ["gen"],
    ["tool"],
    ["tool", "call"],
    ["sandbox"],
    ["sandbox", "run"],
    ["sandbox", "doctor"],
    ["data"],
    ["data", "validate"],
    ["tiny-model"],
    ["config"],
    ["config", "fields"],
    ["config", "show"],
    ["absolute-zero"],
    ["absolute-zero", "check"],
    ["config", "check"],
    ["report"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "azr")
def test_every_command_has_help(cli, command):
    code, out, err = cli(*command, "--help")
    assert code == 0 and "Usage:" in out and not err


@pytest.mark.parametrize(("command", "prog"), [(train, "azr-train"), (eval_, "azr-eval"), (gen, "azr-gen")])
def test_entry_points_are_the_subcommands(capsys, command, prog):
    assert invoke(command, prog, ["--help"]) == 0
    assert f"Usage: {prog} [OPTIONS]" in capsys.readouterr().out


def test_help_imports_nothing_heavy():
    """Nor the config schema, the sandbox or the evaluation: commands import what they need inside (azr.cli.app)."""
    heavy = ("torch", "transformers", "trl", "datasets", "peft", "yaml", "azr.config", "azr.sandbox", "azr.evaluation")
    probe = (
        "import sys; from azr.cli import invoke, azr; invoke(azr, 'azr', ['--help']); "
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


HEAVY_MODULES = ("torch", "transformers", "trl", "datasets", "peft", "accelerate", "bitsandbytes")
# Runs `azr ARGS...` and writes, at exit, which heavy modules the command had imported.
PROBE = """
import atexit, json, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules))))
from azr.cli import main
main()
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["eval", "--samples", "SAMPLES", "--dataset", "humaneval", "--output-dir", "OUT"],
        ["data", "validate", "held-out"],
        ["sandbox", "run", "--code", "-", "--test", "assert f(1) == 2"],
        ["sandbox", "doctor"],
        ["config", "fields"],
        ["config", "show", "--config", "RECIPE"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_commands_that_need_no_model_import_no_torch_transformers_or_trl(tmp_path, argv):
    samples = tmp_path / "samples.jsonl"
    samples.write_text(json.dumps({"task_id": "HumanEval/0", "completion": "    return False\n"}) + "\n")
    (tmp_path / "r.yaml").write_text(RECIPE)
    names = {"SAMPLES": samples, "OUT": tmp_path / "out", "RECIPE": tmp_path / "r.yaml"}
    argv = [str(names.get(a, a)) for a in argv]
    probe = PROBE.format(heavy=HEAVY_MODULES)
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "modules.json"), *argv],
        input="def f(x):\n    return x + 1\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]  # 1: eval with a wrong sample, doctor on a weak host
    assert json.loads((tmp_path / "modules.json").read_text()) == []


RECIPE = "model: {name_or_path: org/model}\n"


def _user_errors(tmp):
    """(argv, expected start of the error line) for malformed inputs of every kind."""

    def f(name, text):
        path = tmp / name
        path.write_text(text)
        return str(path)

    good_row = {"id": "a", "prompt": "p", "tests": ["assert True"]}
    return [
        (["train", "--config", f("bad.yaml", "model: [unclosed\n")], "{tmp}/bad.yaml:2: invalid YAML"),
        (["train", "--config", f("bad.json", '{"model":\n  {"name_or_path": }}')], "{tmp}/bad.json:2: invalid JSON"),
        (["train", "--config", f("list.yaml", "- a\n- b\n")], "{tmp}/list.yaml: expected a mapping of sections"),
        (["train", "--config", f("k.yaml", RECIPE + "modle: {}\n")], "modle: unknown key (did you mean 'model'?)"),
        (
            ["train", "--config", f("t.yaml", "model: {name_or_path: m, adapter: {r: high}}\n")],
            "model.adapter.r: expected an integer, got 'high'",
        ),
        (
            ["train", "--config", f("w.yaml", RECIPE + "rewards: [{name: tests}, {name: format, weight: high}]\n")],
            "rewards[1].weight: expected a number, got 'high'",
        ),
        (["train", "--config", f("s.yaml", RECIPE + "teacher: {api_key: sk-x}\n")], "teacher.api_key: unknown key"),
        (
            ["train", "--config", f("g.yaml", RECIPE + "grpo: {learning_rat: 0.1}\n")],
            "grpo.learning_rat: not a trl.GRPOConfig field (did you mean 'learning_rate'?)",
        ),
        (["train", "--config", f("l.yaml", "azr: {model_id: m, lora: {rank: 4}}\n")], "azr.lora.rank: unknown legacy"),
        (["train", "--config", f("e.yaml", RECIPE + "self_play: {enabled: true}\n")], "self_play.base_url: required"),
        (["train", "--config", str(tmp / "missing.yaml")], "{tmp}/missing.yaml: config file not found"),
        (["train"], "--config: a recipe file is required"),
        (["train", "--config", f("r.yaml", RECIPE), "--set", "model.adapter.r"], "--set 'model.adapter.r': expected"),
        (["train", "--config", f("r.yaml", RECIPE), "--set", "model.adapter.q=1"], "model.adapter.q: unknown key"),
        (
            ["train", "--config", f("r.yaml", RECIPE), "--set", "sandbox.timeout_s=soon"],
            "sandbox.timeout_s: expected a number, got 'soon'",
        ),
        (["train", "--config", f("r.yaml", RECIPE), "--max-steps", "0"], "Invalid value for '--max-steps'"),
        (["train", "--config", f("r.yaml", RECIPE), "--frobnicate"], "No such option '--frobnicate'"),
        (["train", "--config", f("d.yaml", RECIPE + "data: {train: nope.jsonl}\n")], "{tmp}/nope.jsonl: task file not"),
        (
            ["config", "check", "--config", f("b.yaml", RECIPE + f"data: {{train: {f('b.jsonl', BROKEN)}}}\n")],
            "{tmp}/b.jsonl:2: field 'tests[0]': not valid Python",
        ),
        (
            ["config", "check", "--config", f("be.yaml", RECIPE + f"data: {{eval: {f('b.jsonl', BROKEN)}}}\n")],
            "{tmp}/b.jsonl:2: field 'tests[0]': not valid Python",
        ),
        (["data", "validate", f("ok.jsonl", json.dumps(good_row)), "--format", "mbp"], "format 'mbp': unknown"),
        (["data", "validate", str(tmp / "none.jsonl")], "{tmp}/none.jsonl: task file not found"),
        (
            ["train", "--config", f("p.yaml", RECIPE + "sandbox: {packages: [no-such-package-azr]}\n")],
            "sandbox.packages[0]: 'no-such-package-azr' is not installed here (pip install no-such-package-azr)",
        ),
        (
            ["data", "validate", f("ok.jsonl", json.dumps(good_row)), "--package", "no-such-package-azr"],
            "sandbox.packages[0]: 'no-such-package-azr' is not installed here",
        ),
        (["data", "validate", f("j.jsonl", json.dumps(good_row) + "\n{oops\n")], "{tmp}/j.jsonl:2: invalid JSON"),
        (
            ["data", "validate", f("e.jsonl", json.dumps({**good_row, "tests": []}))],
            "{tmp}/e.jsonl:1: field 'tests': expected a non-empty list",
        ),
        (
            ["data", "validate", f("d.jsonl", json.dumps(good_row) + "\n" + json.dumps(good_row))],
            "{tmp}/d.jsonl:2: duplicate id 'a' (first at {tmp}/d.jsonl:1)",
        ),
        (
            ["data", "validate", f("u.jsonl", json.dumps({**good_row, "solutions": "x"}))],
            "{tmp}/u.jsonl:1: unknown field 'solutions' (did you mean 'solution'?)",
        ),
        (
            ["data", "validate", f("ok.jsonl", json.dumps(good_row)), "--column-map", "prompt"],
            "--column-map 'prompt': expected FIELD=COLUMN",
        ),
        (
            ["data", "validate", f("ok.jsonl", json.dumps(good_row)), "--column-map", "promt=text"],
            "data.column_map.promt: not a task field (did you mean 'prompt'?)",
        ),
        (["eval", "--dataset", "held-out"], "eval: give exactly one of --config, --model or --endpoint"),
        (["eval", "--endpoint", "http://127.0.0.1:1/v1", "--dataset", "held-out"], "--endpoint-model: required"),
        (["eval", "--model", "m", "--dataset", "held-out", "-k", "1,ten"], "-k: expected comma-separated integers"),
        (["eval", "--model", "m", "--samples", "s.jsonl", "--endpoint", "u", "--dataset", "h"], "eval: give exactly"),
        (["data", "validate", "train", "--column-map", "prompt=text"], "column map or format given for the shipped"),
        (
            ["train", "--config", f("o.yaml", RECIPE + f"output_dir: {f('file', '')}/sub\n")],
            "output_dir: cannot create {tmp}/file/sub",
        ),
    ]


BROKEN = '{"id": "a", "prompt": "p", "tests": ["assert 1"]}\n{"id": "b", "prompt": "p", "tests": ["assert f(1) =="]}\n'


def test_train_refuses_a_broken_task_file_before_writing_anything(cli, tmp_path, write):
    out = tmp_path / "run"
    recipe = write("r.yaml", RECIPE + f"output_dir: {out}\ndata: {{train: {write('b.jsonl', BROKEN)}}}\n")
    code, _, err = cli("train", "--config", recipe)
    assert code == 2 and "b.jsonl:2: field 'tests[0]'" in err
    assert not out.exists()


def test_user_errors_exit_2_with_one_line(cli, tmp_path):
    cases = _user_errors(tmp_path)
    assert len(cases) >= 20
    for argv, expected in cases:
        code, _out, err = cli(*argv)
        expected = expected.replace("{tmp}", str(tmp_path))
        assert code == 2, (argv, code, err)
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert err.startswith("azr: error: " + expected), (argv, err)


def test_console_script_reports_user_error_in_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", "from azr.cli import train_main; train_main()", "--config", str(tmp_path / "x.yaml")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert result.stderr == f"azr-train: error: {tmp_path}/x.yaml: config file not found\n"


@pytest.mark.parametrize("argv", [[], ["data"], ["sandbox"], ["config"]])
def test_a_group_without_subcommand_shows_its_help(cli, argv):
    code, out, err = cli(*argv)
    assert code == 0 and out.startswith("Usage: azr") and not err


def test_shipped_reference_solutions_all_pass(cli):
    # held-out only: tests/rewards/test_grading.py runs every shipped split through the same grading
    code, out, _ = cli("data", "validate", "held-out")
    assert code == 0, out
    assert "FAIL" not in out and " 0 failed, 0 without a reference solution" in out


def test_validate_reports_a_broken_solution(cli, write):
    rows = [
        {"id": "ok", "prompt": "p", "solution": "def f():\n    return 1", "tests": ["assert f() == 1"] * 3},
        {
            "id": "bad",
            "prompt": "p",
            "solution": "def f():\n    return 2",
            "tests": ["assert f() == 1", "assert f() > 0", "assert f() == 1"],
        },
    ]
    path = write("t.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    code, out, _ = cli("data", "validate", path)
    assert code == 1
    assert "FAIL bad: failed, 1/3 tests passed (3 assert); test 0: AssertionError" in out
    assert out.strip().endswith("2 tasks, 1 passed, 1 failed, 0 without a reference solution")


def test_validate_refuses_a_test_module_where_no_test_runs_and_counts_tests_by_kind(cli, write):
    module = "from solution import f\n\ndef test_one():\n    assert f() == 1\n\ndef test_two():\n    assert f() > 0\n"
    rows = [
        {"id": "ok", "prompt": "p", "solution": "def f():\n    return 1", "tests": [{"pytest": module}, "assert f()"]},
        {"id": "empty", "prompt": "p", "solution": "def f():\n    return 1", "tests": [{"unittest": "import os"}]},
        {"id": "bare", "prompt": "p", "tests": [{"pytest": "def helper():\n    assert True\n"}]},
    ]
    code, out, _ = cli("data", "validate", write("t.jsonl", "".join(json.dumps(r) + "\n" for r in rows)))
    assert code == 1, out
    assert "tests by kind: 1 assert, 3 pytest, 1 unittest" in out
    assert "FAIL empty: no tests ran: a test module of it defines no test (1 unittest)" in out
    assert "FAIL bare: no tests ran" in out and "FAIL ok" not in out
    assert out.strip().endswith("3 tasks, 1 passed, 2 failed, 0 without a reference solution")


def test_validate_says_when_nothing_was_checked(cli, write):
    path = write("n.jsonl", json.dumps({"id": "a", "prompt": "p", "tests": ["assert 1"]}) + "\n")
    code, _, err = cli("data", "validate", path)
    assert code == 1 and "1 tasks, none with a reference solution: nothing was checked" in err
    assert "--column-map solution=COLUMN" in err
    row = {"question_id": "q", "question_content": "Add.", "metadata": "{}"}
    row["public_test_cases"] = [{"input": "1\n", "output": "1\n", "testtype": "stdin"}]
    code, _, err = cli("data", "validate", write("lcb.jsonl", json.dumps(row) + "\n"), "--format", "livecodebench")
    assert code == 1 and "(the rows have none in the columns --format livecodebench reads)" in err
    assert "--column-map" not in err  # a format takes no column map: never suggested with one


def test_validate_warns_once_and_groups_identical_solutions(cli, write):
    same = "def f():\n    return 1"
    rows = [
        {"id": f"t{i}", "prompt": f"task number {i} {'x ' * i}", "solution": same, "tests": ["f()"]} for i in range(40)
    ]
    rows.append({"id": "u", "prompt": "other", "solution": "def g():\n    return 2", "tests": ["assert g() == 2"]})
    code, out, _ = cli("data", "validate", write("t.jsonl", "".join(json.dumps(r) + "\n" for r in rows)))
    lines = out.splitlines()
    assert code == 0, out
    warning = "WARN 40 tasks have a test with no assert or raise, which any program passes: t0, t1, t2, t3, t4,"
    assert lines[0] == warning + " ... (35 more)"
    assert lines[1].startswith("WARN identical reference solutions (40 tasks): t0, t1,") and "(32 more)" in lines[1]
    assert sum("identical" in line for line in lines) == 1 and not any("near-duplicate" in line for line in lines)


def test_validate_runs_stdin_stdout_tasks_and_fails_wrong_solutions(cli, write):
    cases = [{"input": f"{a} {b}\n", "output": f"{a + b}\n"} for a, b in ((1, 2), (5, 5), (-3, 3))]
    right = "a, b = map(int, input().split())\nprint(a + b)"
    rows = [
        {"id": "right", "prompt": "Add two numbers read on stdin.", "solution": right, "tests": cases},
        {"id": "wrong", "prompt": "Add again, read on stdin too.", "solution": "print(3)", "tests": cases},
    ]
    code, out, _ = cli("data", "validate", write("io.jsonl", "".join(json.dumps(r) + "\n" for r in rows)))
    assert code == 1
    assert "FAIL wrong: failed, 1/3 tests passed (3 stdio); test 1: wrong answer: line 1: expected '10', got '3'" in out
    assert out.strip().endswith("2 tasks, 1 passed, 1 failed, 0 without a reference solution")


def test_tiny_model_command(cli, tmp_path):
    code, _out, _ = cli("tiny-model", tmp_path / "tiny", "--seed", "3")
    assert code == 0 and (tmp_path / "tiny" / "model.safetensors").is_file()


@pytest.mark.slow  # trains the tiny model
def test_train_runs_from_the_cli_and_saves_the_resolved_config(cli, tiny_model_dir, write, tmp_path):
    grpo = "{num_generations: 2, per_device_train_batch_size: 2, max_completion_length: 16}"
    recipe = write(
        "r.yaml",
        f"model: {{name_or_path: {tiny_model_dir}}}\noutput_dir: out\ndata: {{max_tasks: 4}}\ngrpo: {grpo}\n"
        "logging: {console: plain, pass_rate_tasks: 2, pass_rate_samples: 2}\n",
    )
    code, _, err = cli("train", "--config", recipe, "--max-steps", "2", "--set", "model.adapter.r=4")
    assert code == 0, err
    saved = yaml.safe_load((tmp_path / "out" / "config.yaml").read_text())
    assert saved["grpo"]["max_steps"] == 2 and saved["model"]["adapter"]["r"] == 4
    assert (tmp_path / "out" / "final" / "adapter_config.json").exists()


def test_config_show_prints_the_resolved_legacy_recipe(cli, write):
    code, out, _ = cli("config", "show", "--config", write("l.yaml", "azr: {model_id: m/x, rlhf: {kl_coeff: 0.01}}\n"))
    assert code == 0 and yaml.safe_load(out)["grpo"] == {"beta": 0.01}


# ---------------------------------------------------------------------------------------------------- azr sandbox
RESULT_KEYS = {"passed", "tests_passed", "tests_total", "status", "stdout", "stderr", "duration_s", "backend"}
INC = "print('hello')\ndef f(x):\n    return x + 1\n"


def _result(out: str) -> dict:
    """The one JSON object `--json` prints: the whole of stdout, one line."""
    assert out.count("\n") == 1, out
    result = json.loads(out)
    assert set(result) == RESULT_KEYS, result
    return result


def _run_tests(cli, program: str, *tests: str) -> tuple[int, dict]:
    argv = [a for test in tests for a in ("--test", test)]
    code, out, _ = cli("sandbox", "run", "--code", program, *argv, "--json", "--timeout", "2")
    return code, _result(out)


def test_sandbox_run_json_when_every_test_passes(cli, write):
    code, result = _run_tests(cli, write("p.py", INC), "assert f(1) == 2", "assert f(2) == 3")
    assert code == 0
    summary = (result["passed"], result["tests_passed"], result["tests_total"], result["status"], result["backend"])
    assert summary == (True, 2, 2, "ok", "bwrap")
    assert result["stdout"].startswith("hello\n") and isinstance(result["duration_s"], float)


def test_sandbox_run_json_when_a_test_fails(cli, write):
    code, result = _run_tests(cli, write("p.py", INC), "assert f(1) == 2", "assert f(2) == 4")
    assert code == 1
    summary = (result["passed"], result["tests_passed"], result["tests_total"], result["status"])
    assert summary == (False, 1, 2, "failed")


def test_sandbox_run_without_tests_reads_the_exit_code(cli, write):
    code, out, _ = cli("sandbox", "run", "--code", write("p.py", "import sys\nsys.exit(3)\n"), "--json")
    result = _result(out)
    assert code == 1 and (result["status"], result["passed"], result["tests_total"]) == ("failed", False, 0)
    code, out, _ = cli("sandbox", "run", "--code", write("q.py", "print(6 * 7)\n"), "--json")
    result = _result(out)
    assert code == 0 and (result["status"], result["passed"], result["stdout"]) == ("ok", True, "42\n")


def test_sandbox_run_reads_the_program_from_stdin(cli, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(INC))
    code, out, _ = cli("sandbox", "run", "--code", "-", "--test", "assert f(41) == 42", "--json")
    assert code == 0 and _result(out)["tests_passed"] == 1


def test_sandbox_run_console_script_reads_stdin():
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from azr.cli import main; main()",
            "sandbox",
            "run",
            "--code",
            "-",
            "--test",
            "assert f(1) == 2",
        ],
        input=INC,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok, 1/1 tests in ") and "(bwrap)" in done.stdout and "hello" in done.stdout


def test_sandbox_run_tests_file_skips_blank_and_comment_lines(cli, write):
    tests = write("tests.txt", "# the tests\n\nassert f(1) == 2\n   \n  # indented comment\nassert f(2) == 3\n")
    code, out, _ = cli(
        "sandbox", "run", "--code", write("p.py", INC), "--tests-file", tests, "--test", "assert f(0) == 1", "--json"
    )
    result = _result(out)
    assert code == 0 and (result["tests_passed"], result["tests_total"]) == (3, 3)


def test_sandbox_run_missing_code_file_is_a_user_error(cli, tmp_path):
    code, out, err = cli("sandbox", "run", "--code", tmp_path / "missing.py", "--json")
    assert code == 2 and not out
    assert err.count("\n") == 1 and err.startswith("azr: error: ") and "--code" in err and "missing.py" in err


def test_sandbox_run_timeout(cli, write):
    code, out, _ = cli("sandbox", "run", "--code", write("p.py", "while True:\n    pass\n"), "--timeout", "1", "--json")
    result = _result(out)
    assert code == 1 and (result["status"], result["passed"]) == ("timeout", False)
    assert result["duration_s"] < 5


def test_sandbox_doctor_passes_on_bwrap(cli):
    code, out, _ = cli("sandbox", "doctor", "--backend", "bwrap")
    lines = out.strip().splitlines()
    assert code == 0, out
    assert lines[0].startswith("backend: bwrap")
    assert lines[1] == "packages offered to programs: none (the standard library alone)"
    assert len(lines) > 10 and all(line.startswith("PASS  ") for line in lines[2:-1]), out
    assert "PASS  nothing else of this environment" in out
    total = len(lines) - 3
    assert lines[-1] == f"{total} of {total} guarantees hold"


def test_sandbox_doctor_fails_on_the_process_backend(cli):
    code, out, _ = cli("sandbox", "doctor", "--backend", "process")
    assert code == 1
    assert "FAIL  no network" in out and "backend: process" in out
    assert "FAIL  caller's processes invisible" in out  # judged from outside, even when the caller is pytest
    assert "guarantees hold" in out.splitlines()[-1]


@pytest.mark.skipif(shutil.which("nsjail") is not None, reason="nsjail is installed here")
@pytest.mark.parametrize("command", [["run", "--code", "CODE"], ["doctor"]])
def test_sandbox_backend_nsjail_when_missing_is_a_user_error(cli, write, command):
    argv = [str(write("p.py", INC)) if a == "CODE" else a for a in command]
    code, _, err = cli("sandbox", *argv, "--backend", "nsjail")
    assert code == 2 and err.count("\n") == 1 and "sandbox.backend=nsjail" in err and "Traceback" not in err


def test_a_vllm_server_failure_is_exit_1_with_the_servers_log_tail(capsys):
    """One error line, then the log's last lines as the server wrote them."""
    import click

    from azr.cli import invoke
    from azr.serving import VllmServerError

    @click.command()
    def run():
        raise VllmServerError("vLLM server (pid 7) exited with code 9 during the run; log /x.log, last lines:\nA\nB")

    assert invoke(run, "azr-train", []) == 1
    assert capsys.readouterr().err == (
        "azr-train: error: vLLM server (pid 7) exited with code 9 during the run; log /x.log, last lines:\nA\nB\n"
    )


# ------------------------------------------------------------------------------- hostile and absurd inputs
def test_config_show_refuses_what_config_check_refuses(cli, write):
    """`--set` into free-form `grpo:` makes data, not a traceback; both commands refuse the unknown key alike."""
    args = ["--config", write("r.yaml", "model: {name_or_path: x}\n"), "--set", "grpo.foo.bar=1"]
    shown, checked = cli("config", "show", *args), cli("config", "check", *args)
    assert shown[0] == checked[0] == 2 and not shown[1]
    assert shown[2] == checked[2] == "azr: error: grpo.foo: not a trl.GRPOConfig field\n"
    code, _, err = cli("config", "show", "--set", "sft.args.nope=1", "--set", "model.name_or_path=x")
    assert code == 2 and err == "azr: error: sft.args.nope: not a trl.SFTConfig field\n"


@pytest.mark.parametrize("command", ["show", "check"])
def test_a_long_value_for_a_trl_field_is_shown_shortened(cli, write, command):
    args = ["--config", write("r.yaml", "model: {name_or_path: x}\n")]
    code, _, err = cli("config", command, *args, "--set", "grpo.num_generations=0x" + "f" * 4000)
    assert code == 2 and err.startswith("azr: error: grpo.num_generations: expected a number, got '0xfff")
    assert err.count("\n") == 1 and len(err) < 200


def test_config_show_of_a_grpo_key_is_one_line_in_a_fresh_interpreter(write):
    """As a user runs it: TRL is first imported here, and what its imports log (bitsandbytes' kernel notice on some
    CPUs) stays off the console, as in `config check`."""
    args = ["--config", str(write("r.yaml", "model: {name_or_path: x}\n")), "--set", "grpo.foo.bar=1"]
    for command in ("show", "check"):
        proc = subprocess.run(
            [sys.executable, "-m", "azr.cli", "config", command, *args], capture_output=True, text=True, timeout=300
        )
        assert (proc.returncode, proc.stdout) == (2, "")
        assert proc.stderr == "azr: error: grpo.foo: not a trl.GRPOConfig field\n"


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-1", "9" * 5000])
def test_sandbox_run_refuses_a_timeout_that_is_no_limit(cli, write, value):
    code, _, err = cli("sandbox", "run", "--code", write("p.py", "print(1)"), "--timeout", value)
    assert code == 2 and "--timeout" in err and "finite number > 0" in err and "Traceback" not in err
    assert len(err) < 200  # the value is shown shortened


def test_sandbox_run_reads_dev_zero_only_up_to_its_limit(cli):
    code, _, err = cli("sandbox", "run", "--code", "/dev/zero")
    assert code == 2 and "larger than the limit of 4,194,304 bytes" in err and "AZR_MAX_INPUT_BYTES" in err


def test_export_of_an_adapter_folder_without_weights_is_a_user_error(cli, tmp_path):
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text('{"peft_type": "LORA", "base_model_name_or_path": "x"}')
    code, _, err = cli("export", "--adapter", adapter, "--out", tmp_path / "out")
    assert code == 2 and "no adapter weights" in err and len(err.strip().splitlines()) == 1


def test_tool_call_takes_a_recipe_that_names_no_model(cli, write):
    recipe = write("tools.yaml", "tools:\n  names: [web_fetch]\n")
    code, out, err = cli("tool", "call", "web_fetch", "--args", '{"url": "http://127.0.0.1:1/"}', "--config", recipe)
    assert "model.name_or_path" not in err
    assert code == 1 and out.startswith("refused") and "port 1 is not allowed" in out


def test_data_validate_escapes_control_characters_in_a_rows_error(cli, write):
    """A row whose exception message holds an escape sequence and a carriage return cannot rewrite its FAIL line."""
    row = {
        "id": "evil\x1b[2K",
        "prompt": "p",
        "solution": "def f():\n    raise ValueError('\\x1b[2K\\rPASS all good')\n",
        "tests": ["f()"],
    }
    code, out, _ = cli("data", "validate", write("evil.jsonl", json.dumps(row) + "\n"), "--timeout", "5")
    assert code == 1
    fail = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert len(fail) == 1 and "\x1b" not in out and "\r" not in out
    assert "evil\\x1b[2K" in fail[0] and "\\x1b[2K\\rPASS all good" in fail[0]


def test_sandbox_run_shows_a_programs_output_with_control_characters_escaped(cli, write):
    code, out, _ = cli("sandbox", "run", "--code", write("p.py", "print('ok\\x1b]0;pwned\\x07\\rFAKE')"))
    assert code == 0 and "\x1b" not in out and "\\x1b]0;pwned\\x07\\rFAKE" in out


NUMPY_TASK = {
    "id": "np-sum",
    "prompt": "Write `total(xs)`: the sum of xs, using numpy.",
    "tests": ["assert total([1, 2, 3]) == 6", "assert total([]) == 0"],
    "solution": "import numpy as np\ndef total(xs):\n    return np.sum(np.array(xs, dtype=np.int64))\n",
}


@pytest.mark.skipif(importlib.util.find_spec("numpy") is None, reason="numpy is not installed here")
def test_a_numpy_task_validates_with_numpy_offered_and_says_why_not_without(cli, tmp_path):
    path = tmp_path / "np.jsonl"
    path.write_text(json.dumps(NUMPY_TASK) + "\n")
    code, out, err = cli("data", "validate", path, "--package", "numpy")
    assert code == 0 and "1 passed, 0 failed" in out, (out, err)
    code, out, err = cli("data", "validate", path)
    assert code == 1 and "FAIL np-sum" in out
    assert "ModuleNotFoundError: numpy is not offered to programs; add it to sandbox.packages" in out


# ------------------------------------------------------------------------------- output files are regular files
def _run_folder(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("output_dir: run\n")
    (run / "metrics.jsonl").write_text('{"phase": "grpo", "step": 1, "time": 1.0, "reward": 0.5}\n')
    return run


@pytest.mark.parametrize("kind", ["fifo", "folder"])
@pytest.mark.parametrize("command", ["report", "gen"])
def test_out_onto_a_fifo_or_a_folder_is_refused_in_one_line(cli, tmp_path, kind, command):
    target = tmp_path / "target"
    os.mkfifo(target) if kind == "fifo" else target.mkdir()
    args = ["report", _run_folder(tmp_path)] if command == "report" else ["gen", "--config", tmp_path / "none.yaml"]
    code, out, err = cli(*args, "--out", target)
    what = "a FIFO" if kind == "fifo" else "a directory"
    assert code == 2 and not out
    (line,) = err.strip().splitlines()
    assert line.startswith("azr: error: Invalid value for '--out': ") and f"{target}' is {what}" in line.replace(
        f"{target} ", f"{target}' "
    )


def test_report_out_dev_null_is_refused_and_the_device_stays(tmp_path):
    """In a private mount namespace whose /dev is a fresh tmpfs holding only a bind of the real null device: were azr
    to rename over it, only that namespace's tmpfs would change, never the host's /dev."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1) for a private mount namespace")
    run = _run_folder(tmp_path)
    stash = tmp_path / "null"
    stash.touch()
    script = (
        f"mount --bind /dev/null {stash} && mount -t tmpfs tmpfs /dev && touch /dev/null && "
        f"mount --bind {stash} /dev/null || exit 99; "
        f"{sys.executable} -m azr.cli report {run} --out /dev/null; code=$?; "
        'test -c /dev/null && echo "still a device"; exit $code'
    )
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=120)
    if proc.returncode == 99:
        pytest.skip(f"no private mount namespace here: {proc.stderr.strip()}")
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout.strip() == "still a device"
    assert proc.stderr.strip().splitlines() == [
        "azr: error: Invalid value for '--out': /dev/null is a character device; azr writes only regular files"
    ]


def test_report_out_dev_stdout_writes_the_file_it_names_and_the_link_stays(tmp_path):
    """`--out /dev/stdout` with stdout redirected to a file: the page lands in that file and /dev/stdout stays a
    link. In a private mount namespace whose /dev is a fresh tmpfs: were azr to rename over the link, only that
    namespace's tmpfs would change, never the host's /dev."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1) for a private mount namespace")
    run = _run_folder(tmp_path)
    page = tmp_path / "page.html"
    script = (
        "mount -t tmpfs tmpfs /dev && ln -s /proc/self/fd/1 /dev/stdout || exit 99; "
        f"{sys.executable} -m azr.cli report {run} --out /dev/stdout > {page}; code=$?; "
        'test -L /dev/stdout && echo "still a link"; exit $code'
    )
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=120)
    if proc.returncode == 99:
        pytest.skip(f"no private mount namespace here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "still a link"
    assert page.read_text().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["tiny-model", "{t}"], "OUT_DIR"),
        (["export", "--adapter", "{tmp}", "--out", "{t}"], "--out"),
        (["eval", "--samples", "{tmp}/s.jsonl", "--dataset", "humaneval", "--output-dir", "{t}"], "--output-dir"),
        (["train", "--config", "{tmp}/r.yaml", "--output-dir", "{t}"], "--output-dir"),
    ],
    ids=lambda a: a[0] if isinstance(a, list) else None,
)
def test_an_output_folder_that_is_a_fifo_or_a_file_is_refused_in_one_line(cli, tmp_path, args, option):
    target = tmp_path / "target"
    os.mkfifo(target)
    code, out, err = cli(*[a.replace("{t}", str(target)).replace("{tmp}", str(tmp_path)) for a in args])
    assert (code, out) == (2, "")
    assert err == f"azr: error: Invalid value for '{option}': {target} exists and is not a folder\n"
    assert stat.S_ISFIFO(os.lstat(target).st_mode)


def test_a_path_that_is_not_utf8_is_printed_escaped_not_a_traceback(tmp_path):
    """A folder named with the byte 0xff reaches Python as a lone surrogate (surrogateescape); stdout escapes it."""
    run = _run_folder(tmp_path)
    odd = os.fsdecode(bytes(tmp_path) + b"/run\xff")
    os.rename(run, odd)
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "LC_ALL": "C.UTF-8"}
    proc = subprocess.run(
        [sys.executable, "-m", "azr.cli", "report", odd], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout.strip() == f"{tmp_path}/run\\udcff/report.html"


def test_validate_reads_a_published_format_and_applies_a_checker_file(cli, write):
    row = {"name": "split", "description": "Print two positive integers summing to n."}
    row |= {"public_tests": {"input": ["5\n"], "output": ["1 4\n"]}}
    row |= {"solutions": {"language": [3], "solution": ["n = int(input())\nprint(n - 1, 1)"]}}
    path = write("cc.jsonl", json.dumps(row) + "\n")
    code, out, _ = cli("data", "validate", path, "--format", "code_contests")
    assert code == 1 and "FAIL split" in out  # the reference prints another right answer
    check = write(
        "check.py", "def check(input, expected, output):\n    return sum(map(int, output.split())) == int(input)\n"
    )
    code, out, _ = cli("data", "validate", path, "--format", "code_contests", "--checker", check)
    assert code == 0, out
    assert out.strip().endswith("1 tasks, 1 passed, 0 failed, 0 without a reference solution")


def test_validate_refuses_an_unknown_format_or_checker_before_the_sandbox_starts(cli, write):
    path = write("t.jsonl", "{}\n")
    code, _, err = cli("data", "validate", path, "--format", "kodkode")
    assert code == 2 and "format 'kodkode': unknown (did you mean 'kodcode'?)" in err
    code, _, err = cli("data", "validate", path, "--checker", write("c.py", "def judge(:\n"))
    assert code == 2 and "c.py:1: checker is not valid Python" in err


def test_eval_format_with_an_unknown_name_says_did_you_mean(cli, write):
    path = write("t.jsonl", json.dumps({"id": "a", "prompt": "p", "tests": ["assert 1"]}) + "\n")
    code, _, err = cli("eval", "--dataset", path, "--format", "humanevl", "--samples", path)
    assert code == 2 and "got 'humanevl' (did you mean 'humaneval'?)" in err
