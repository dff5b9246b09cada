"""`azr train` reports every user error of a recipe before the model loads: exit 2, at most 3 lines on stderr, no
traceback, nothing written, no sandbox started. `azr config check` runs the same checks without training."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def model_dir(tmp_path) -> Path:
    """A folder that passes for a model directory: preflight never loads it."""
    path = tmp_path / "model"
    path.mkdir()
    (path / "config.json").write_text("{}")
    return path


@pytest.fixture
def nothing_slow(monkeypatch):
    """Fail the test if `azr train` gets as far as the sandbox, the tokenizer or the model."""
    import azr.models
    import azr.training.context

    def reached(what):
        def fail(*args, **kwargs):
            pytest.fail(f"a user error got past the checks: {what} was reached")

        return fail

    monkeypatch.setattr(azr.training.context, "run_rewards", reached("the sandbox"))
    monkeypatch.setattr(azr.models, "load_tokenizer", reached("the tokenizer"))
    monkeypatch.setattr(azr.models, "build_model_and_tokenizer", reached("the model"))


def _recipe(tmp_path: Path, model: Path | str, **sections) -> Path:
    recipe = {
        "output_dir": str(tmp_path / "run"),
        "model": {"name_or_path": str(model)},
        "grpo": {"num_generations": 2, "per_device_train_batch_size": 4, "max_steps": 1},
    }
    for name, values in sections.items():
        recipe[name] = {**recipe.get(name, {}), **values} if isinstance(values, dict) else values
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


ENDPOINTS = [f"{e}.{k}" for e in ("self_play", "teacher") for k in ("enabled=true", "model=m")]
ENDPOINTS += [f"{e}.base_url=http://127.0.0.1:9/v1" for e in ("self_play", "teacher")]
# (--set overrides, or a recipe change; the one line the error must start with). {tmp} is the test's folder.
CASES = [
    (["grpo.num_generations=1"], "grpo.num_generations: GRPO needs at least 2 generations per prompt, got 1"),
    (["grpo.per_device_train_batch_size=3"], "grpo.num_generations, grpo.per_device_train_batch_size: a generation"),
    (["grpo.lr_scheduler_type=cosinus"], "grpo.lr_scheduler_type: cosinus is not a valid SchedulerType"),
    (["grpo.learning_rat=1e-5"], "grpo.learning_rat: not a trl.GRPOConfig field (did you mean 'learning_rate'?)"),
    (["grpo.report_to=tensorbaord"], "grpo.report_to: unknown target 'tensorbaord'"),
    (["sft.enabled=true", "sft.args.packing=maybe"], "sft.args.packing: expected a boolean, got 'maybe'"),
    (
        ["sft.enabled=true", "sft.args.lr_scheduler_type=x"],
        "sft.args.lr_scheduler_type: x is not a valid",
    ),
    (["rewards.1.name=formatt"], "rewards[1].name: unknown reward 'formatt'"),
    (["rewards=[{name: tests, params: {partial: true}}]"], "rewards[0].params: 'tests' accepts ['partial_credit']"),
    (["self_play.enabled=true", "self_play.model=m"], "self_play.base_url: required when self_play.enabled is true"),
    (["teacher_assist.enabled=true"], "teacher_assist.enabled: needs teacher.enabled: true"),
    ([*ENDPOINTS, "teacher_assist.enabled=true"], "teacher_assist.hint_share: 0.25 of the 2 prompt group(s)"),
    ([*ENDPOINTS, "curriculum.replay=true", "curriculum.replay_rate=0.4"], "curriculum.replay_rate: 0.4 of the 2"),
    (["model.quantization=4bit", "model.adapter.kind=none"], "model.quantization=4bit: a quantized base model"),
    (["model.backend=unsloth"], "model.backend=unsloth: unsloth needs a CUDA GPU and none is visible"),
    (["data.train={tmp}/missing.jsonl"], "{tmp}/missing.jsonl: task file not found"),
    (["data.eval={tmp}/held.csv"], "{tmp}/held.csv: task file not found"),
    (["output_dir={tmp}/recipe.yaml/run"], "output_dir: cannot create {tmp}/recipe.yaml/run: Not a directory"),
    (["output_dir={tmp}"], "output_dir: {tmp} holds files and is not an azr run (no .azr-run); choose a new or empty"),
    (["output_dir=/"], "output_dir: / is the file system's root; choose a new folder for the run"),
    (["output_dir=/proc/x/run"], "output_dir: /proc/x/run is on a kernel file system (/proc/x/run)"),
    (["output_dir=/sys"], "output_dir: /sys is on a kernel file system"),
    (["output_dir=/dev/azr-run"], "output_dir: /dev/azr-run is on a kernel file system"),
    (["output_dir=/dev/null"], "output_dir: /dev/null is on a kernel file system"),
    (["model.name_or_path={tmp}/nowhere"], "model.name_or_path: no such directory: {tmp}/nowhere"),
    (
        ["model.name_or_path={tmp}/runs/tiny-model"],
        "model.name_or_path: no such directory: {tmp}/runs/tiny-model; build the demo's model with "
        "`azr tiny-model {tmp}/runs/tiny-model`",
    ),
    (["model.name_or_path={tmp}"], "model.name_or_path: {tmp} holds no model (no config.json or adapter_config.json)"),
    (["model.name_or_path=org/model"], "model.name_or_path: 'org/model' is not in the local hub cache and the hub"),
    (["model.name_or_path=a b/c"], "model.name_or_path: 'a b/c' is neither a local directory nor a hub id"),
]


@pytest.mark.parametrize(("overrides", "message"), CASES, ids=[" ".join(o)[:60] for o, _ in CASES])
def test_every_user_error_is_reported_before_the_model_loads(
    cli, tmp_path, model_dir, nothing_slow, overrides, message
):
    recipe = _recipe(tmp_path, model_dir)
    sets = [arg for o in overrides for arg in ("--set", o.replace("{tmp}", str(tmp_path)))]
    code, _, err = cli("train", "--config", recipe, *sets)
    assert code == 2, err
    assert err.startswith("azr: error: " + message.replace("{tmp}", str(tmp_path))), err
    assert err.count("\n") <= 3 and "Traceback" not in err
    assert not (tmp_path / "run").exists()  # nothing written


def test_no_tasks_left_is_reported_before_the_model_loads(cli, tmp_path, tiny_model_dir, monkeypatch):
    """The one check that needs the tokenizer: it runs before the model is loaded."""
    import azr.models

    monkeypatch.setattr(azr.models, "build_model_and_tokenizer", lambda *a, **k: pytest.fail("the model loaded"))
    recipe = _recipe(tmp_path, tiny_model_dir, data={"max_solution_tokens": 1}, sandbox={"workers": 1})
    code, _, err = cli("train", "--config", recipe)
    assert code == 2
    assert err == "azr: error: data: no training tasks left after data.max_solution_tokens / data.max_tasks\n"


def test_the_demo_recipe_with_one_generation_fails_at_once_in_one_line(tmp_path):
    """The reported case, as a user runs it: the console script, a fresh interpreter, the shipped demo recipe. One
    line on stderr and nothing else: no traceback, no library notices, nothing written."""
    shutil.copy(REPO / "examples" / "tiny.yaml", tmp_path / "tiny.yaml")
    argv = [
        sys.executable,
        "-c",
        "from azr.cli import train_main; train_main()",
        "--config",
        str(tmp_path / "tiny.yaml"),
    ]
    done = subprocess.run([*argv, "--set", "grpo.num_generations=1"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert (
        done.stderr == "azr-train: error: grpo.num_generations: GRPO needs at least 2 generations per prompt, got 1\n"
    )
    assert done.stdout == "" and not (tmp_path.parent / "runs" / "tiny").exists()


def test_the_demo_recipe_without_its_model_says_how_to_build_it(cli, tmp_path, nothing_slow):
    shutil.copy(REPO / "examples" / "tiny.yaml", tmp_path / "tiny.yaml")
    code, _, err = cli("train", "--config", tmp_path / "tiny.yaml")
    model = tmp_path.parent / "runs" / "tiny-model"  # the recipe's ../runs/tiny-model
    assert code == 2
    assert err == (
        f"azr: error: model.name_or_path: no such directory: {model}; build the demo's model with "
        f"`azr tiny-model {model}`\n"
    )


def test_config_check_runs_the_checks_without_training(cli, tmp_path, model_dir, nothing_slow):
    recipe = _recipe(tmp_path, model_dir, sft={"enabled": True, "args": {"num_train_epochs": 3}})
    code, out, err = cli("config", "check", "--config", recipe)
    assert code == 0, err
    assert out.startswith(f"ok: {model_dir}; GRPO 2 completions per prompt, generation batch 4")
    assert "SFT warm start 3 epochs" in out
    assert not (tmp_path / "run").exists()
    code, _, err = cli("config", "check", "--config", recipe, "--set", "grpo.num_generations=1")
    assert code == 2 and err.startswith("azr: error: grpo.num_generations: GRPO needs at least 2")
    # One weigher: the rubric's rewards[i].weight; TRL's own field would weigh training apart from every report.
    code, out, err = cli("config", "check", "--config", recipe, "--set", "grpo.reward_weights=[2.0,0.1]")
    assert (code, out) == (2, "") and err == (
        "azr: error: grpo.reward_weights: azr sets it from 'rewards[i].weight'; set that instead\n"
    )
    code, out, _ = cli(
        "config", "check", "--config", recipe, "--set", "rewards.0.weight=2", "--set", "rewards.1.weight=0.5"
    )
    assert code == 0 and out.rstrip().endswith("rewards 2, 0.5; SFT warm start 3 epochs")


@pytest.mark.parametrize("where", ["in the recipe", "as --set"])
def test_a_dot_output_dir_in_a_projects_folder_is_refused(cli, tmp_path, model_dir, nothing_slow, monkeypatch, where):
    """The seed's project with `output_dir: "."`: its own config.yaml, summary.json and final/ would be overwritten."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "config.yaml").write_text("mine: true\n")
    monkeypatch.chdir(project)
    recipe = _recipe(project, model_dir, **({"output_dir": "."} if where == "in the recipe" else {}))
    sets = ["--set", "output_dir=."] if where == "as --set" else []
    for command in ("config", "train"):
        args = ["config", "check"] if command == "config" else ["train"]
        code, _, err = cli(*args, "--config", recipe, *sets)
        assert code == 2 and err.count("\n") == 1, err
        assert err == (
            f"azr: error: output_dir: {project} holds files and is not an azr run (no .azr-run); choose a new or "
            "empty folder\n"
        )
    assert sorted(p.name for p in project.iterdir()) == ["config.yaml", "recipe.yaml"]  # nothing written


