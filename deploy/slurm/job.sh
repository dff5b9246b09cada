#!/usr/bin/env bash
# The body of the batch script deploy/slurm/render.sh writes (it puts the settings above this line's marker).
# Checked on its own by shellcheck; the settings below are what render.sh defines.
TRAIN_NODES=1 GPUS_PER_NODE=8 TENSOR_PARALLEL=1 VLLM_PORT=8000 GROUP_PORT=51216 MAIN_PORT=29500
CONFIG=recipe.yaml MODEL=model ACCELERATE_CONFIG=deploy/accelerate/multi_gpu.yaml VENV=.venv EXTRA=()
# ---- body
#
# Node 0 of the allocation serves the model with vLLM on all its GPUs, as TRL's server mode expects (`trl
# vllm-serve` runs the same `vllm serve` with these flags). Nodes 1..N train: one `accelerate launch` per node, rank
# 0 on node 1. Generation goes over HTTP to node 0; after each optimizer step rank 0 sends the new weights to the
# vLLM workers over NCCL, in a group whose master is rank 0 itself: open between the nodes
#   - training nodes -> node 0, TCP VLLM_PORT (HTTP) and NCCL's own ports;
#   - node 0 -> node 1, TCP GROUP_PORT (the weight-sync group's rendezvous) and NCCL's ports;
#   - training nodes among themselves, TCP MAIN_PORT (torch's rendezvous) and NCCL's ports.
# VLLM_HOST_IP is set on every node to its own address on the cluster network: vLLM binds to it, and rank 0
# announces it to the server as the weight-sync master (with several interfaces the default route may be the wrong
# one; set NCCL_SOCKET_IFNAME too on such clusters). DRY_RUN=1 prints every step instead of running it, inside an
# allocation or anywhere else (with placeholder node names).
set -euo pipefail

run() {
    printf '+ %s\n' "$*"
    if [ -z "${DRY_RUN:-}" ]; then
        "$@"
    fi
}

address() {  # a node's IPv4 address as the others reach it (its name where it does not resolve, e.g. a dry run)
    local ip
    ip="$(getent ahostsv4 "$1" 2> /dev/null | awk 'NR == 1 { print $1 }')" || true
    printf '%s\n' "${ip:-$1}"
}

if [ -n "${SLURM_JOB_NODELIST:-}" ]; then
    mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
elif [ -n "${DRY_RUN:-}" ]; then  # a dry run outside Slurm: placeholder node names, the steps printed as they are
    NODES=()
    for ((i = 0; i <= TRAIN_NODES; i++)); do
        NODES+=("node$i")
    done
else
    echo "job: not inside a Slurm allocation (SLURM_JOB_NODELIST is unset): submit it with sbatch, or try DRY_RUN=1" >&2
    exit 2
fi
if [ "${#NODES[@]}" -ne $((TRAIN_NODES + 1)) ]; then
    echo "job: expected $((TRAIN_NODES + 1)) nodes, the allocation has ${#NODES[@]}" >&2
    exit 2
fi
VLLM_NODE="${NODES[0]}"
VLLM_IP="$(address "$VLLM_NODE")"
HEAD_IP="$(address "${NODES[1]}")"
echo "job ${SLURM_JOB_ID:-?}: vLLM on $VLLM_NODE ($VLLM_IP), training on ${NODES[*]:1} (rank 0 on ${NODES[1]}, $HEAD_IP)"

# The server's API key: new for each job, in the job's environment only (srun passes it to the server, which reads
# VLLM_API_KEY itself, and to the trainers, whose `azr train` sends it); never on a command line, so never printed.
VLLM_API_KEY="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
export VLLM_API_KEY

# The vLLM server: GPUS_PER_NODE / TENSOR_PARALLEL copies of the model, one port, on the cluster address only.
SERVER=(srun --nodes=1 --ntasks=1 --nodelist="$VLLM_NODE" --gpus-per-node="$GPUS_PER_NODE"
    --export="ALL,VLLM_HOST_IP=$VLLM_IP,VLLM_SERVER_DEV_MODE=1"
    "$VENV/bin/vllm" serve "$MODEL" --host "$VLLM_IP" --port "$VLLM_PORT"
    --tensor-parallel-size "$TENSOR_PARALLEL" --data-parallel-size $((GPUS_PER_NODE / TENSOR_PARALLEL))
    --weight-transfer-config '{"backend": "nccl"}' --logprobs-mode processed_logprobs --max-logprobs -1)
if [ -n "${DRY_RUN:-}" ]; then
    run "${SERVER[@]}"
else
    printf '+ %s &\n' "${SERVER[*]}"
    "${SERVER[@]}" &
    SERVER_PID=$!
    trap 'kill "$SERVER_PID" 2> /dev/null || true' EXIT  # the server goes with the job, however training ends
    for _ in $(seq 1 180); do  # up to 30 minutes: the first start downloads and compiles
        curl -sf "http://$VLLM_IP:$VLLM_PORT/health" > /dev/null && break
        kill -0 "$SERVER_PID" 2> /dev/null || { echo "job: the vLLM server exited" >&2; exit 1; }
        sleep 10
    done
    curl -sf "http://$VLLM_IP:$VLLM_PORT/health" > /dev/null || { echo "job: vLLM not healthy after 30 min" >&2; exit 1; }
fi

# The trainers: one launcher per training node, each starting GPUS_PER_NODE ranks; a rank's failure ends the step.
TRAIN=(--config_file "$ACCELERATE_CONFIG"
    --num_machines "$TRAIN_NODES" --num_processes $((TRAIN_NODES * GPUS_PER_NODE))
    --main_process_ip "$HEAD_IP" --main_process_port "$MAIN_PORT" --rdzv_backend static
    -m azr.cli train --config "$CONFIG"
    --set grpo.use_vllm=true --set grpo.vllm_mode=server
    --set "grpo.vllm_server_host=$VLLM_IP" --set "grpo.vllm_server_port=$VLLM_PORT"
    --set "grpo.vllm_group_port=$GROUP_PORT" "${EXTRA[@]}")
# Run by each node's own shell: its own address, and its rank among the launchers (0 on node 1, which holds rank 0).
# shellcheck disable=SC2016
PER_NODE='export VLLM_HOST_IP="$(hostname -I | cut -d" " -f1)"; exec "$0" launch --machine_rank "$SLURM_PROCID" "$@"'
run srun --nodes="$TRAIN_NODES" --ntasks-per-node=1 --relative=1 --gpus-per-node="$GPUS_PER_NODE" \
    --kill-on-bad-exit=1 bash -c "$PER_NODE" "$VENV/bin/accelerate" "${TRAIN[@]}"
