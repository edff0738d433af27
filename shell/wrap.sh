#!/usr/bin/env bash
# Pack OUTPUT_DIR into output.zip at the repository root (visible on the host after run_wrap.sh).
# Python does it (utils/files/wrap.py): links are never followed, and it refuses env files and any file
# containing a secret (HF_TOKEN exactly as utils/config/secret.py reads it), naming the file, never
# the value: results must be shareable as they are.
set -uo pipefail
# shellcheck source=platform.sh
source "$(dirname "${BASH_SOURCE[0]}")/platform.sh"
cd "$TPRIMAT_ROOT" || exit 2
exec "$TPRIMAT_PYTHON" -m utils.files.wrap "$@"
