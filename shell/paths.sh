#!/usr/bin/env bash
# Sourced by purge.sh and wrap.sh: the guard every destructive path goes through.
# Needs platform.sh (TPRIMAT_ROOT) to be sourced first.
# shellcheck shell=bash

# tprimat_safe_target LABEL PATH: print the resolved PATH when it is safe to empty, else explain
# and fail. Refused: an empty value, any '..' component, '/', the repository itself, the home
# directory or any directory that contains the repository or home. Allowed: paths strictly
# inside the repository, and inside a container the data mount (/data/tprimat) and below.
tprimat_safe_target() {
    local label="$1" raw="$2" resolved home root
    if [[ -z "$raw" ]]; then
        echo "refusing $label: the path is empty" >&2
        return 1
    fi
    if [[ "$raw" =~ (^|/)\.\.(/|$) ]]; then
        echo "refusing $label='$raw': '..' components are not allowed" >&2
        return 1
    fi
    resolved="$(realpath -m -- "$raw")" || return 1
    root="$(realpath -m -- "$TPRIMAT_ROOT")"
    home="$(realpath -m -- "${HOME:-/root}")"
    if [[ "$resolved" == / ]]; then
        echo "refusing $label='$raw': it is the filesystem root" >&2
        return 1
    fi
    if [[ "$resolved" == "$home" || "$home/" == "$resolved"/* ]]; then
        echo "refusing $label='$raw': it is the home directory or contains it" >&2
        return 1
    fi
    if [[ "$resolved" == "$root" || "$root/" == "$resolved"/* ]]; then
        echo "refusing $label='$raw': it is the repository or contains it" >&2
        return 1
    fi
    if [[ "$resolved/" == "$root"/* ]]; then
        echo "$resolved"
        return 0
    fi
    # Inside a tprimat image (utils/environment.py decides), where DATA_DIR defaults to /data/tprimat.
    if [[ "$resolved/" == /data/tprimat/* ]] && tprimat_python_module utils.environment --in-container; then
        echo "$resolved"
        return 0
    fi
    echo "refusing $label='$raw': $resolved is outside the repository $root; remove it by hand if you mean it" >&2
    return 1
}

# tprimat_refuse_project_dir LABEL DIR: fail when DIR holds the project's own files, so that
# e.g. DATA_DIR=data (the data/ package) or OUTPUT_DIR=docs is never emptied like an output.
# Tracked files (git, .gitkeep aside) decide; without git, any *.py or *.sh near the top does.
tprimat_refuse_project_dir() {
    local label="$1" dir="$2" found
    [[ -d "$dir" ]] || return 0
    if found="$(git -C "$TPRIMAT_ROOT" ls-files -- "$dir" 2>/dev/null)"; then
        found="$(grep -v -m 1 -E '(^|/)\.gitkeep$' <<<"$found")"
    else
        found="$(find "$dir" -maxdepth 2 -type f \( -name '*.py' -o -name '*.sh' \) -print -quit)"
    fi
    if [[ -n "$found" ]]; then
        echo "refusing $label='$dir': it holds the project's own files (e.g. $found), not generated ones" >&2
        return 1
    fi
}