def test_an_empty_folder_or_an_azr_run_passes_the_output_dir_check(cli, tmp_path, model_dir, nothing_slow):
    (tmp_path / "empty").mkdir()
    (tmp_path / "earlier").mkdir()
    (tmp_path / "earlier" / ".azr-run").write_text("azr\n")
    (tmp_path / "earlier" / "summary.json").write_text("{}")
    for out in ("empty", "earlier", "new/sub"):
        code, _, err = cli(
            "config", "check", "--config", _recipe(tmp_path, model_dir), "--set", f"output_dir={tmp_path / out}"
        )
        assert code == 0, err


def test_a_folder_that_fills_after_the_checks_is_refused_before_the_marker(
    cli, tmp_path, model_dir, nothing_slow, monkeypatch
):
    """`train` checks output_dir again as it opens the run: another program's files that arrive between the recipe
    check and the start are never taken over (no .azr-run written beside them)."""
    import azr.training.run

    checked = azr.training.run.preflight

    def check_then_fill(cfg):
        args = checked(cfg)
        Path(cfg.output_dir).mkdir(parents=True)
        (Path(cfg.output_dir) / "theirs.txt").write_text("not a run\n")
        return args

    monkeypatch.setattr(azr.training.run, "preflight", check_then_fill)
    code, _, err = cli("train", "--config", _recipe(tmp_path, model_dir))
    out = tmp_path / "run"
    assert code == 2 and err == (
        f"azr: error: output_dir: {out} holds files and is not an azr run (no .azr-run); choose a new or empty folder\n"
    )
    assert [p.name for p in out.iterdir()] == ["theirs.txt"]


