"""deploy/: the accelerate recipes loaded by accelerate itself, the shell scripts through shellcheck, the bootstrap
in --dry-run, the Slurm script rendered for two training nodes and dry-run on a fake allocation, and the container
recipe's run flags against what `azr sandbox doctor` says a container must allow."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from azr.sandbox.doctor import CONTAINER_HINT

REPO = Path(__file__).resolve().parent.parent
DEPLOY = REPO / "deploy"
ACCELERATE = {
    "single_gpu.yaml": ("NO", {}),
    "multi_gpu.yaml": ("MULTI_GPU", {}),
    "zero2.yaml": ("DEEPSPEED", {"ACCELERATE_DEEPSPEED_ZERO_STAGE": "2"}),
    "zero3.yaml": ("DEEPSPEED", {"ACCELERATE_DEEPSPEED_ZERO_STAGE": "3"}),
    "fsdp2.yaml": ("FSDP", {"FSDP_VERSION": "2", "FSDP_AUTO_WRAP_POLICY": "TRANSFORMER_BASED_WRAP"}),
}
SHARDED = {"zero3.yaml": "zero3", "fsdp2.yaml": "fsdp"}


def test_every_accelerate_recipe_is_tested():
    assert sorted(p.name for p in (DEPLOY / "accelerate").glob("*.yaml")) == sorted(ACCELERATE)


@pytest.mark.parametrize("name", sorted(ACCELERATE))
def test_accelerate_loads_each_recipe_and_launches_it_as_described(name, monkeypatch):
    """accelerate's own loader reads the file; every nested key is one `accelerate launch` knows (a typo would be
    dropped silently); the launch environment it builds is the intended one, and azr's reading of that environment
    (whether the weights are sharded, which sets the QLoRA storage dtype) agrees."""
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import launch

    from azr.models import sharded_launch

    path = DEPLOY / "accelerate" / name
    kind, expected = ACCELERATE[name]
    config = load_config_from_file(str(path))
    assert config.distributed_type == kind and config.mixed_precision == "bf16"
    args = launch_command_parser().parse_args(["--config_file", str(path), "-m", "azr.cli", "train"])
    known = set(vars(args))
    nested = [*(config.deepspeed_config or {}), *(config.fsdp_config or {})]
    assert [k for k in nested if k not in known] == []
    args, defaults, _ = _validate_launch_command(args)
    if kind == "DEEPSPEED":
        args.deepspeed_fields_from_accelerate_config = list(defaults.deepspeed_config)
        with monkeypatch.context() as m:  # DeepSpeed itself is a GPU-box install; its launch env needs only its name
            m.setattr(launch, "is_deepspeed_available", lambda: True, raising=False)
            _, env = launch.prepare_deepspeed_cmd_env(args)
    elif kind in ("MULTI_GPU", "FSDP"):
        env = launch.prepare_multi_gpu_env(args)
    else:
        _, env = launch.prepare_simple_launcher_cmd_env(args)
    assert {k: env.get(k) for k in expected} == expected
    assert env["ACCELERATE_MIXED_PRECISION"] == "bf16"
    for key in [k for k in os.environ if k.startswith(("ACCELERATE_", "FSDP_"))]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        if key.startswith(("ACCELERATE_", "FSDP_")):
            monkeypatch.setenv(key, value)
    assert sharded_launch() == SHARDED.get(name)


def test_qlora_stores_4bit_weights_in_the_compute_dtype_only_when_the_run_is_sharded(monkeypatch):
    import torch

    from azr.models.loading import _bnb_config

    for key in [k for k in os.environ if k.startswith("ACCELERATE_")]:
        monkeypatch.delenv(key)
    assert _bnb_config("4bit", torch.bfloat16).bnb_4bit_quant_storage == torch.uint8  # bitsandbytes' own default
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    assert _bnb_config("4bit", torch.bfloat16).bnb_4bit_quant_storage == torch.bfloat16
    monkeypatch.delenv("ACCELERATE_USE_FSDP")
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "2")  # ZeRO-2: every rank holds the whole model
    assert _bnb_config("4bit", torch.bfloat16).bnb_4bit_quant_storage == torch.uint8
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3")
    assert _bnb_config("4bit", torch.float16).bnb_4bit_quant_storage == torch.float16


# ---------------------------------------------------------------------------------------------- shell scripts
def _shellcheck(*paths: Path) -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:  # `make test` installs it (apt-get install shellcheck); only a hand-run pytest lacks it
        pytest.skip("shellcheck is not installed: apt-get install shellcheck (make test does this)")
    done = subprocess.run([shellcheck, "--severity=style", *map(str, paths)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_deploy_scripts_pass_shellcheck():
    scripts = sorted(DEPLOY.rglob("*.sh"))
    assert {p.relative_to(DEPLOY).as_posix() for p in scripts} >= {"bootstrap.sh", "slurm/render.sh", "slurm/job.sh"}
    _shellcheck(*scripts)


def _bootstrap(*args: str, path: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": path or os.environ["PATH"]}
    return subprocess.run(
        [shutil.which("bash"), str(DEPLOY / "bootstrap.sh"), *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_bootstrap_dry_run_prints_each_step_in_order_and_changes_nothing(tmp_path):
    venv, vllm = tmp_path / "venv", tmp_path / "vllm"
    done = _bootstrap("--dry-run", "--venv", str(venv), "--vllm-venv", str(vllm))
    assert done.returncode == 0, done.stderr
    steps = [line for line in done.stdout.splitlines() if line.startswith("+ ")]
    expected = [
        f"+ python3 -m venv {venv}",
        "--upgrade pip",
        f"-r {REPO}/requirements.txt",
        f"-c {REPO}/constraints.txt -e {REPO}[gpu,eval] vllm==",
        f"+ stamp {venv}/.azr-bootstrap",
        "torch.cuda.is_available()",
        f"+ python3 -m venv {vllm}",
        f"+ {vllm}/bin/python -m pip install --disable-pip-version-check vllm==",
        f"+ stamp {vllm}/.azr-bootstrap",
        "import vllm",
        f"+ {venv}/bin/azr sandbox doctor",
    ]
    assert len(steps) == len(expected), done.stdout
    for line, part in zip(steps, expected, strict=True):
        assert part in line, (part, line)
    assert f"vllm.python: {vllm}/bin/python" in done.stdout
    assert list(tmp_path.iterdir()) == []  # nothing created


def test_bootstrap_skips_a_venv_built_from_the_same_files(tmp_path):
    """Idempotent: a venv whose stamp matches what would build it is left alone; without --vllm-venv, vLLM comes
    from the trainer's venv."""
    venv = tmp_path / "venv"
    dry = _bootstrap("--dry-run", "--venv", str(venv), "--skip-doctor")
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(shutil.which("python3"))
    stamp = _stamp(venv)
    (venv / ".azr-bootstrap").write_text(stamp + "\n")
    again = _bootstrap("--dry-run", "--venv", str(venv), "--skip-doctor")
    assert again.returncode == 0, again.stderr
    assert f"trainer venv {venv} is up to date" in again.stdout
    assert "pip install" not in again.stdout and "pip install" in dry.stdout
    assert "vLLM from the trainer venv (recipe: vllm.python: null)" in again.stdout
    assert "sandbox doctor" not in again.stdout
    (venv / ".azr-bootstrap").write_text("built from something else\n")
    assert "pip install" in _bootstrap("--dry-run", "--venv", str(venv)).stdout


