#!/usr/bin/env bash
# Prepare the training data natively: fetch -> clean -> encode -> verify (data/*.py), in order,
# stopping at the first failing stage. Settings come from config.env (DATASET, MODELS, DATA_DIR...),
# overridable from the environment, e.g. `DATASET=sample ./shell/data.sh`.
set -euo pipefail

usage() {
    cat <<'USAGE'
Usage: shell/data.sh [--force] [--no-progress]
Runs python -m data.fetch, data.clean, data.encode and data.verify with the settings of
config.env (environment variables override it, e.g. DATASET=sample ./shell/data.sh).
Each stage skips work whose inputs have not changed (see its manifest).
  --force        redo every stage
  --no-progress  no progress bars
Run one stage alone with e.g. `python -m data.encode --help`.
USAGE
}

stage_args=()
for arg in "$@"; do
    case "$arg" in
        -h|--help) usage; exit 0 ;;
        --force|--no-progress) stage_args+=("$arg") ;;
        *) echo "data.sh: unknown argument '$arg'" >&2; usage >&2; exit 2 ;;
    esac
done

# shellcheck source=platform.sh disable=SC1091
source "$(dirname "${BASH_SOURCE[0]}")/platform.sh"
cd "$TPRIMAT_ROOT"

for stage in fetch clean encode verify; do
    echo "== data.$stage =="
    if ! "$TPRIMAT_PYTHON" -m "data.$stage" "${stage_args[@]}"; then
        echo "data.sh: stage data.$stage failed; later stages not run" >&2
        exit 1
    fi
done
echo "data.sh: datasets ready and verified"
