#!/usr/bin/env bash
# The container's entry for a sandbox server (docker run ... --entrypoint deploy/sandbox/serve.sh azr), and what a
# Slurm step runs on each CPU node (deploy/sandbox/slurm_step.sh): `azr sandbox serve` on all addresses, which it
# allows only with a token, so one must be in AZR_SANDBOX_TOKEN. Settings by environment: AZR_SANDBOX_PORT (8765),
# AZR_SANDBOX_WORKERS (one per core). Extra arguments go to `azr sandbox serve` unchanged.
set -euo pipefail

if [ -z "${AZR_SANDBOX_TOKEN:-}" ]; then
    echo "serve: set AZR_SANDBOX_TOKEN (the token clients send; never on a command line)" >&2
    exit 2
fi
ARGS=(sandbox serve --host 0.0.0.0 --port "${AZR_SANDBOX_PORT:-8765}" --token-env AZR_SANDBOX_TOKEN)
if [ -n "${AZR_SANDBOX_WORKERS:-}" ]; then
    ARGS+=(--workers "$AZR_SANDBOX_WORKERS")
fi
exec azr "${ARGS[@]}" "$@"
