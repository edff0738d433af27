#!/usr/bin/env bash
# The README's test command: set up .venv when needed, lint, then run the whole offline suite.
# The shell and Dockerfile linters run inside pytest (tests/house/test_lint_shell.py). Extra arguments go to pytest.
# Hermetic: every build and cache folder the suite writes is this checkout's own .cache/ (the table is
# tests/helpers/hermetic.py; tests/house/test_hermetic.py holds this list equal to it), so two clones on one
# machine never share a half-built DeepSpeed op (issue 20) and a second run here reuses the first's build.
set -euo pipefail

usage() {
    cat <<'USAGE'
Usage: shell/test.sh [--env] [pytest arguments...]
Creates/refreshes .venv (shell/setup.sh), runs `ruff check`, then pytest over tests/, with every
build and cache folder (TORCH_EXTENSIONS_DIR, HF_HOME, MPLCONFIGDIR, XDG_CACHE_HOME, ...) inside
this checkout's .cache/. pytest runs three workers (pytest-xdist `-n 3 --dist loadfile`: a test
file stays on one worker, so its module fixtures are built once; the slowest files are handed out
first, tests/helpers/suite_order.py); `-n 0` runs it in one process.
  --env   print those cache variables as NAME=value lines and exit (runs nothing)
Examples: shell/test.sh -x -q        shell/test.sh tests/unit/config/test_configure.py -k gbs
USAGE
}

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="$root/.cache"
hermetic=(
    "TORCH_EXTENSIONS_DIR=$cache/torch_extensions"
    "TRITON_CACHE_DIR=$cache/triton"
    "TORCHINDUCTOR_CACHE_DIR=$cache/torchinductor"
    "HF_HOME=$cache/huggingface"
    "MPLCONFIGDIR=$cache/matplotlib"
    "XDG_CACHE_HOME=$cache/xdg"
)

case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    --env) printf '%s\n' "${hermetic[@]}"; exit 0 ;;
esac

# setup.sh first, outside the table: pip's download cache may stay shared (it is safe to share, and
# a clone need not fetch torch again).
"$root/shell/setup.sh"
export "${hermetic[@]}"
cd "$root"
echo "test: ruff check"
.venv/bin/ruff check .
echo "test: pytest (caches in $cache)"
# Three workers on the 2-core machine: most tests wait on the jobs and probes they start, and two workers kept the
# cores busy 121% of the suite's time, three 192% (two fresh-clone runs; docs/PERFORMANCE.md, "The test suite").
# --no-loadscope-reorder: the slowest files go to the workers first (tests/helpers/suite_order.py), not last.
exec .venv/bin/python -m pytest -n 3 --dist loadfile --no-loadscope-reorder "$@"
