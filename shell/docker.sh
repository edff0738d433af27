#!/usr/bin/env bash
# Sourced by build.sh, run_<step>.sh and entry.sh: the one place that decides how a tprimat
# container is started, so every step gets identical devices, mounts and environment.
# Needs platform.sh to be sourced first; sources jobctl.sh (signals reach the step it runs).
# shellcheck shell=bash

# A library: sourced by the scripts above, never run on its own.
# shellcheck source=sourced_only.sh
source "$(dirname "${BASH_SOURCE[0]}")/sourced_only.sh"

# shellcheck source=jobctl.sh
source "$TPRIMAT_ROOT/shell/jobctl.sh"
TPRIMAT_CONTAINER=""

TPRIMAT_CONTAINER_ROOT=/workspace/code          # the image's WORKDIR; the repo is mounted here
TPRIMAT_CONTAINER_DATA=/data/tprimat            # utils/config/load.py's DATA_DIR inside containers
TPRIMAT_CONTAINER_HF=/root/.cache/huggingface   # HF_HOME inside containers
TPRIMAT_CONTAINER_OUTPUT=/output/tprimat        # used only when OUTPUT_DIR lies outside the repo

# Host variables forwarded into the container by name (their values never appear in argv):
# communication and runtime tuning, and device selection. Config keys and HF_TOKEN travel in the
# env file Python writes (tprimat_write_env_file), never as argv.
TPRIMAT_FORWARD_PREFIXES=(NCCL_ RCCL_ HSA_ HIP_ NVTE_ TORCH_ PYTORCH_ CUDA_ ROCR_ UCX_ GLOO_)
TPRIMAT_FORWARD_NAMES=(OMP_NUM_THREADS)

# Write the --env-file for `docker run` into a fresh mode-0600 temp file named by
# TPRIMAT_DOCKER_ENV_FILE: the effective config (config.env + environment, validated, GBS left
# derived) and HF_TOKEN from the one secrets loader (environment, else secrets.env), rendered by
# utils/config/load.py as plain KEY=value lines. docker keeps quotes, `export` and comments of an
# env file literally, so neither config.env nor secrets.env is ever handed to docker as is.
# The caller removes the file (trap) once docker has read it.
tprimat_write_env_file() {
    TPRIMAT_DOCKER_ENV_FILE="$(mktemp "${TMPDIR:-/tmp}/tprimat-docker.env.XXXXXX")" || return 2
    tprimat_python_module utils.config.load --docker-env-file "$TPRIMAT_DOCKER_ENV_FILE" || return 2
}

tprimat_image() {
    echo "tprimat:$1"
}

# True when a Docker engine answers. DOCKER_INFO_TIMEOUT bounds a hung daemon socket.
tprimat_docker_ready() {
    command -v docker >/dev/null 2>&1 || return 1
    timeout "${DOCKER_INFO_TIMEOUT:-20}" docker info >/dev/null 2>&1
}

# Device and isolation flags of a platform (docs/DOCKER.md's table). SYS_PTRACE on amd lets
# `rocprofv3 --attach` reach the training process (docs/DOCKER.md).
tprimat_device_flags() {
    case "$1" in
        nvd) TPRIMAT_DEVICE_FLAGS=(--gpus all) ;;
        amd) TPRIMAT_DEVICE_FLAGS=(--device=/dev/kfd --device=/dev/dri --group-add video
                                   --security-opt seccomp=unconfined --cap-add=SYS_PTRACE) ;;
        *) echo "docker.sh: no container flags for platform '$1'" >&2; return 2 ;;
    esac
}

