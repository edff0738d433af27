#!/usr/bin/env bash
# Run every selected training job (FRAMEWORK x MODELS x RUNS, chosen by train/launch/jobs.py), keep going
# past a failed job, compare the results (compare.md, compare.png, report.html), then print a table of each
# job's exit code and status.
# OUTPUT_DIR is checked first (a writable directory with room): if results cannot be written, no job runs.
# SIGINT/SIGTERM/SIGHUP reach the running job's whole process tree (shell/jobctl.sh); its launcher records it
# incomplete, no further job starts, and train.sh exits with 128 + the signal's number.
# Each job is a run with an id (utils/files/run_owner.py): before its launcher starts, train.sh locks the job's
# result (descriptor 8, held until the run ends, so no second train.sh takes it in between) and writes its
# incomplete result (so a signal at any moment leaves one); after it, every process left of the run is
# stopped, the run is closed (a late write of it is dropped), and the next job waits for MASTER_PORT.
# After each job its result (ok, incomplete or failed) is added to the results database HISTORY_DB
# (python -m evaluate.history add; HISTORY_DB=off skips it), under the same signal forwarding as the jobs; a failed
# add is one line, never a failed run. Once a signal came, no add starts (the result stays for a later add).
# Exit status: 0 when every job exited 0 with an ok result, 1 otherwise, 2 on a config error.
set -uo pipefail

usage() {
    cat <<'USAGE'
Usage: shell/train.sh [--dry-run] [--help]
Runs train/train_<platform>_<framework>_<model>.sh for FRAMEWORK x MODELS, RUNS times each
(config.env, overridable from the environment: FRAMEWORK="tran mega" ./shell/train.sh).
FRAMEWORK is all, one framework or several in run order; prim on nvd runs nemo and nemo on amd
runs prim, and the mapping is printed. The jobs and the valid names come from
python -m train.launch.jobs (see its --help); the platform from python -m utils.machine.hardware --platform.
  --dry-run   pass --dry-run to every launcher (prints each launch plan, trains nothing, reads no result)
Before any job: OUTPUT_DIR must be a writable directory with room (python -m utils.files.disk check-output),
the settings must run on the platform (python -m utils.config.load --before-launch), MASTER_ADDR must
resolve and MASTER_PORT be free (python -m utils.machine.rendezvous, waiting up to 30 s between jobs).
SIGINT/SIGTERM/SIGHUP stop the running job (recorded incomplete) and start no other; exit 128 + signal.
After each job its result is added to the results database HISTORY_DB (python -m evaluate.history;
HISTORY_DB=off skips it).
USAGE
}

# shellcheck source=prologue.sh
source "$(dirname "${BASH_SOURCE[0]}")/prologue.sh" train.sh --dry-run -- "$@"
launcher_args=("${TPRIMAT_FLAGS[@]}")
platform="$(tprimat_resolve_platform)" || exit 2
export PLATFORM="$platform"