def _stamp(venv: Path) -> str:
    """The stamp bootstrap.sh would write, computed by its own function."""
    script = f'source <(sed -n "/^fingerprint()/,/^}}/p" {DEPLOY / "bootstrap.sh"}); REPO={REPO}; '
    script += f"VLLM_VERSION=$(sed -n 's/^VLLM_VERSION=\\([^ ]*\\).*/\\1/p' {DEPLOY / 'bootstrap.sh'}); "
    script += "PYTHON=python3; fingerprint"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.strip()


def test_bootstrap_refuses_unknown_flags_and_a_box_without_a_driver(tmp_path):
    bad = _bootstrap("--venv", str(tmp_path / "v"), "--frobnicate")
    assert bad.returncode == 2 and "unknown argument: --frobnicate" in bad.stderr
    bare = tmp_path / "bin"  # a PATH with python3 and the basic tools, but no nvidia-smi
    bare.mkdir()
    (bare / "python3").symlink_to(Path(sys.executable).resolve())  # the interpreter itself, not a shim script
    for tool in ("uname", "sha256sum", "cat", "cut", "sed", "dirname"):
        (bare / tool).symlink_to(shutil.which(tool))
    real = _bootstrap("--venv", str(tmp_path / "v"), path=str(bare))
    assert real.returncode == 1 and "no NVIDIA driver" in real.stderr
    assert not (tmp_path / "v").exists()


