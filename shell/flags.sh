#!/usr/bin/env bash
# A script's arguments, every one checked before anything runs (issue 26). Sourced once the script defines
# usage():
#   source shell/flags.sh NAME FLAG... -- "$@"
# -h/--help prints usage and exits 0; one of the FLAGs is kept, in order, in TPRIMAT_FLAGS; anything else is
# named ("NAME: unknown argument 'ARG'") with the usage on stderr, exit 2.
#   tprimat_flag FLAG          true when FLAG was given
# shellcheck shell=bash

# A library: sourced by the scripts above, never run on its own.
# shellcheck source=sourced_only.sh
source "$(dirname "${BASH_SOURCE[0]}")/sourced_only.sh"

_tprimat_name="$1"
shift
_tprimat_known=()
while [[ $# -gt 0 && "$1" != -- ]]; do
    _tprimat_known+=("$1")
    shift
done
shift
TPRIMAT_FLAGS=()
for _tprimat_arg in "$@"; do
    case "$_tprimat_arg" in
        -h|--help) usage; exit 0 ;;
    esac
    _tprimat_kept=0
    for _tprimat_flag in "${_tprimat_known[@]}"; do
        if [[ "$_tprimat_arg" == "$_tprimat_flag" ]]; then
            TPRIMAT_FLAGS+=("$_tprimat_arg")
            _tprimat_kept=1
        fi
    done
    if [[ $_tprimat_kept -eq 0 ]]; then
        echo "$_tprimat_name: unknown argument '$_tprimat_arg'" >&2
        usage >&2
        exit 2
    fi
done
unset _tprimat_name _tprimat_known _tprimat_arg _tprimat_kept _tprimat_flag

tprimat_flag() {
    local given
    for given in "${TPRIMAT_FLAGS[@]}"; do
        [[ "$given" == "$1" ]] && return 0
    done
    return 1
}
