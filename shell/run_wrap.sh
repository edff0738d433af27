#!/usr/bin/env bash
# Run shell/wrap.sh inside the tprimat:<platform> container (natively on cpu or without Docker).
# Arguments are passed to shell/wrap.sh; the exit status is the step's.
set -uo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
    echo "Usage: shell/run_wrap.sh [shell/wrap.sh options]"
    echo "Runs shell/wrap.sh in tprimat:<platform> (see docs/DOCKER.md); on cpu, or when no Docker engine answers, natively."
    exit 0
fi
# shellcheck source=platform.sh
source "$(dirname "${BASH_SOURCE[0]}")/platform.sh"
# shellcheck source=docker.sh
source "$TPRIMAT_ROOT/shell/docker.sh"
cd "$TPRIMAT_ROOT" || exit 2
tprimat_run_step wrap "$@"
