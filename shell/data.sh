#!/usr/bin/env bash
# Prepare the training data natively: fetch -> clean -> encode -> verify (data/*.py), in order,
# stopping at the first failing stage. Settings come from config.env (DATASET, MODELS, DATA_DIR...),
# overridable from the environment, e.g. `DATASET=sample ./shell/data.sh`.
# One writer per DATA_DIR: the script holds DATA_DIR's lock (utils/files/locks.py) for all four stages, so a
# second preparation of the same directory fails at once naming this one. SIGINT/SIGTERM reach the
# running stage's whole process tree (shell/jobctl.sh); it removes its partial output, no later stage
# starts, and data.sh exits with 128 + the signal's number.
set -uo pipefail

usage() {
    cat <<'USAGE'
Usage: shell/data.sh [--force] [--no-progress]
Runs python -m data.fetch, data.clean, data.encode and data.verify with the settings of
config.env (environment variables override it, e.g. DATASET=sample ./shell/data.sh).
Each stage skips work whose inputs have not changed (see its manifest).
  --force        redo every stage
  --no-progress  no progress bars
Run one stage alone with e.g. `python -m data.encode --help`. Holds DATA_DIR's lock while it runs;
SIGINT/SIGTERM stop the running stage (its partial output removed) and exit 128 + signal.
USAGE
}

# shellcheck source=prologue.sh
source "$(dirname "${BASH_SOURCE[0]}")/prologue.sh" data.sh --force --no-progress -- "$@"
stage_args=("${TPRIMAT_FLAGS[@]}")

# The config is checked once, before anything runs (a bad value is one line, not four).
lock_file="$(tprimat_python_module utils.files.locks path data)" || exit $?
# torch's compile cache (importing Megatron's code makes /tmp/torchinductor_<user>) goes where the jobs' goes, in
# DATA_DIR's bookkeeping folder beside the lock (train/settings/platform_env.py cache_env), not in TMPDIR (issue 33).
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-$(dirname "$lock_file")/cache/torchinductor}"
# The lock belongs to the open file on descriptor 9, which this shell keeps (and the stages inherit).
exec 9<>"$lock_file" || { echo "data.sh: cannot open the lock file $lock_file" >&2; exit 1; }
tprimat_python_module utils.files.locks acquire data --fd 9 --holder-pid "$$" --command "shell/data.sh $*" || exit 1
export TPRIMAT_LOCK_FDS=9
trap 'tprimat_python_module utils.files.locks release --fd 9' EXIT

for stage in fetch clean encode verify; do
    echo "== data.$stage =="
    tprimat_run "$TPRIMAT_PYTHON" -m "data.$stage" "${stage_args[@]}"
    code=$?
    if [[ -n "$TPRIMAT_SIGNAL" ]]; then
        echo "data.sh: stopped by SIG$TPRIMAT_SIGNAL during data.$stage; later stages not run" >&2
        exit "$(tprimat_signal_status)"
    fi
    if [[ $code -ne 0 ]]; then
        echo "data.sh: stage data.$stage failed; later stages not run" >&2
        exit 1
    fi
done
echo "data.sh: datasets ready and verified"
