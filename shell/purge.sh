#!/usr/bin/env bash
# Remove what tprimat generated, and nothing else: results, logs, generated configs, traces, the
# comparison, locks and temporary files in OUTPUT_DIR, output.zip and caches in the repository; with
# --with-data also the data stages' files in DATA_DIR; with --with-history also the results database
# (HISTORY_DB, when it is tprimat's SQLite history file). Python decides what that is (utils/files/purge.py,
# by the names tprimat's writers give their files, under roots it refuses when they cannot be an
# output or data folder: /, home, the repository, .git, a virtualenv, the project's own folders).
set -uo pipefail
# shellcheck source=platform.sh
source "$(dirname "${BASH_SOURCE[0]}")/platform.sh"
cd "$TPRIMAT_ROOT" || exit 2
# It removes the repository's Python caches, so its own run writes none (platform.sh lets the .venv's write them).
PYTHONDONTWRITEBYTECODE=1 exec "$TPRIMAT_PYTHON" -m utils.files.purge "$@"
