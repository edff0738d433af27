#!/usr/bin/env bash
# Build tprimat:<platform> from <platform>.Dockerfile for the detected (or PLATFORM=) platform.
# cpu builds nothing: the local virtualenv is its environment.
set -uo pipefail

usage() {
    cat <<'USAGE'
Usage: shell/build.sh [docker build options...]
Builds tprimat:amd from amd.Dockerfile or tprimat:nvd from nvd.Dockerfile for the platform:
PLATFORM from the environment, else from config.env, else detected (python -m utils.hardware
--platform). Extra arguments go to `docker build`, e.g. --no-cache or --pull.
No secret enters the image: .dockerignore keeps secrets.env, output/ and data_cache/ out of the context.
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
echo "build.sh: building $image from $platform.Dockerfile"
docker build -f "$dockerfile" -t "$image" "$@" "$TPRIMAT_ROOT"
rc=$?
if [[ $rc -ne 0 ]]; then
    echo "build.sh: docker build failed with status $rc" >&2
    exit "$rc"
fi
echo "build.sh: built $image; next: ./shell/run_data.sh, then ./shell/run_train.sh"
