#!/usr/bin/env bash
# Remove what tprimat generated: Python and tool caches, OUTPUT_DIR's contents, output.zip and
# leftover temp files; with --with-data also DATA_DIR's contents. Every target goes through
# tprimat_safe_target (shell/paths.sh), which refuses empty, '/', home, '..' and out-of-repo paths.
set -uo pipefail

usage() {
    cat <<'USAGE'
Usage: shell/purge.sh [--with-data] [--dry-run]
Removes __pycache__/.pytest_cache/.ruff_cache, *.tmp files, the contents of OUTPUT_DIR and output.zip.
  --with-data   also remove the contents of DATA_DIR (datasets and tokenizers)
  --dry-run     list what would be removed, remove nothing
USAGE
}

with_data=0
dry_run=0
for arg in "$@"; do
    case "$arg" in
        -h|--help) usage; exit 0 ;;
        --with-data) with_data=1 ;;
        --dry-run) dry_run=1 ;;
        *) echo "purge.sh: unknown argument '$arg'" >&2; usage >&2; exit 2 ;;
    esac
done

# shellcheck source=platform.sh
source "$(dirname "${BASH_SOURCE[0]}")/platform.sh"
# shellcheck source=paths.sh
source "$TPRIMAT_ROOT/shell/paths.sh"
cd "$TPRIMAT_ROOT" || exit 2

# A raw '..' in the environment is refused before the config loader resolves it away.
for key in OUTPUT_DIR DATA_DIR; do
    if [[ -n "${!key:-}" && "${!key}" =~ (^|/)\.\.(/|$) ]]; then
        echo "purge.sh: refusing $key='${!key}': '..' components are not allowed" >&2
        exit 1
    fi
done

output_dir="$(tprimat_config_get OUTPUT_DIR)" || exit 2
output_dir="$(tprimat_safe_target OUTPUT_DIR "$output_dir")" || exit 1
tprimat_refuse_project_dir OUTPUT_DIR "$output_dir" || exit 1
targets=()
if [[ $with_data -eq 1 ]]; then
    data_dir="$(tprimat_config_get DATA_DIR)" || exit 2
    data_dir="$(tprimat_safe_target DATA_DIR "$data_dir")" || exit 1
    tprimat_refuse_project_dir DATA_DIR "$data_dir" || exit 1
fi

# Contents of a directory, keeping the directory itself (it may be a mount point) and .gitkeep.
collect_contents() {
    [[ -d "$1" ]] || return 0
    local entry
    while IFS= read -r -d '' entry; do
        targets+=("$entry")
    done < <(find "$1" -mindepth 1 -maxdepth 1 ! -name .gitkeep -print0)
}

collect_contents "$output_dir"
[[ $with_data -eq 1 ]] && collect_contents "$data_dir"
for file in "$TPRIMAT_ROOT/output.zip" "$TPRIMAT_ROOT"/output.zip.*; do
    [[ -e "$file" ]] && targets+=("$file")
done
while IFS= read -r -d '' entry; do
    targets+=("$entry")
done < <(find "$TPRIMAT_ROOT" \( -path "$TPRIMAT_ROOT/.venv" -o -path "$TPRIMAT_ROOT/.git" \
            -o -path "$output_dir" -o -path "${data_dir:-$output_dir}" \) -prune \
         -o \( -type d \( -name __pycache__ -o -name .pytest_cache -o -name .ruff_cache \) -prune -print0 \) \
         -o \( -type f \( -name '*.tmp' -o -name '*.partial' \) -print0 \))

if [[ ${#targets[@]} -eq 0 ]]; then
    echo "purge.sh: nothing to remove"
    exit 0
fi
for target in "${targets[@]}"; do
    # Every single target is re-checked, so a bug above can never widen what is deleted.
    tprimat_safe_target target "$target" >/dev/null || exit 1
    if [[ $dry_run -eq 1 ]]; then
        echo "would remove ${target#"$TPRIMAT_ROOT"/}"
    else
        rm -rf -- "$target" || exit 1
    fi
done
[[ $dry_run -eq 1 ]] || echo "purge.sh: removed ${#targets[@]} item(s)"
