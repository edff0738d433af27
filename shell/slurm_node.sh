#!/usr/bin/env bash
# One Slurm task per node (started by shell/slurm.sbatch): node rank from Slurm, then the step's
# run_<step>.sh, which starts this node's container. NNODES/MASTER_ADDR/MASTER_PORT come exported.
set -euo pipefail
usage="Usage: shell/slurm_node.sh data|train   (one Slurm task per node; started by shell/slurm.sbatch)"
case "${1:-}" in
    -h|--help) echo "$usage"; exit 0 ;;
    data|train) step="$1" ;;
    *) shown="${1:0:40}"; echo "slurm_node.sh: step must be data or train, got ${shown@Q}" >&2; echo "$usage" >&2
       exit 2 ;;
esac
export NODE_RANK="${SLURM_NODEID:?not inside a Slurm job step}"
echo "slurm_node.sh: $(hostname) is node $NODE_RANK of ${NNODES:?}"
exec "$(dirname "${BASH_SOURCE[0]}")/run_$step.sh"
