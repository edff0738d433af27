#!/usr/bin/env bash
# Run shell/train.sh inside the tprimat:<platform> container (natively on cpu or without Docker).
# Arguments are passed to shell/train.sh; the exit status is the step's. OUTPUT_DIR is checked on the
# host first (a writable directory with room), so no container starts when results cannot be written.
set -uo pipefail
# shellcheck source=platform.sh
source "$(dirname "${BASH_SOURCE[0]}")/platform.sh"
# shellcheck source=docker.sh
source "$TPRIMAT_ROOT/shell/docker.sh"
cd "$TPRIMAT_ROOT" || exit 2
case " $* " in
    *" -h "*|*" --help "*|*" --dry-run "*) ;;
    *) tprimat_python_module utils.disk check-output || exit $? ;;
esac
tprimat_run_step train "$@"
