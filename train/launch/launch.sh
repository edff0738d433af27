#!/usr/bin/env bash
# Shared launcher behind every train/train_<platform>_<framework>_<model>.sh one-liner.
# Usage: train/launch/launch.sh <platform> <framework> <model> [train.launch.launcher options...]
set -euo pipefail
# shellcheck source=shell/platform.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../shell/platform.sh"
cd "$TPRIMAT_ROOT"
if [[ $# -lt 3 ]]; then
    exec "$TPRIMAT_PYTHON" -m train.launch --help
fi
platform="$1" framework="$2" model="$3"
shift 3
exec "$TPRIMAT_PYTHON" -m train.launch --platform "$platform" --framework "$framework" --model "$model" "$@"
