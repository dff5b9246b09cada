#!/usr/bin/env bash
# Sandbox servers as a Slurm step on CPU nodes, beside a training job on GPU nodes (heterogeneous job, or its own
# allocation): one `azr sandbox serve` per node of the step, then the recipe lines naming them. Run inside an
# allocation, in the background of the job script: `deploy/sandbox/slurm_step.sh OUT.yaml &`; it writes the sandbox:
# section for the trainers' recipe (merge it in) and keeps the step running. The job script makes the token, new for
# the job, and exports it before starting this and the trainers:
#   AZR_SANDBOX_TOKEN="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"; export AZR_SANDBOX_TOKEN
# srun passes it on in the environment; it is never printed. DRY_RUN=1 prints the steps instead.
set -euo pipefail

OUT="${1:?usage: slurm_step.sh OUT.yaml}"
PORT="${AZR_SANDBOX_PORT:-8765}"

run() {
    printf '+ %s\n' "$*"
    if [ -z "${DRY_RUN:-}" ]; then
        "$@"
    fi
}

if [ -n "${SLURM_JOB_NODELIST:-}" ]; then
    mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
elif [ -n "${DRY_RUN:-}" ]; then
    NODES=(cpu0 cpu1)
else
    echo "slurm_step: not inside a Slurm allocation (SLURM_JOB_NODELIST is unset); try DRY_RUN=1" >&2
    exit 2
fi

if [ -z "${AZR_SANDBOX_TOKEN:-}" ]; then
    echo "slurm_step: export AZR_SANDBOX_TOKEN first (the trainers send the same one)" >&2
    exit 2
fi
export AZR_SANDBOX_PORT="$PORT"
{
    echo "sandbox:"
    echo "  provider: remote"
    echo "  remote:"
    echo "    token_env: AZR_SANDBOX_TOKEN"
    echo "    urls:"
    for node in "${NODES[@]}"; do
        echo "      - http://$node:$PORT"
    done
} > "$OUT"
echo "slurm_step: ${#NODES[@]} sandbox servers; their recipe section is in $OUT"
run srun --nodes="${#NODES[@]}" --ntasks-per-node=1 --export=ALL "$(dirname "$0")/serve.sh"
