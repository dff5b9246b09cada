#!/usr/bin/env bash
# Render a Slurm batch script for N training nodes plus one vLLM server node (TRL's server mode):
#
#   deploy/slurm/render.sh --train-nodes N --config RECIPE --model MODEL [options] > azr-train.sbatch
#   sbatch azr-train.sbatch            # DRY_RUN=1 bash azr-train.sbatch prints each step instead
#
# Options: --gpus-per-node G (8), --accelerate-config FILE (deploy/accelerate/multi_gpu.yaml), --venv DIR (.venv
# here; the same path on every node), --tensor-parallel T (1: vLLM runs G/T data-parallel copies of the model),
# --vllm-port P (8000), --group-port P (51216), --main-port P (29500), --partition NAME, --time HH:MM:SS,
# --account NAME, --job-name NAME (azr-train). Extra arguments after -- go to `azr train` as they are.
# The body (deploy/slurm/job.sh) says what runs where and which ports must be open between the nodes.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
TRAIN_NODES="" CONFIG="" MODEL=""
GPUS_PER_NODE=8 TENSOR_PARALLEL=1 VLLM_PORT=8000 GROUP_PORT=51216 MAIN_PORT=29500
ACCELERATE_CONFIG="$REPO/deploy/accelerate/multi_gpu.yaml"
VENV="$REPO/.venv"
PARTITION="" TIME="" ACCOUNT="" JOB_NAME=azr-train
EXTRA=()

die() {
    printf 'render: %s\n' "$*" >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case "$1" in
        --train-nodes) TRAIN_NODES="${2:-}"; shift ;;
        --gpus-per-node) GPUS_PER_NODE="${2:-}"; shift ;;
        --config) CONFIG="${2:-}"; shift ;;
        --model) MODEL="${2:-}"; shift ;;
        --accelerate-config) ACCELERATE_CONFIG="${2:-}"; shift ;;
        --venv) VENV="${2:-}"; shift ;;
        --tensor-parallel) TENSOR_PARALLEL="${2:-}"; shift ;;
        --vllm-port) VLLM_PORT="${2:-}"; shift ;;
        --group-port) GROUP_PORT="${2:-}"; shift ;;
        --main-port) MAIN_PORT="${2:-}"; shift ;;
        --partition) PARTITION="${2:-}"; shift ;;
        --time) TIME="${2:-}"; shift ;;
        --account) ACCOUNT="${2:-}"; shift ;;
        --job-name) JOB_NAME="${2:-}"; shift ;;
        --) shift; EXTRA=("$@"); break ;;
        -h | --help) sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
    shift
done

number() {  # name, value: a whole number of at least 1
    [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1: expected a whole number >= 1, got '$2'"
}
number --train-nodes "$TRAIN_NODES"
number --gpus-per-node "$GPUS_PER_NODE"
number --tensor-parallel "$TENSOR_PARALLEL"
for port in "$VLLM_PORT" "$GROUP_PORT" "$MAIN_PORT"; do
    number "port" "$port"
done
[ -n "$CONFIG" ] || die "--config: the recipe to train is required"
[ -n "$MODEL" ] || die "--model: the model vLLM serves is required (the recipe's model.name_or_path)"
[ -f "$CONFIG" ] || die "--config: no such file: $CONFIG"
[ -f "$ACCELERATE_CONFIG" ] || die "--accelerate-config: no such file: $ACCELERATE_CONFIG"
CONFIG="$(realpath "$CONFIG")"  # the job runs wherever sbatch was called from
[ -n "$VENV" ] || die "--venv: a directory is required"
ACCELERATE_CONFIG="$(realpath "$ACCELERATE_CONFIG")"
((GPUS_PER_NODE % TENSOR_PARALLEL == 0)) || die "--tensor-parallel $TENSOR_PARALLEL does not divide $GPUS_PER_NODE GPUs"

printf '#!/usr/bin/env bash\n'
printf '#SBATCH --job-name=%s\n' "$JOB_NAME"
printf '#SBATCH --nodes=%d\n' $((TRAIN_NODES + 1))
printf '#SBATCH --ntasks-per-node=1\n'
printf '#SBATCH --gpus-per-node=%d\n' "$GPUS_PER_NODE"
printf '#SBATCH --exclusive\n'
[ -z "$PARTITION" ] || printf '#SBATCH --partition=%s\n' "$PARTITION"
[ -z "$TIME" ] || printf '#SBATCH --time=%s\n' "$TIME"
[ -z "$ACCOUNT" ] || printf '#SBATCH --account=%s\n' "$ACCOUNT"
printf '# Rendered by deploy/slurm/render.sh: %d training nodes + 1 vLLM server node, %d GPUs each.\n' \
    "$TRAIN_NODES" "$GPUS_PER_NODE"
for name in TRAIN_NODES GPUS_PER_NODE TENSOR_PARALLEL VLLM_PORT GROUP_PORT MAIN_PORT CONFIG MODEL \
    ACCELERATE_CONFIG VENV; do
    printf '%s=%q\n' "$name" "${!name}"
done
printf 'EXTRA=('
[ ${#EXTRA[@]} -eq 0 ] || printf ' %q' "${EXTRA[@]}"
printf ' )\n'
sed '1,/^# ---- body/d' "$HERE/job.sh"
