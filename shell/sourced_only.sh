#!/usr/bin/env bash
# Sourced first by each of tprimat's shell libraries (platform.sh, jobctl.sh, docker.sh, flags.sh,
# prologue.sh): a library run on its own instead of sourced prints its header on --help (exit 0), and
# otherwise says it is not run on its own (exit 2); so does this file, run on its own. Sourced by a script,
# it does nothing.
# shellcheck shell=bash

if [[ "${BASH_SOURCE[1]:-}" == "$0" || "${BASH_SOURCE[0]}" == "$0" ]]; then
    case "${1:-}" in
        -h|--help) sed -n '2,/^# shellcheck shell=bash/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "$(basename "$0"): a library sourced by tprimat's scripts; it is not run on its own (see --help)" >&2
           exit 2 ;;
    esac
fi
