#!/usr/bin/env bash
# The start shell/data.sh and shell/train.sh share, sourced once each defines usage():
#   source shell/prologue.sh NAME FLAG... -- "$@"
# reads the arguments (shell/flags.sh: TPRIMAT_FLAGS, tprimat_flag), finds the repository and Python
# (shell/platform.sh), forwards SIGINT/SIGTERM to the children's process groups (shell/jobctl.sh) and enters
# the repository root.
# shellcheck shell=bash

# A library: sourced by the scripts above, never run on its own.
# shellcheck source=sourced_only.sh
source "$(dirname "${BASH_SOURCE[0]}")/sourced_only.sh"

# shellcheck source=flags.sh
source "$(dirname "${BASH_SOURCE[0]}")/flags.sh" "$@"
# shellcheck source=platform.sh
source "$(dirname "${BASH_SOURCE[0]}")/platform.sh"
# shellcheck source=jobctl.sh
source "$TPRIMAT_ROOT/shell/jobctl.sh"
tprimat_trap_signals
cd "$TPRIMAT_ROOT" || exit 2