# ---------------------------------------------------------------------------------------------- Slurm
def _render(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("output_dir: runs/x\n")
    argv = ["bash", str(DEPLOY / "slurm" / "render.sh"), "--config", str(recipe), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def test_the_slurm_script_for_two_training_nodes_and_one_vllm_node(tmp_path):
    done = _render(tmp_path, "--train-nodes", "2", "--model", "Qwen/Qwen2.5-Coder-7B-Instruct", "--time", "4:00:00")
    assert done.returncode == 0, done.stderr
    script = tmp_path / "job.sbatch"
    script.write_text(done.stdout)
    headers = re.findall(r"^#SBATCH (.*)$", done.stdout, re.M)
    assert {"--nodes=3", "--gpus-per-node=8", "--ntasks-per-node=1", "--time=4:00:00"} <= set(headers)
    _shellcheck(script)

    # Run it as sbatch would on nodes gpu-a01..a03, each step printed instead of started.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text("#!/bin/sh\nprintf 'gpu-a01\\ngpu-a02\\ngpu-a03\\n'\n")
    (bin_dir / "scontrol").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "DRY_RUN": "1"}
    env |= {"SLURM_JOB_NODELIST": "gpu-a[01-03]", "SLURM_JOB_ID": "42"}
    ran = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=30)
    assert ran.returncode == 0, ran.stderr
    server, trainers = [line for line in ran.stdout.splitlines() if line.startswith("+ srun")]
    # Node 0 serves the model on all its GPUs, with the weight-transfer engine TRL's server mode syncs through.
    assert "--nodes=1 --ntasks=1 --nodelist=gpu-a01 --gpus-per-node=8" in server
    assert "VLLM_HOST_IP=gpu-a01" in server and "VLLM_SERVER_DEV_MODE=1" in server
    assert "vllm serve Qwen/Qwen2.5-Coder-7B-Instruct --host gpu-a01 --port 8000" in server  # not 0.0.0.0
    assert '--data-parallel-size 8 --weight-transfer-config {"backend": "nccl"}' in server
    # Nodes 1 and 2 train: one launcher each, 16 ranks, rank 0 on gpu-a02, each node's own VLLM_HOST_IP.
    assert "--nodes=2 --ntasks-per-node=1 --relative=1 --gpus-per-node=8 --kill-on-bad-exit=1" in trainers
    assert 'export VLLM_HOST_IP="$(hostname -I' in trainers and '--machine_rank "$SLURM_PROCID"' in trainers
    launch = trainers[trainers.index("/accelerate ") :]
    assert "--num_machines 2 --num_processes 16 --main_process_ip gpu-a02 --main_process_port 29500" in launch
    assert f"--config_file {DEPLOY}/accelerate/multi_gpu.yaml" in launch
    assert f"-m azr.cli train --config {tmp_path}/recipe.yaml" in launch
    for setting in ("use_vllm=true", "vllm_mode=server", "vllm_server_host=gpu-a01", "vllm_group_port=51216"):
        assert f"--set grpo.{setting}" in launch

    (bin_dir / "scontrol").write_text("#!/bin/sh\nprintf 'gpu-a01\\n'\n")
    wrong = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=30)
    assert wrong.returncode == 2 and "expected 3 nodes, the allocation has 1" in wrong.stderr


def test_the_slurm_dry_run_works_outside_slurm_and_the_server_key_is_made_per_job_and_never_printed(tmp_path):
    """`DRY_RUN=1 bash job.sbatch` as the README says, on a machine without Slurm; the server's key is generated
    per job into the job's environment (which srun passes on), never on a command line, so never in the log."""
    done = _render(tmp_path, "--train-nodes", "1", "--model", "m")
    script = tmp_path / "job.sbatch"
    script.write_text(done.stdout)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    probe = script.read_text() + '\nprintf "key:%s\\n" "${#VLLM_API_KEY}" >&2\nenv | grep -c "^VLLM_API_KEY=" >&2\n'
    (tmp_path / "probe.sbatch").write_text(probe)
    for _ in range(2):
        ran = subprocess.run(["bash", str(tmp_path / "probe.sbatch")], capture_output=True, text=True,
                             env={**env, "DRY_RUN": "1"}, timeout=30)  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        assert "key:64" in ran.stderr and ran.stderr.strip().endswith("1")  # 32 random bytes, exported
        assert "--host 0.0.0.0" not in ran.stdout and "api-key" not in ran.stdout and "node0" in ran.stdout
    outside = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=30)
    assert outside.returncode == 2 and "not inside a Slurm allocation" in outside.stderr


def test_the_slurm_renderer_refuses_bad_settings_in_one_line(tmp_path):
    for args, message in [
        (["--train-nodes", "0", "--model", "m"], "--train-nodes: expected a whole number >= 1, got '0'"),
        (["--train-nodes", "2"], "--model: the model vLLM serves is required"),
        (["--train-nodes", "2", "--model", "m", "--tensor-parallel", "3"], "does not divide 8 GPUs"),
        (["--train-nodes", "2", "--model", "m", "--bogus"], "unknown argument: --bogus"),
    ]:
        done = _render(tmp_path, *args)
        assert done.returncode == 2 and message in done.stderr and done.stdout == "", (args, done.stderr)


