#!/usr/bin/env bash
# The quick benchmark for newcomers, on the local cpu platform, fully offline:
#   .venv (CPU torch) -> sample data + tokenizers -> tran llama and qwen (tiny shapes) -> compare, with
#   MLPerf Training v5.1's published Llama 3.1 8B runs (a sample, imported) at the end of the page.
#   FRAMEWORK="tran deep" MODELS="llama qwen mistral" runs every cpu framework on every model (about 3
#   times as long: three times the jobs, and the first DeepSpeed job builds a small C++ op once).
# Every workload value below can be overridden from the environment (e.g. TRAIN_ITERS=200).
# SIGINT/SIGTERM reach the running step's whole process tree (shell/jobctl.sh); no later step starts,
# and quickstart.sh exits with 128 + the signal's number.
set -euo pipefail

usage() {
    cat <<'USAGE'
Usage: shell/quickstart.sh [--help]
Runs the whole tprimat pipeline locally on CPU with tiny model shapes and a generated dataset:
set-up (.venv), data (shell/data.sh), training (shell/train.sh, FRAMEWORK=tran), comparison.
FRAMEWORK="tran deep" MODELS="llama qwen mistral" adds DeepSpeed and Mistral 7B (about 3 times as long).
On a CPU without native bf16 the jobs compute in fp32 (CPU_PRECISION=auto, said at each launch);
CPU_PRECISION=bf16 runs emulated bf16 instead, slower there (docs/PERFORMANCE.md).
Results: output/train_cpu_<framework>_<model>.json, output/compare.png, output/compare.md,
output/compare_cpu_frameworks.png, and output/report.html (the page to open).
It takes no arguments (settings come from the environment).
USAGE
}

# Every argument is checked before anything runs: an unknown one is exit 2, never a whole pipeline (issue 26).
# shellcheck source=flags.sh
source "$(dirname "${BASH_SOURCE[0]}")/flags.sh" quickstart.sh -- "$@"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=shell/jobctl.sh
source "$root/shell/jobctl.sh"
tprimat_trap_signals

# One step of the quick benchmark, in its own process group; stop at the first failure or signal.
step() {
    local code=0
    tprimat_run "$@" || code=$?
    if [[ -n "$TPRIMAT_SIGNAL" ]]; then
        echo "quickstart: stopped by SIG$TPRIMAT_SIGNAL; later steps not run" >&2
        exit "$(tprimat_signal_status)"
    fi
    [[ $code -eq 0 ]] || exit "$code"
}

step "$root/shell/setup.sh"

export PLATFORM=cpu DATASET="${DATASET:-sample}" MODEL_SIZE="${MODEL_SIZE:-tiny}" FRAMEWORK="${FRAMEWORK:-tran}"
export MODELS="${MODELS:-llama qwen}"
export TRAIN_ITERS="${TRAIN_ITERS:-60}" WARMUP_STEPS="${WARMUP_STEPS:-6}" LR="${LR:-3e-3}" MIN_LR="${MIN_LR:-3e-4}"
export SL="${SL:-256}" MBS="${MBS:-4}" GA="${GA:-2}"
export TP=1 PP=1 CP=1 DP="${DP:-1}" GPUS_PER_NODE="${GPUS_PER_NODE:-1}" NNODES=1 NODE_RANK=0
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1

# shellcheck source=shell/platform.sh
source "$root/shell/platform.sh"

echo "quickstart: data (DATASET=$DATASET)"
step "$root/shell/data.sh"

# Each job's preflight computes its model's sample digest (train/settings/samples.py, about 8 s on the 2-core host)
# unless a dry run stored it before (utils/dataset/digest_cache.py): one dry run per model, each on its own core,
# computes them side by side, and shows each launch plan. The digest is tran's, whichever cpu framework runs.
echo "quickstart: each model's launch plan and sample digest (dry runs, side by side)"
dry_pids=()
stop_dry_runs() {
    local pid
    for pid in "${dry_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${dry_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    dry_pids=()
}
trap stop_dry_runs EXIT
for model in $MODELS; do
    "$TPRIMAT_PYTHON" -m train.launch --platform cpu --framework tran --model "$model" --dry-run >/dev/null 2>&1 &
    dry_pids+=("$!")
done
for pid in "${dry_pids[@]}"; do
    wait "$pid" || true  # a model the dry run refuses is refused again, with its reason, by its job below
    if [[ -n "$TPRIMAT_SIGNAL" ]]; then
        echo "quickstart: stopped by SIG$TPRIMAT_SIGNAL; later steps not run" >&2
        exit "$(tprimat_signal_status)"
    fi
done
dry_pids=()
# MLPerf Training v5.1's published Llama 3.1 8B runs (a carried sample: AMD MI355X and NVIDIA B200 at 8 GPUs, one
# B200 system at 8 to 256 GPUs), imported beside the results: the page (written by train.sh) ends with them.
output_dir="$(tprimat_config_get OUTPUT_DIR)"
echo "quickstart: MLPerf Training v5.1 published runs (tests/fixtures/mlperf sample, imported into $output_dir)"
step "$TPRIMAT_PYTHON" -m evaluate.mlperf import "$root/tests/fixtures/mlperf/v51_sample.tar.xz" \
    --output-dir "$output_dir"
echo "quickstart: training (FRAMEWORK=$FRAMEWORK, MODEL_SIZE=$MODEL_SIZE, TRAIN_ITERS=$TRAIN_ITERS)"
step "$root/shell/train.sh"

echo
echo "quickstart: done. Results are in $output_dir:"
echo "  results:    $output_dir/train_cpu_*.json (and MLPerf's published runs: train_*_mlperf_*_from-*.json)"
echo "  comparison: $output_dir/compare.png, $output_dir/compare.md, $output_dir/compare_cpu_frameworks.png"
echo "  logs:       $output_dir/logs/"
echo "  report:     $output_dir/report.html (open it in a browser: verdict, figures, fairness, history, evidence)"
