#!/usr/bin/env bash
# One Slurm task per node (started by shell/slurm.sbatch): node rank from Slurm, then the step's
# run_<step>.sh, which starts this node's container. NNODES/MASTER_ADDR/MASTER_PORT come exported.
set -euo pipefail
step="${1:?usage: shell/slurm_node.sh data|train}"
export NODE_RANK="${SLURM_NODEID:?not inside a Slurm job step}"
echo "slurm_node.sh: $(hostname) is node $NODE_RANK of ${NNODES:?}"
exec "$(dirname "${BASH_SOURCE[0]}")/run_$step.sh"
