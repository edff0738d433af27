#!/usr/bin/env bash
# Open an interactive shell in the tprimat:<platform> container, started exactly like the
# run_<step>.sh containers (same devices, mounts and environment). Extra arguments replace the
# shell: ./shell/entry.sh bash train/train_amd_prim_llama.sh
set -uo pipefail
# shellcheck source=platform.sh
source "$(dirname "${BASH_SOURCE[0]}")/platform.sh"
# shellcheck source=docker.sh
source "$TPRIMAT_ROOT/shell/docker.sh"
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
    tprimat_run_usage "entry.sh [command...]   (default: an interactive bash)" "the command (default: bash)"
    exit 0
fi
if [[ "${1:-}" == -* ]]; then  # options are not commands: an unknown one is a usage error, not a command run
    shown="${1:0:40}"  # quoted by bash: a control character is shown as $'\E', never sent to the terminal
    echo "entry.sh: unknown option ${shown@Q} (give a command, e.g. ./shell/entry.sh bash; see --help)" >&2
    exit 2
fi
cd "$TPRIMAT_ROOT" || exit 2
platform="$(tprimat_resolve_platform)" || exit 2
command=("$@")
[[ ${#command[@]} -gt 0 ]] || command=(bash)

if [[ "$platform" == cpu ]] || ! tprimat_docker_ready; then
    if [[ "$platform" == cpu ]]; then
        echo "entry.sh: platform cpu has no container; opening ${command[0]} natively in $TPRIMAT_ROOT"
    else
        echo "entry.sh: no Docker engine answers (docker info failed); opening ${command[0]} natively in $TPRIMAT_ROOT"
    fi
    PLATFORM="$platform" "${command[@]}"
    exit $?
fi
tprimat_require_image "$platform" || exit $?
trap 'rm -f "${TPRIMAT_DOCKER_ENV_FILE:-}"' EXIT
TPRIMAT_INTERACTIVE=1 tprimat_docker_run_argv "$platform" "${command[@]}" || exit $?
docker "${TPRIMAT_DOCKER_ARGV[@]}"
