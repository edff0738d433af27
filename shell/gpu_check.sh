#!/usr/bin/env bash
# The GPU self-check, the first thing to run on a new GPU node: a prescreen of GPU 0 against its datasheet
# (python -m utils.machine.prescreen), a 30-step job of every framework of the platform on the 8-layer proxy of
# Llama 3.1 8B through tprimat's own launcher (shell/train.sh), and one table with a verdict
# (python -m evaluate.gpu_check). In the tprimat:<platform> image when Docker answers (shell/docker.sh),
# natively with --native. Exit: 0 ready, 1 degraded or broken, 2 no GPU / bad input.
set -uo pipefail

usage() {
    printf '%s\n' \
        "Usage: shell/gpu_check.sh [--native] [--help]" \
        "The five-minute GPU self-check of a new node, for the detected platform (or PLATFORM=nvd|amd):" \
        "  1. prescreen of GPU 0 (~30 s, python -m utils.machine.prescreen): bf16 GEMM sweep and memory copy against the" \
        "     datasheet (utils/machine/hardware.py); model, driver, runtime, memory, power limit, clocks, ECC." \
        "     Under 80% of the datasheet GEMM peak: a warning line. No GPU: one line, exit 2." \
        "  2. every framework of the platform (FRAMEWORK, default all) for 30 steps on one GPU: Llama 3.1 8B's" \
        "     full width with 8 of its 32 layers (MODEL_LAYERS=8), SL 2048, MBS 2, GA 4, the configured DATASET" \
        "     (prepare it first: ./shell/run_data.sh), through shell/train.sh." \
        "  3. one table (python -m evaluate.gpu_check): status, tokens/s, MFU against the datasheet and the" \
        "     measured GEMM peak, peak memory and its estimate, energy, the first two losses (within 2%)," \
        "     tprimat's step time against the framework's own figures; then: ready / degraded / broken." \
        "Results go to OUTPUT_DIR/gpu_check/<UTC time>/, the table to OUTPUT_DIR/gpu_check.md and .json." \
        "Time: ~30 s prescreen + per framework its start-up and 30 steps (~0.6-0.9 s each on an H100)." \
        "  --native   run here, not in the tprimat:<platform> image (the default when no Docker engine answers)" \
        "Exit: 0 ready, 1 degraded or broken, 2 no GPU or bad input (platform cpu, unknown PLATFORM)."
}

# shellcheck source=flags.sh
source "$(dirname "${BASH_SOURCE[0]}")/flags.sh" gpu_check.sh --native -- "$@"
# shellcheck source=platform.sh
source "$(dirname "${BASH_SOURCE[0]}")/platform.sh"
cd "$TPRIMAT_ROOT" || exit 2
platform="$(tprimat_resolve_platform)" || exit 2
if [[ "$platform" == cpu ]]; then
    echo "gpu_check.sh: platform cpu has no GPU to check (run it on an nvd or amd node, or set PLATFORM=nvd|amd)" >&2
    exit 2
fi
export PLATFORM="$platform"

if ! tprimat_flag --native; then
    # shellcheck source=docker.sh
    source "$TPRIMAT_ROOT/shell/docker.sh"
    tprimat_run_step gpu_check --native
    exit $?
fi

# shellcheck source=jobctl.sh
source "$TPRIMAT_ROOT/shell/jobctl.sh"
tprimat_trap_signals
output_dir="$(tprimat_config_get OUTPUT_DIR)" || exit 2
check_dir="$output_dir/gpu_check/$(date -u +%Y%m%dT%H%M%SZ)"  # the prescreen creates it once a GPU answers

echo "gpu_check.sh: [1/3] prescreen of GPU 0 (platform $platform)"
tprimat_run "$TPRIMAT_PYTHON" -m utils.machine.prescreen --platform "$platform" --out "$check_dir/prescreen.json"
code=$?
[[ $code -eq 0 ]] || exit "$code"
[[ -z "$TPRIMAT_SIGNAL" ]] || exit "$(tprimat_signal_status)"

# The check's workload: the labelled proxy on one GPU (the model's width, 8 of its layers).
export MODEL_LAYERS=8 MODELS=llama MODEL_SIZE=full PROFILE=identical RUNS=1 TRAIN_ITERS=30 WARMUP_STEPS=5 \
    MEASURE_SKIP_STEPS=3 SL=2048 MBS=2 GA=4 DP=1 TP=1 PP=1 CP=1 NNODES=1 NODE_RANK=0 GPUS_PER_NODE=1 \
    OUTPUT_DIR="$check_dir"
framework_words="$(tprimat_config_get FRAMEWORK)" || exit 2
read -ra frameworks <<<"$framework_words"

echo "gpu_check.sh: [2/3] 30 steps of ${frameworks[*]} on the 8-layer proxy, results in $check_dir"
tprimat_run bash "$TPRIMAT_ROOT/shell/train.sh"
echo "gpu_check.sh: shell/train.sh exited with $?; the table says what each job did"
[[ -z "$TPRIMAT_SIGNAL" ]] || exit "$(tprimat_signal_status)"

echo "gpu_check.sh: [3/3] the table"
tprimat_run "$TPRIMAT_PYTHON" -m evaluate.gpu_check --results-dir "$check_dir" --platform "$platform" \
    --model llama --prescreen "$check_dir/prescreen.json" --out-dir "$output_dir" --frameworks "${frameworks[@]}"
