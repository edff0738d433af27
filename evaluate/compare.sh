#!/usr/bin/env bash
# Compare every train_*.json result: writes compare.png, loss_parity.png and compare.md.
# Usage: evaluate/compare.sh [--results-dir DIR] [--price-per-gpu-hour amd=2.5 nvd=3.0] [--allow-mismatch]
set -euo pipefail
# shellcheck source=shell/platform.sh
source "$(dirname "${BASH_SOURCE[0]}")/../shell/platform.sh"
cd "$TPRIMAT_ROOT"
exec "$TPRIMAT_PYTHON" -m evaluate.compare "$@"
