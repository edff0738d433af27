#!/usr/bin/env bash
# Run shell/purge.sh inside the tprimat:<platform> container (natively on cpu or without Docker).
# Arguments are passed to shell/purge.sh; the exit status is the step's.
set -uo pipefail
# shellcheck source=platform.sh
source "$(dirname "${BASH_SOURCE[0]}")/platform.sh"
# shellcheck source=docker.sh
source "$TPRIMAT_ROOT/shell/docker.sh"
cd "$TPRIMAT_ROOT" || exit 2
tprimat_run_step purge "$@"
