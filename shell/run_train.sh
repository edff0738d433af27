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
for arg in "$@"; do  # shell/train.sh's options: an unknown one is refused before OUTPUT_DIR is touched
    case "$arg" in
        -h|--help|--dry-run) ;;
        *) echo "run_train.sh: unknown argument '$arg' (shell/train.sh takes --dry-run, --help)" >&2; exit 2 ;;
    esac
done
case " $* " in
    *" -h "*|*" --help "*|*" --dry-run "*) ;;
    *) tprimat_python_module utils.files.disk check-output || exit $? ;;
esac
tprimat_run_step train "$@"
