#!/usr/bin/env bash
# The README's test command: set up .venv when needed, lint, then run the whole offline suite.
# The shell and Dockerfile linters run inside pytest (tests/test_lint_shell.py). Extra arguments go to pytest.
set -euo pipefail

if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
    cat <<'USAGE'
Usage: shell/test.sh [pytest arguments...]
Creates/refreshes .venv (shell/setup.sh), runs `ruff check`, then pytest over tests/.
Examples: shell/test.sh -x -q        shell/test.sh tests/test_configure.py -k gbs
USAGE
    exit 0
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/shell/setup.sh"
cd "$root"
echo "test: ruff check"
.venv/bin/ruff check .
echo "test: pytest"
exec .venv/bin/python -m pytest "$@"
