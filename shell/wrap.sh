#!/usr/bin/env bash
# Pack OUTPUT_DIR into output.zip at the repository root (visible on the host after run_wrap.sh).
# Refuses when the output holds a secrets file or the value of a secret (HF_TOKEN from the
# environment or secrets.env): results must be shareable as they are.
set -uo pipefail

if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
    echo "Usage: shell/wrap.sh   (zips OUTPUT_DIR into output.zip; refuses if it contains a secret)"
    exit 0
fi
if [[ $# -gt 0 ]]; then
    echo "wrap.sh: unknown argument '$1'" >&2
    exit 2
fi
# shellcheck source=platform.sh
source "$(dirname "${BASH_SOURCE[0]}")/platform.sh"
cd "$TPRIMAT_ROOT" || exit 2

output_dir="$(tprimat_config_get OUTPUT_DIR)" || exit 2
if [[ ! -d "$output_dir" ]] || [[ -z "$(find "$output_dir" -type f ! -name .gitkeep -print -quit)" ]]; then
    echo "wrap.sh: $output_dir has no results to pack; run ./shell/run_train.sh first" >&2
    exit 1
fi

leaked="$(find "$output_dir" -type f \( -name 'secrets.env' -o -name '*.env' \) -print)"
if [[ -n "$leaked" ]]; then
    echo "wrap.sh: refusing to pack env files (they may hold secrets):" >&2
    echo "$leaked" >&2
    exit 1
fi
# Secret values: HF_TOKEN from the environment and every value in secrets.env (quotes stripped).
secret_values=()
[[ -n "${HF_TOKEN:-}" ]] && secret_values+=("$HF_TOKEN")
if [[ -f "$TPRIMAT_ROOT/secrets.env" ]]; then
    while IFS= read -r value; do
        value="${value%\"}"; value="${value#\"}"; value="${value%\'}"; value="${value#\'}"
        secret_values+=("$value")
    done < <(sed -n -E 's/^[[:space:]]*(export[[:space:]]+)?[A-Za-z_][A-Za-z0-9_]*=(.*)$/\2/p' "$TPRIMAT_ROOT/secrets.env")
fi
for value in "${secret_values[@]}"; do
    [[ ${#value} -ge 8 ]] || continue   # too short to be a token; would match by accident
    hits="$(grep -rlF -e "$value" "$output_dir")"
    if [[ -n "$hits" ]]; then
        echo "wrap.sh: refusing to pack: these files contain a secret value (not shown):" >&2
        echo "$hits" >&2
        exit 1
    fi
done

archive="$TPRIMAT_ROOT/output.zip"
partial="$(mktemp "$archive.XXXXXX")" || exit 1
trap 'rm -f "$partial"' EXIT
rm -f "$partial"   # zipfile creates it; mktemp only reserved a unique name
"$TPRIMAT_PYTHON" -m zipfile -c "$partial" "$output_dir" || { echo "wrap.sh: zipping failed" >&2; exit 1; }
mv -f "$partial" "$archive" || exit 1
echo "wrap.sh: wrote $archive ($(find "$output_dir" -type f | wc -l) files, $(du -h "$archive" | cut -f1))"