def test_config_check_takes_task_ids_prompts_and_tags_with_lone_surrogate_escapes(cli, tmp_path, model_dir):
    import json

    rows = [
        {"id": f"t{chr(0xD800)}{i}", "prompt": f"p{chr(0xDC00)}", "solution": "def f():\n    return 1\n",
         "tests": ["assert f() == 1"], "tags": [f"x{chr(0xDBFF)}"]}
        for i in range(4)
    ]  # fmt: skip
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    recipe = _recipe(
        tmp_path, model_dir, data={"train": str(tmp_path / "tasks.jsonl"), "eval": str(tmp_path / "tasks.jsonl")}
    )
    code, out, err = cli("config", "check", "--config", recipe)
    assert code == 0 and out.startswith("ok: "), err


def test_a_run_folder_on_dev_shm_a_tmpfs_passes(cli, tmp_path, model_dir, nothing_slow):
    from azr.config.recipe import filesystem_type

    if filesystem_type(Path("/dev/shm")) != "tmpfs" or not os.access("/dev/shm", os.W_OK):
        pytest.skip("no writable tmpfs at /dev/shm here")
    out = f"/dev/shm/azr-test-{os.getpid()}/run"
    code, _, err = cli("config", "check", "--config", _recipe(tmp_path, model_dir), "--set", f"output_dir={out}")
    assert code == 0, err
    assert not Path(out).parent.exists()  # config check writes nothing
