#!/usr/bin/env bash
# Sourced by every tprimat shell script: finds the repository, detects the platform and
# picks the Python interpreter. Semantics match utils/hardware.py::detect_platform.
#   amd: /dev/kfd plus amd-smi or rocm-smi     nvd: a working nvidia-smi     cpu: neither
# PLATFORM=amd|nvd|cpu overrides detection; TPRIMAT_DEV_DIR (default /dev) lets tests fake devices.
# shellcheck shell=bash

TPRIMAT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export TPRIMAT_ROOT

tprimat_detect_platform() {
    local dev="${TPRIMAT_DEV_DIR:-/dev}"
    if [[ -e "$dev/kfd" ]] && { command -v amd-smi >/dev/null 2>&1 || command -v rocm-smi >/dev/null 2>&1; }; then
        echo amd
    elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
        echo nvd
    else
        echo cpu
    fi
}

# Resolve PLATFORM: the environment wins, then the config file (TPRIMAT_CONFIG or config.env, the
# same file utils/configure.py reads; the value may be quoted or exported), then detection.
tprimat_resolve_platform() {
    local requested="${PLATFORM:-}" config="${TPRIMAT_CONFIG:-$TPRIMAT_ROOT/config.env}"
    if [[ -z "$requested" && -f "$config" ]]; then
        requested="$(sed -n -E "s/^[[:space:]]*(export[[:space:]]+)?PLATFORM=[\"']?([^[:space:]\"'#]*).*/\\2/p" "$config" | tail -n 1)"
    fi
    if [[ -z "$requested" ]]; then
        tprimat_detect_platform
        return 0
    fi
    case "$requested" in
        amd|nvd|cpu) echo "$requested" ;;
        *) echo "platform.sh: PLATFORM='$requested' is not valid; use one of: amd, nvd, cpu" >&2; return 2 ;;
    esac
}

# The interpreter: the local virtualenv when it exists (cpu), else the image's python3.
if [[ -x "$TPRIMAT_ROOT/.venv/bin/python" ]]; then
    TPRIMAT_PYTHON="$TPRIMAT_ROOT/.venv/bin/python"
else
    TPRIMAT_PYTHON="$(command -v python3 || command -v python || echo python3)"
fi
export TPRIMAT_PYTHON

# One config value through the typed loader (config.env + environment), e.g. OUTPUT_DIR.
# Shell scripts never parse config.env themselves for values Python validates.
tprimat_config_get() {
    "$TPRIMAT_PYTHON" -m utils.configure --get "$1"
}