output_dir="$(tprimat_config_get OUTPUT_DIR)" || exit 2
node_rank="$(tprimat_config_get NODE_RANK)" || exit 2
nnodes="$(tprimat_config_get NNODES)" || exit 2
history_db="$(tprimat_config_get HISTORY_DB)" || exit 2
jobs_text="$("$TPRIMAT_PYTHON" -m train.launch.jobs --platform "$platform")" || exit 2
mapfile -t jobs <<<"$jobs_text"
if [[ ${#jobs[@]} -eq 0 || -z "${jobs[0]}" ]]; then
    echo "train.sh: no jobs selected for platform $platform" >&2
    exit 2
fi

dry_run=0
tprimat_flag --dry-run && dry_run=1
if [[ $dry_run -eq 0 ]]; then
    # One line and no job at all when results cannot be written (not a directory, read-only, full), when a
    # setting cannot run on this platform, or when the rendezvous address does not resolve.
    tprimat_python_module utils.files.disk check-output || exit $?
    tprimat_python_module utils.config.load --before-launch "$platform" || exit $?
    # A GPU platform on a host without its GPU: every job would fail after its start-up (issue 33).
    tprimat_python_module utils.machine.hardware --check-devices "$platform" || exit $?
    tprimat_python_module utils.machine.rendezvous || exit $?
fi
# Each job's "<result><TAB><exit code>", kept in memory: no temporary file (a missing or full TMPDIR made an ok
# job read as "not run", issue 33), and nothing left behind outside OUTPUT_DIR.
codes=()
echo "train.sh: platform $platform, ${#jobs[@]} job(s), results in $output_dir"

number=0
for line in "${jobs[@]}"; do
    if [[ -n "$TPRIMAT_SIGNAL" && $number -gt 0 ]]; then
        echo "train.sh: stopped by SIG$TPRIMAT_SIGNAL; $((${#jobs[@]} - number)) job(s) not started" >&2
        break
    fi
    IFS=$'\t' read -r job_platform framework model run_index script result <<<"$line"
    number=$((number + 1))
    run_args=()
    label="$job_platform/$framework/$model"
    if [[ "$run_index" != "-" ]]; then
        run_args=(--run-index "$run_index")
        label="$label run $run_index"
    fi
    echo "=== [$number/${#jobs[@]}] $label: bash ${script#"$TPRIMAT_ROOT"/}"
    run_id=""
    # One node's run ids would drop another node's writes to a shared OUTPUT_DIR: single-node runs only.
    if [[ $dry_run -eq 0 && "$nnodes" == "1" ]]; then
        run_id="$(cat /proc/sys/kernel/random/uuid 2>/dev/null || echo "$$-$number-$RANDOM")"
        owner_args=(--platform "$job_platform" --framework "$framework" --model "$model")
        [[ "$run_index" == "-" ]] || owner_args+=(--run-index "$run_index")
        # The previous job's processes are gone (run_owner end); give its port a bounded time to be freed.
        [[ $number -eq 1 ]] || owner_args+=(--wait-port 30)
        # The result's lock belongs to the open file on descriptor 8, which this shell keeps from the claim to the
        # run's end; the launcher finds it there (TPRIMAT_LOCK_FDS, utils/files/locks.py).
        lock_file="$(tprimat_python_module utils.files.locks path result "$result")" && exec 8<>"$lock_file" \
            && tprimat_python_module utils.files.run_owner start --result "$result" --run-id "$run_id" \
                --lock-fd 8 --holder-pid "$$" "${owner_args[@]}"
        started=$?
        if [[ $started -ne 0 ]]; then
            exec 8>&-
            # Refused (another run holds the result, or it cannot be written): this job does not run, and this
            # run closes nothing, so the holder's result stays its own (issue 33).
            echo "train.sh: $label: not started, the result is not this run's to write; continuing" >&2
            codes+=("$result"$'\t'"1")
            continue
        fi
    fi
    if [[ -n "$TPRIMAT_SIGNAL" ]]; then
        # Stopped before the first job started: its result says so (the others are listed as not started).
        code="$(tprimat_signal_status)"
    else
        tprimat_run env TPRIMAT_RUN_ID="$run_id" ${run_id:+TPRIMAT_LOCK_FDS=8} bash "$script" "${run_args[@]}" \
            "${launcher_args[@]}"
        code=$?
    fi
    if [[ -n "$run_id" ]]; then
        tprimat_python_module utils.files.run_owner end --result "$result" --run-id "$run_id" --lock-fd 8 \
            ${TPRIMAT_SIGNAL:+--signal "$TPRIMAT_SIGNAL"}
        exec 8>&-
    fi
    # The results database (HISTORY_DB; evaluate/history/): every result, ok, incomplete or failed, after its job.
    if [[ $dry_run -eq 0 && -f "$result" && ! "${history_db,,}" =~ ^(off|none|false|0)$ ]]; then
        [[ -z "$TPRIMAT_SIGNAL" ]] && tprimat_run "$TPRIMAT_PYTHON" -m evaluate.history add --quiet "$result" \
            || echo "train.sh: $label: the result was not added to the history database; it stays in $output_dir" >&2
    fi
    if [[ -n "$TPRIMAT_SIGNAL" ]]; then
        echo "train.sh: $label stopped by SIG$TPRIMAT_SIGNAL (exit $code)" >&2
    elif [[ $code -ne 0 ]]; then
        echo "train.sh: $label exited with $code; continuing with the next job" >&2
    fi
    codes+=("$result"$'\t'"$code")
done

if [[ $dry_run -eq 1 ]]; then
    # Nothing was trained: a result file found now is an older run's and says nothing about this one.
    failed=0
    for line in "${codes[@]}"; do
        [[ "${line##*$'\t'}" == "0" ]] || failed=1
    done
    echo "train.sh: dry run, skipping the comparison; ${#jobs[@]} launch plan(s) shown, nothing trained"
    exit "$failed"
elif [[ -n "$TPRIMAT_SIGNAL" ]]; then
    echo "train.sh: stopped by SIG$TPRIMAT_SIGNAL, skipping the comparison" >&2
elif [[ "$node_rank" != "0" ]]; then
    echo "train.sh: NODE_RANK=$node_rank; node 0 writes the results and runs the comparison"
elif [[ -f "$TPRIMAT_ROOT/evaluate/compare.py" ]]; then
    tprimat_run "$TPRIMAT_PYTHON" -m evaluate.compare --results-dir "$output_dir" \
        || echo "train.sh: evaluate.compare failed (exit $?); the results are still in $output_dir" >&2
    # The page a person opens (evaluate/report_html/): written even when compare refuses, saying NOT FAIR and why.
    [[ -n "$TPRIMAT_SIGNAL" ]] || tprimat_run "$TPRIMAT_PYTHON" -m evaluate.report_html --results-dir "$output_dir" \
        || echo "train.sh: evaluate.report_html failed (exit $?); compare.md and the results are in $output_dir" >&2
else
    echo "train.sh: evaluate/compare.py is not present; skipping the comparison" >&2
fi

echo
if [[ "$node_rank" != "0" ]]; then
    # Results live on node 0; here only the exit codes mean anything.
    failed=0
    for line in "${codes[@]}"; do
        result="${line%$'\t'*}"
        code="${line##*$'\t'}"
        echo "exit $code  ${result#"$output_dir"/}"
        [[ "$code" == "0" ]] || failed=1
    done
    [[ -z "$TPRIMAT_SIGNAL" ]] || exit "$(tprimat_signal_status)"
    exit "$failed"
fi
"$TPRIMAT_PYTHON" -m train.launch.jobs --platform "$platform" --summary <(printf '%s\n' "${codes[@]}")
summary_rc=$?
[[ $summary_rc -le 1 ]] || echo "train.sh: could not print the summary (exit $summary_rc)" >&2
[[ -z "$TPRIMAT_SIGNAL" ]] || exit "$(tprimat_signal_status)"
exit $((summary_rc == 0 ? 0 : 1))
