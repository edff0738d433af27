#!/usr/bin/env bash
# Run every selected training job (FRAMEWORK x MODELS x RUNS, chosen by train/jobs.py), keep going
# past a failed job, compare the results, then print a table of each job's exit code and status.
# Exit status: 0 when every job exited 0 with an ok result, 1 otherwise, 2 on a config error.
set -uo pipefail

usage() {
    cat <<'USAGE'
Usage: shell/train.sh [--dry-run] [--help]
Runs train/train_<platform>_<framework>_<model>.sh for FRAMEWORK x MODELS, RUNS times each
(config.env, overridable from the environment: FRAMEWORK="tran mega" ./shell/train.sh).
FRAMEWORK is all, one framework or several in run order; prim on nvd runs nemo and nemo on amd
runs prim, and the mapping is printed. The jobs and the valid names come from
python -m train.jobs (see its --help); the platform from python -m utils.hardware --platform.
  --dry-run   pass --dry-run to every launcher (prints each launch plan, trains nothing)
USAGE
}

launcher_args=()
for arg in "$@"; do
    case "$arg" in
        -h|--help) usage; exit 0 ;;
        --dry-run) launcher_args+=(--dry-run) ;;
        *) echo "train.sh: unknown argument '$arg'" >&2; usage >&2; exit 2 ;;
    esac
done

# shellcheck source=platform.sh
source "$(dirname "${BASH_SOURCE[0]}")/platform.sh"
cd "$TPRIMAT_ROOT" || exit 2
platform="$(tprimat_resolve_platform)" || exit 2
export PLATFORM="$platform"

output_dir="$(tprimat_config_get OUTPUT_DIR)" || exit 2
node_rank="$(tprimat_config_get NODE_RANK)" || exit 2
jobs_text="$("$TPRIMAT_PYTHON" -m train.jobs --platform "$platform")" || exit 2
mapfile -t jobs <<<"$jobs_text"
if [[ ${#jobs[@]} -eq 0 || -z "${jobs[0]}" ]]; then
    echo "train.sh: no jobs selected for platform $platform" >&2
    exit 2
fi

mkdir -p "$output_dir"
codes_file="$(mktemp "${TMPDIR:-/tmp}/tprimat-train-codes.XXXXXX")"
trap 'rm -f "$codes_file"' EXIT
echo "train.sh: platform $platform, ${#jobs[@]} job(s), results in $output_dir"

number=0
for line in "${jobs[@]}"; do
    IFS=$'\t' read -r job_platform framework model run_index script result <<<"$line"
    number=$((number + 1))
    run_args=()
    label="$job_platform/$framework/$model"
    if [[ "$run_index" != "-" ]]; then
        run_args=(--run-index "$run_index")
        label="$label run $run_index"
    fi
    echo "=== [$number/${#jobs[@]}] $label: bash ${script#"$TPRIMAT_ROOT"/}"
    bash "$script" "${run_args[@]}" "${launcher_args[@]}"
    code=$?
    if [[ $code -ne 0 ]]; then
        echo "train.sh: $label exited with $code; continuing with the next job" >&2
    fi
    printf '%s\t%s\n' "$result" "$code" >>"$codes_file"
done

if [[ " ${launcher_args[*]} " == *" --dry-run "* ]]; then
    echo "train.sh: dry run, skipping the comparison"
elif [[ "$node_rank" != "0" ]]; then
    echo "train.sh: NODE_RANK=$node_rank; node 0 writes the results and runs the comparison"
elif [[ -f "$TPRIMAT_ROOT/evaluate/compare.py" ]]; then
    "$TPRIMAT_PYTHON" -m evaluate.compare --results-dir "$output_dir" \
        || echo "train.sh: evaluate.compare failed (exit $?); the results are still in $output_dir" >&2
else
    echo "train.sh: evaluate/compare.py is not present; skipping the comparison" >&2
fi

echo
if [[ "$node_rank" != "0" ]]; then
    # Results live on node 0; here only the exit codes mean anything.
    failed=0
    while IFS=$'\t' read -r result code; do
        echo "exit $code  ${result#"$output_dir"/}"
        [[ "$code" == "0" ]] || failed=1
    done <"$codes_file"
    exit "$failed"
fi
"$TPRIMAT_PYTHON" -m train.jobs --platform "$platform" --summary "$codes_file"
summary_rc=$?
[[ $summary_rc -le 1 ]] || echo "train.sh: could not print the summary (exit $summary_rc)" >&2
exit $((summary_rc == 0 ? 0 : 1))
