#!/usr/bin/env bash
# Sourced by train.sh and data.sh (through prologue.sh) and quickstart.sh: run each child as its own
# process group and pass SIGINT/SIGTERM on to that whole group, so stopping the script stops the work it
# started. (A plain foreground child keeps running when only the script is signalled: issue 12 found
# train.sh exiting at once while its launcher and trainer trained on, and data.sh leaving data.encode running.)
# SIGHUP (a closed terminal or ssh session) is handled like SIGTERM: issue 33 found train.sh gone with 129 and
# its launcher, torchrun and worker training on unattended.
#   tprimat_trap_signals       install the INT/TERM/HUP traps (call once, before the first tprimat_run)
#   tprimat_run CMD...         run CMD (stdin from /dev/null) in its own process group; wait for it
#                              through any signal; return its exit status
#   TPRIMAT_SIGNAL             INT, TERM or HUP once one arrived (the script then starts nothing new)
#   tprimat_signal_status      128 + the signal's number, the status a script stopped by it exits with
# A script started with SIGINT ignored (as `script &` from a non-interactive shell) cannot trap it: bash
# keeps a signal ignored on entry ignored. SIGINT then does nothing to it; stop it with SIGTERM.
# shellcheck shell=bash

# A library: sourced by the scripts above, never run on its own.
# shellcheck source=sourced_only.sh
source "$(dirname "${BASH_SOURCE[0]}")/sourced_only.sh"

TPRIMAT_SIGNAL=""
TPRIMAT_CHILD_GROUP=""

_tprimat_on_signal() {
    [[ -n "$TPRIMAT_SIGNAL" ]] || TPRIMAT_SIGNAL="$1"
    if [[ -n "$TPRIMAT_CHILD_GROUP" ]]; then
        kill -s "$1" -- "-$TPRIMAT_CHILD_GROUP" 2>/dev/null || true
    fi
}

tprimat_trap_signals() {
    trap '_tprimat_on_signal INT' INT
    trap '_tprimat_on_signal TERM' TERM
    trap '_tprimat_on_signal HUP' HUP
}

tprimat_run() {
    local pid
    # Job control for this one command: it gets its own process group (and SIGINT is not ignored in it,
    # as it would be for a background command without job control).
    set -m
    "$@" </dev/null &
    pid=$!
    set +m
    TPRIMAT_CHILD_GROUP="$pid"
    if [[ -n "$TPRIMAT_SIGNAL" ]]; then  # arrived while the child was being started
        kill -s "$TPRIMAT_SIGNAL" -- "-$pid" 2>/dev/null || true
    fi
    # `wait` returns early when a trapped signal arrives; the trap forwarded it, so wait again.
    while kill -0 "$pid" 2>/dev/null; do
        wait "$pid"
    done
    TPRIMAT_CHILD_GROUP=""
    wait "$pid"
}

tprimat_signal_status() {
    case "$TPRIMAT_SIGNAL" in
        INT) echo 130 ;;
        TERM) echo 143 ;;
        HUP) echo 129 ;;
        *) echo 0 ;;
    esac
}
