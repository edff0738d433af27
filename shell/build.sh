#!/usr/bin/env bash
# Build tprimat:<platform> from <platform>.Dockerfile for the detected (or PLATFORM=) platform.
# cpu builds nothing: the local virtualenv is its environment. The build context is code only, made by
# python -m utils.files.build_context in a temporary folder: .dockerignore applied, and the configured
# DATA_DIR, OUTPUT_DIR and HF_HOME left out wherever they lie in the repository, so no data, result or
# secret enters an image layer.
set -uo pipefail

usage() {
    cat <<'USAGE'
Usage: shell/build.sh [docker build options...]
Builds tprimat:amd from amd.Dockerfile or tprimat:nvd from nvd.Dockerfile for the platform:
PLATFORM from the environment, else from config.env, else detected (python -m utils.machine.hardware
--platform). Extra arguments go to `docker build`, e.g. --no-cache or --pull.
The image gets code only: the context is a temporary copy of the repository without what .dockerignore
excludes (secrets.env, output/, data_cache/, .git, .venv ...) and without the configured DATA_DIR,
OUTPUT_DIR and HF_HOME (python -m utils.files.build_context). Megatron-LM for `mega` is cloned into the image at
MEGATRON_REF (config.env; the same commit in both images, docs/CONFORMANCE.md).
USAGE
}
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
    usage
    exit 0
fi
# shellcheck source=platform.sh
source "$(dirname "${BASH_SOURCE[0]}")/platform.sh"
# shellcheck source=docker.sh
source "$TPRIMAT_ROOT/shell/docker.sh"
cd "$TPRIMAT_ROOT" || exit 2
platform="$(tprimat_resolve_platform)" || exit 2

if [[ "$platform" == cpu ]]; then
    echo "build.sh: platform cpu has no image; run natively instead:"
    echo "  ./shell/setup.sh && ./shell/data.sh && ./shell/train.sh"
    exit 0
fi
if ! tprimat_docker_ready; then
    echo "build.sh: no Docker engine answers (docker info failed); cannot build $(tprimat_image "$platform")" >&2
    exit 1
fi
dockerfile="$TPRIMAT_ROOT/$platform.Dockerfile"
if [[ ! -f "$dockerfile" ]]; then
    echo "build.sh: $dockerfile not found" >&2
    exit 2
fi
image="$(tprimat_image "$platform")"
context="$(mktemp -d "${TMPDIR:-/tmp}/tprimat-build-context.XXXXXX")" || exit 2
trap 'rm -rf "$context"' EXIT
tprimat_python_module utils.files.build_context "$context" || exit $?
megatron_ref="$(tprimat_config_get MEGATRON_REF)" || exit 2
echo "build.sh: building $image from $platform.Dockerfile (Megatron-LM for mega at MEGATRON_REF=$megatron_ref)"
docker build -f "$context/$platform.Dockerfile" -t "$image" --build-arg "MEGATRON_REF=$megatron_ref" "$@" "$context"
rc=$?
if [[ $rc -ne 0 ]]; then
    echo "build.sh: docker build failed with status $rc" >&2
    exit "$rc"
fi
echo "build.sh: built $image; next: ./shell/run_data.sh, then ./shell/run_train.sh"
