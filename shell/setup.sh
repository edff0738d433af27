#!/usr/bin/env bash
# Create or refresh the local virtualenv (.venv) for the `cpu` platform and the tests.
# Idempotent: skips the install when the requirement files have not changed.
# torch is installed first and alone as the CPU wheel, so no later requirement can pull a CUDA build.
# The installer is uv (pinned below) where it can be had: it installs the same pinned files in parallel, about 4
# times faster than pip on a 2-core VM (docs/PERFORMANCE.md, "The quick benchmark"); pip is the fallback
# wherever uv cannot be installed or fails. uv asks for torch's `+cpu` build, which no index but pip's own
# find-links (the local CPU wheel) holds, so it cannot fetch a CUDA build either.
set -euo pipefail

usage() {
    cat <<'USAGE'
Usage: shell/setup.sh [--force]
Creates .venv in the repository root with the pinned CPU stack (torch==2.13.0 CPU,
cpu-requirements.txt, test-requirements.txt), installed by uv (uv==0.13.9) where it can be had, else pip.
Re-runs only when those files change.
  --force   reinstall even if nothing changed
USAGE
}

# shellcheck source=flags.sh
source "$(dirname "${BASH_SOURCE[0]}")/flags.sh" setup.sh --force -- "$@"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
python="${PYTHON:-python3}"
torch_spec="torch==2.13.0"
uv_spec="uv==0.13.9"
pip_spec="pip==26.3"
stamp="$venv/.tprimat-requirements"
wanted="$(cat "$root/cpu-requirements.txt" "$root/test-requirements.txt"; echo "$torch_spec"; echo "$uv_spec"; echo "$pip_spec")"

if ! tprimat_flag --force && [[ -f "$stamp" && "$(cat "$stamp")" == "$wanted" && -x "$venv/bin/python" ]]; then
    echo "setup: .venv is up to date"
    exit 0
fi

echo "setup: creating $venv with $("$python" --version 2>&1)"
# The venv is made without pip, and uv installed into it by $python's own pip: ensurepip alone took 10 s of
# the quick benchmark's set-up on the 2-core host (docs/PERFORMANCE.md). uv then adds the venv's pip.
"$python" -m venv --without-pip "$venv"
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
uv=()
if "$python" -m pip --python "$venv/bin/python" install --quiet --disable-pip-version-check "$uv_spec" \
    && "$venv/bin/uv" pip install --quiet --python "$venv/bin/python" "$pip_spec"; then
    uv=("$venv/bin/uv" pip install --quiet --python "$venv/bin/python")
else  # no pip beside $python, or one without --python: the venv's own pip, as before uv
    "$venv/bin/python" -m ensurepip --default-pip > /dev/null
    if "${pip[@]}" "$uv_spec"; then
        uv=("$venv/bin/uv" pip install --quiet --python "$venv/bin/python")
    else  # pip does it all, at its newest
        "${pip[@]}" --upgrade pip
    fi
fi
links=()
for link in $("$venv/bin/python" -m pip config get global.find-links 2>/dev/null || true) ${PIP_FIND_LINKS:-}; do
    [[ -d "$link" ]] && links+=(--find-links "$link")
done
echo "setup: installing $torch_spec (CPU build)"
if [[ ${#uv[@]} -eq 0 ]] || ! "${uv[@]}" "${links[@]}" "$torch_spec+cpu"; then
    "${pip[@]}" "$torch_spec"
fi
echo "setup: installing cpu-requirements.txt and test-requirements.txt"
requirements=(-r "$root/cpu-requirements.txt" -r "$root/test-requirements.txt" "$torch_spec")
if [[ ${#uv[@]} -eq 0 ]] || ! "${uv[@]}" "${links[@]}" "${requirements[@]}"; then
    echo "setup: uv could not install them; pip does"
    "${pip[@]}" --upgrade pip
    "${pip[@]}" "${requirements[@]}"
fi
# one import of torch (4 s here) both checks the build and names it
if ! torch_line="$("$venv/bin/python" -c 'import sys, torch; print("torch", torch.__version__); sys.exit(torch.version.cuda is not None)')"; then
    echo "setup: a CUDA build of torch was installed; expected the CPU wheel ($torch_line)" >&2
    exit 1
fi
printf '%s' "$wanted" > "$stamp"
echo "setup: done ($torch_line)"