# ---------------------------------------------------------------------------------------------- container
def test_the_container_recipe_builds_with_bootstrap_and_runs_with_what_the_doctor_asks_for():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert 'deploy/bootstrap.sh --venv "$AZR_HOME/.venv" --no-gpu --skip-doctor' in dockerfile
    assert re.search(r"^USER azr$", dockerfile, re.M)  # bwrap needs no privileges of its own
    flags = set(re.findall(r"--security-opt ([\w=]+)", dockerfile))
    assert flags == {"seccomp=unconfined", "systempaths=unconfined", "apparmor=unconfined", "unmask=ALL"}
    for flag in flags:
        assert flag in CONTAINER_HINT
    assert "--privileged" not in dockerfile and "--cap-add" not in dockerfile


# ---------------------------------------------------------------------------------------------- memory table
def test_the_memory_scripts_stored_peaks_are_labelled_stored_with_their_date_and_versions():
    """Without --measure nothing is measured: the H100 peaks it prints come from a table, and say so."""
    script = REPO / "benchmarks" / "recipe_memory.py"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "measured" not in done.stdout.replace("measured earlier", "")
    assert re.search(r"stored \d", done.stdout)
    assert re.search(r"measured earlier .* on one H100 80GB, \d{4}-\d\d-\d\d, torch \d", done.stdout)


def test_the_memory_table_in_deploy_readme_is_what_the_script_computes():
    """deploy/README.md's table of GPU memory per recipe comes from benchmarks/recipe_memory.py, and its arithmetic
    stays within 10% of what was measured on an H100 (both recipes, generation and training peaks)."""
    script = REPO / "benchmarks" / "recipe_memory.py"
    done = subprocess.run([sys.executable, str(script), "--markdown"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    readme = (DEPLOY / "README.md").read_text()
    table = readme.split("<!-- memory-table:start -->\n")[1].split("<!-- memory-table:end -->")[0]
    assert table.strip() == done.stdout.strip()

    import importlib.util

    spec = importlib.util.spec_from_file_location("recipe_memory", script)
    memory = importlib.util.module_from_spec(spec)
    sys.modules["recipe_memory"] = memory
    spec.loader.exec_module(memory)
    for name, measured in memory.MEASURED.items():
        terms = memory.estimate(REPO / "examples" / name, [])
        resident = terms["weights"] + terms["trainable state"]
        for phase in ("generation", "training"):
            assert resident + terms[phase] == pytest.approx(measured[phase], rel=0.1), (name, phase)


# ------------------------------------------------------------------------------------------- sandbox servers
SANDBOX = DEPLOY / "sandbox"


def test_the_sandbox_slurm_step_writes_a_recipe_section_azr_accepts(tmp_path):
    from azr.config import load_config

    out = tmp_path / "section.yaml"
    env = {**os.environ, "DRY_RUN": "1", "AZR_SANDBOX_TOKEN": "secret-" + os.urandom(4).hex()}
    done = subprocess.run(
        ["bash", str(SANDBOX / "slurm_step.sh"), str(out)], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert env["AZR_SANDBOX_TOKEN"] not in done.stdout + done.stderr + out.read_text()
    assert "srun --nodes=2" in done.stdout
    sandbox = load_config(out, needs_model=False).sandbox
    assert sandbox.provider == "remote" and sandbox.remote.token_env == "AZR_SANDBOX_TOKEN"
    assert sandbox.remote.urls == ["http://cpu0:8765", "http://cpu1:8765"]
    env.pop("AZR_SANDBOX_TOKEN")
    refused = subprocess.run(
        ["bash", str(SANDBOX / "slurm_step.sh"), str(out)], capture_output=True, text=True, env=env, timeout=60
    )
    assert refused.returncode == 2 and "AZR_SANDBOX_TOKEN" in refused.stderr


def test_the_sandbox_entry_and_unit_serve_only_with_a_token_from_the_environment():
    env = {k: v for k, v in os.environ.items() if k != "AZR_SANDBOX_TOKEN"}
    done = subprocess.run(["bash", str(SANDBOX / "serve.sh")], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    unit = (SANDBOX / "azr-sandbox.service").read_text()
    start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    assert "azr sandbox serve" in start and "--token-env AZR_SANDBOX_TOKEN" in start
    assert "EnvironmentFile=" in unit
