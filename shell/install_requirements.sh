#!/usr/bin/env bash
# Used by amd.Dockerfile and nvd.Dockerfile: install the pinned requirement lines whose package the
# base image does NOT already provide, under a constraint file frozen from the base image.
# So the vendor's torch (ROCm/CUDA build), megatron-core, Transformer Engine, Primus/NeMo and
# everything they depend on keep exactly the versions the vendor tested; a requirement that
# would need to change one of them fails the build loudly instead of replacing it.
#   PYTHON=python3 shell/install_requirements.sh <requirements.txt>
set -euo pipefail

if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
    echo "Usage: [PYTHON=python3] shell/install_requirements.sh <requirements.txt>"
    echo "Installs the pinned lines whose package the image lacks, under constraints frozen from the image."
    exit 0
fi
requirements="${1:?usage: install_requirements.sh <requirements.txt>}"
if [[ ! -r "$requirements" ]]; then
    echo "install_requirements: cannot read $requirements" >&2
    exit 2
fi
python="${PYTHON:-python3}"
workdir="$(mktemp -d)"
trap 'rm -rf "$workdir"' EXIT

# PEP 503 name normalization: lower case, runs of -_. become one '-'.
normalize() {
    tr '[:upper:]' '[:lower:]' | sed -E 's/[-_.]+/-/g'
}

# The base image's packages as name==version constraints (lines pip cannot parse are dropped).
"$python" -m pip list --disable-pip-version-check --format=freeze 2>/dev/null \
    | grep -E '^[A-Za-z0-9][A-Za-z0-9._-]*==[0-9][A-Za-z0-9.+!_-]*$' >"$workdir/base-constraints.txt" || true
sed -E 's/==.*$//' "$workdir/base-constraints.txt" | normalize | sort -u >"$workdir/base-names.txt"

: >"$workdir/missing.txt"
while IFS= read -r line || [[ -n "$line" ]]; do
    line="${line%%#*}"
    line="$(echo "$line" | xargs)"
    [[ -n "$line" ]] || continue
    name="$(echo "$line" | sed -E 's/[[:space:]]*([<>=!~;[].*)?$//' | normalize)"
    if grep -qxF "$name" "$workdir/base-names.txt"; then
        have="$(grep -iE "^${name//-/[-_.]}==" "$workdir/base-constraints.txt" | head -n 1)"
        echo "install_requirements: keeping the base image's ${have:-$name} (tprimat would pin $line)"
    else
        echo "$line" >>"$workdir/missing.txt"
    fi
done <"$requirements"

if [[ ! -s "$workdir/missing.txt" ]]; then
    echo "install_requirements: the base image already provides everything in $requirements"
    exit 0
fi
echo "install_requirements: installing $(tr '\n' ' ' <"$workdir/missing.txt")"
"$python" -m pip install --no-cache-dir --disable-pip-version-check \
    -c "$workdir/base-constraints.txt" -r "$workdir/missing.txt"