# Fill TPRIMAT_DOCKER_ARGV with `docker run ...` for platform $1; the remaining arguments are the
# command to run inside the container. Set TPRIMAT_INTERACTIVE=1 for an interactive shell.
tprimat_docker_run_argv() {
    local platform="$1"
    shift
    local data_dir output_dir hf_home name prefix
    data_dir="$(tprimat_config_get DATA_DIR)" || return 2
    output_dir="$(tprimat_config_get OUTPUT_DIR)" || return 2
    hf_home="$(tprimat_config_get HF_HOME)" || return 2
    [[ -n "$hf_home" ]] || hf_home="${XDG_CACHE_HOME:-$HOME/.cache}/huggingface"
    tprimat_device_flags "$platform" || return 2
    # Create the mount sources as this user; docker would create missing ones owned by root.
    mkdir -p "$data_dir" "$output_dir" "$hf_home" || return 2

    TPRIMAT_DOCKER_ARGV=(run --rm)
    if [[ "${TPRIMAT_INTERACTIVE:-0}" == 1 ]]; then
        TPRIMAT_DOCKER_ARGV+=(-it)
    elif [[ -t 1 ]]; then
        TPRIMAT_DOCKER_ARGV+=(-t)
    fi
    TPRIMAT_DOCKER_ARGV+=("${TPRIMAT_DEVICE_FLAGS[@]}")
    # Host IPC and network for NCCL/RCCL (shared memory between ranks, and multi-node rendezvous);
    # unlimited locked memory and a 64 MiB stack as the vendors' PyTorch containers recommend.
    TPRIMAT_DOCKER_ARGV+=(--ipc=host --network=host --shm-size=16g
                          --ulimit memlock=-1 --ulimit stack=67108864)
    TPRIMAT_DOCKER_ARGV+=(-v "$TPRIMAT_ROOT:$TPRIMAT_CONTAINER_ROOT"
                          -v "$data_dir:$TPRIMAT_CONTAINER_DATA"
                          -v "$hf_home:$TPRIMAT_CONTAINER_HF")
    local container_output
    case "$output_dir/" in
        "$TPRIMAT_ROOT"/*) container_output="$TPRIMAT_CONTAINER_ROOT/${output_dir#"$TPRIMAT_ROOT"/}" ;;
        *) container_output="$TPRIMAT_CONTAINER_OUTPUT"
           TPRIMAT_DOCKER_ARGV+=(-v "$output_dir:$TPRIMAT_CONTAINER_OUTPUT") ;;
    esac
    container_output="${container_output%/}"
    TPRIMAT_DOCKER_ARGV+=(-w "$TPRIMAT_CONTAINER_ROOT")
    tprimat_write_env_file || return 2
    TPRIMAT_DOCKER_ARGV+=(--env-file "$TPRIMAT_DOCKER_ENV_FILE")
    while IFS= read -r name; do
        for prefix in "${TPRIMAT_FORWARD_PREFIXES[@]}"; do
            [[ "$name" == "$prefix"* ]] && TPRIMAT_DOCKER_ARGV+=(-e "$name") && break
        done
    done < <(compgen -e | sort)
    for name in "${TPRIMAT_FORWARD_NAMES[@]}"; do
        [[ -n "${!name+set}" ]] && TPRIMAT_DOCKER_ARGV+=(-e "$name")
    done
    TPRIMAT_DOCKER_ARGV+=(-e "PLATFORM=$platform"
                          -e "DATA_DIR=$TPRIMAT_CONTAINER_DATA"
                          -e "OUTPUT_DIR=$container_output"
                          -e "HF_HOME=$TPRIMAT_CONTAINER_HF"
                          "$(tprimat_image "$platform")" "$@")
}

# Run shell/<step>.sh inside tprimat:<platform>, or natively on cpu / without a Docker engine.
# The container's exit status is returned unchanged.
tprimat_run_step() {
    local step="$1"
    shift
    local platform rc
    if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
        tprimat_run_usage "run_$step.sh [shell/$step.sh options]" "shell/$step.sh"
        return 0
    fi
    platform="$(tprimat_resolve_platform)" || return 2
    tprimat_trap_signals
    if [[ "$platform" == cpu ]]; then
        echo "run_$step.sh: platform cpu has no container; running shell/$step.sh natively"
        tprimat_run bash "$TPRIMAT_ROOT/shell/$step.sh" "$@"
        return $?
    fi
    if ! tprimat_docker_ready; then
        echo "run_$step.sh: no Docker engine answers (docker info failed); running shell/$step.sh natively"
        PLATFORM="$platform" tprimat_run bash "$TPRIMAT_ROOT/shell/$step.sh" "$@"
        return $?
    fi
    tprimat_require_image "$platform" || return $?
    trap 'rm -f "${TPRIMAT_DOCKER_ENV_FILE:-}"' EXIT
    tprimat_docker_run_argv "$platform" bash "shell/$step.sh" "$@" || return $?
    # A named container, so that a signal to this script reaches the step inside it (docker kill),
    # whether or not the docker client proxies signals (it does not with -t).
    TPRIMAT_CONTAINER="tprimat-$step-$$"
    TPRIMAT_DOCKER_ARGV=(run --name "$TPRIMAT_CONTAINER" "${TPRIMAT_DOCKER_ARGV[@]:1}")
    trap '_tprimat_stop_container INT' INT
    trap '_tprimat_stop_container TERM' TERM
    echo "run_$step.sh: running shell/$step.sh in $(tprimat_image "$platform")"
    docker "${TPRIMAT_DOCKER_ARGV[@]}" &
    local pid=$!
    while kill -0 "$pid" 2>/dev/null; do  # `wait` returns early when a trapped signal arrives
        wait "$pid"
    done
    wait "$pid"
    rc=$?
    if [[ -n "$TPRIMAT_SIGNAL" && $rc -eq 0 ]]; then
        rc="$(tprimat_signal_status)"
    fi
    if [[ $rc -ne 0 ]]; then
        echo "run_$step.sh: the container exited with status $rc" >&2
    fi
    return "$rc"
}

# INT/TERM while a step runs in its container: pass the signal to the container's step (shell/<step>.sh
# forwards it to its jobs, which record themselves incomplete), then wait for the container to end.
_tprimat_stop_container() {
    [[ -n "$TPRIMAT_SIGNAL" ]] || TPRIMAT_SIGNAL="$1"
    echo "run: $1 received; stopping container $TPRIMAT_CONTAINER" >&2
    docker kill --signal="$1" "$TPRIMAT_CONTAINER" >/dev/null 2>&1 || true
}

# The --help text every container entry point shares: usage line ($1) and what runs inside ($2).
tprimat_run_usage() {
    cat <<USAGE
Usage: shell/$1
Runs $2 in tprimat:<platform> (see docs/DOCKER.md); on cpu, or when no Docker engine answers, natively.
The platform is PLATFORM from the environment, else from config.env, else detected
(python -m utils.machine.hardware --platform; amd: /dev/kfd plus amd-smi or rocm-smi, or a ROCm torch;
nvd: a working nvidia-smi, or a CUDA torch that sees a GPU; else cpu).
The container gets the platform's devices, --ipc=host, the repository, DATA_DIR and the Hugging Face
cache mounted, and one env file written by python -m utils.config.load --docker-env-file: every
effective config key (config.env + environment overrides, validated; GBS left derived) and HF_TOKEN
(environment, else secrets.env). Neither config.env nor secrets.env is handed to docker as is.
USAGE
}

tprimat_require_image() {
    local image
    image="$(tprimat_image "$1")"
    if ! docker image inspect "$image" >/dev/null 2>&1; then
        echo "docker.sh: image $image not found; build it first with ./shell/build.sh" >&2
        return 1
    fi
}
