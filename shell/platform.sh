#!/usr/bin/env bash
# Sourced by every tprimat shell script: finds the repository and the Python interpreter, and asks
# Python for everything else. The shell never parses config.env or secrets.env and never detects
# the platform itself: utils/machine/hardware.py and utils/config/load.py are the only places that do.
#   tprimat_resolve_platform   PLATFORM from the environment, then config.env, then detection
#                              (python -m utils.machine.hardware --platform; exit 2 and the valid values on a bad one)
#   tprimat_config_get KEY     one validated config value (python -m utils.config.load --get KEY)
# TPRIMAT_DEV_DIR (default /dev) and fake amd-smi/nvidia-smi on PATH let tests fake devices.
# shellcheck shell=bash

# A library: sourced by the scripts above, never run on its own.
# shellcheck source=sourced_only.sh
source "$(dirname "${BASH_SOURCE[0]}")/sourced_only.sh"

TPRIMAT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export TPRIMAT_ROOT

# The interpreter: the local virtualenv when it exists (cpu), else the image's python3.
# The virtualenv is this checkout's own (shell/setup.sh), and uv installs it without bytecode: with
# PYTHONDONTWRITEBYTECODE set, every interpreter would compile what it imports again (megatron-core's
# import: 21 s instead of 9; docs/PERFORMANCE.md, "The quick benchmark"), so its Pythons keep what they compile.
if [[ -x "$TPRIMAT_ROOT/.venv/bin/python" ]]; then
    TPRIMAT_PYTHON="$TPRIMAT_ROOT/.venv/bin/python"
    unset PYTHONDONTWRITEBYTECODE
else
    TPRIMAT_PYTHON="$(command -v python3 || command -v python || echo python3)"
fi
export TPRIMAT_PYTHON

# python -m MODULE ARGS... from the repository root (where the packages are), whatever the caller's cwd.
tprimat_python_module() {
    (cd "$TPRIMAT_ROOT" && "$TPRIMAT_PYTHON" -m "$@")
}

tprimat_resolve_platform() {
    tprimat_python_module utils.machine.hardware --platform
}

tprimat_config_get() {
    tprimat_python_module utils.config.load --get "$1"
}
