#!/usr/bin/env bash
# Create or refresh the local virtualenv (.venv) for the `cpu` platform and the tests.
# Idempotent: skips the install when the requirement files have not changed.
# torch is installed first and alone as the CPU wheel, so no later requirement can pull a CUDA build.
set -euo pipefail

usage() {
    cat <<'USAGE'
Usage: shell/setup.sh [--force]
Creates .venv in the repository root with the pinned CPU stack (torch==2.13.0 CPU,
cpu-requirements.txt, test-requirements.txt). Re-runs only when those files change.
  --force   reinstall even if nothing changed
USAGE
}

# shellcheck source=flags.sh
source "$(dirname "${BASH_SOURCE[0]}")/flags.sh" setup.sh --force -- "$@"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
python="${PYTHON:-python3}"
torch_spec="torch==2.13.0"
stamp="$venv/.tprimat-requirements"
wanted="$(cat "$root/cpu-requirements.txt" "$root/test-requirements.txt"; echo "$torch_spec")"

if ! tprimat_flag --force && [[ -f "$stamp" && "$(cat "$stamp")" == "$wanted" && -x "$venv/bin/python" ]]; then
    echo "setup: .venv is up to date"
    exit 0
fi

echo "setup: creating $venv with $("$python" --version 2>&1)"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
echo "setup: installing $torch_spec (CPU build)"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$torch_spec"
echo "setup: installing cpu-requirements.txt and test-requirements.txt"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r "$root/cpu-requirements.txt" -r "$root/test-requirements.txt" "$torch_spec"
if ! "$venv/bin/python" -c 'import sys, torch; sys.exit(0 if torch.version.cuda is None else 1)'; then
    echo "setup: a CUDA build of torch was installed; expected the CPU wheel" >&2
    exit 1
fi
printf '%s' "$wanted" > "$stamp"
echo "setup: done ($("$venv/bin/python" -c 'import torch; print("torch", torch.__version__)'))"
