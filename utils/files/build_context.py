"""The Docker build context: the repository's code, and nothing the configuration points at.

Why: the images ``COPY .`` the context, and ``.dockerignore`` knows only the default folders, so an in-repo
``DATA_DIR`` or ``OUTPUT_DIR`` would be baked into the image. Links are left out and named (one could point at a
secrets file); files are hard-linked where possible.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from pathlib import Path

from utils.config.cli import exits_on_config_error
from utils.config.load import load_config
from utils.config.model import REPO_ROOT
from utils.config.rules import ConfigError

IGNORE_FILE = ".dockerignore"


def _regex(pattern: str) -> re.Pattern[str]:
    """moby/patternmatcher's translation of one pattern (character classes passed through)."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            i += 2
            if pattern.startswith("/", i):
                i += 1
            out += ".*" if i >= len(pattern) else "(?:.*/)?"
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                out, i = out + re.escape("["), i + 1
            else:
                out, i = out + pattern[i:end + 1].replace("[!", "[^", 1), end + 1
        elif pattern[i] == "\\" and i + 1 < len(pattern):
            out, i = out + re.escape(pattern[i + 1]), i + 2
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(f"^{out}$")


def read_patterns(text: str) -> list[tuple[bool, re.Pattern[str]]]:
    """``(negated, regex)`` per line of a ``.dockerignore``, in order."""
    patterns = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        cleaned = os.path.normpath(line.lstrip("!").strip()).lstrip("/")
        if cleaned and cleaned != ".":
            patterns.append((negated, _regex(cleaned)))
    return patterns


def ignored(rel: str, patterns: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Docker's rule: the last pattern matching ``rel`` or one of its parent folders decides."""
    parts = rel.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    result = False
    for negated, regex in patterns:
        if any(regex.match(prefix) for prefix in prefixes):
            result = not negated
    return result


def configured_folders(repo: Path) -> dict[str, str]:
    """``{key: path relative to the repository}`` for DATA_DIR, OUTPUT_DIR and HF_HOME when they lie inside it."""
    cfg = load_config()
    inside = {}
    real_repo = Path(os.path.realpath(repo))
    for key, folder in (("DATA_DIR", cfg.data_dir), ("OUTPUT_DIR", cfg.output_dir), ("HF_HOME", cfg.hf_home)):
        if folder is None:
            continue
        real = Path(os.path.realpath(folder if Path(folder).is_absolute() else repo / folder))
        if real == real_repo:
            raise ValueError(f"{key}={folder} is the repository itself; it cannot be kept out of the image")
        if real_repo in real.parents:
            inside[key] = real.relative_to(real_repo).as_posix()
    return inside


def make_context(repo: Path, target: Path) -> tuple[int, int, list[str], dict[str, str]]:
    """Fill ``target`` with the code; returns (files, bytes, links left out, configured folders left out)."""
    patterns = read_patterns((repo / IGNORE_FILE).read_text(encoding="utf-8")) if (repo / IGNORE_FILE).is_file() else []
    folders = configured_folders(repo)
    excluded = set(folders.values())
    files = size = 0
    links: list[str] = []
    for folder, dirs, names in os.walk(repo):
        here = Path(folder)
        rel_here = here.relative_to(repo).as_posix()
        kept = []
        for name in sorted(dirs):
            rel = name if rel_here == "." else f"{rel_here}/{name}"
            if (here / name).is_symlink():
                if not ignored(rel, patterns) and rel not in excluded:
                    links.append(rel)
            elif not ignored(rel, patterns) and rel not in excluded:
                kept.append(name)
        dirs[:] = kept
        for name in sorted(names):
            rel = name if rel_here == "." else f"{rel_here}/{name}"
            source = here / name
            if ignored(rel, patterns):
                continue
            if source.is_symlink():
                links.append(rel)
                continue
            if not source.is_file():
                continue
            destination = target / rel
            destination.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(source, destination)
            except OSError:
                shutil.copy2(source, destination)
            files += 1
            size += source.stat().st_size
    return files, size, links, folders


@exits_on_config_error()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m utils.files.build_context", description=__doc__.split("\n\n")[0])
    parser.add_argument("target", type=Path, help="an empty folder to fill (shell/build.sh makes a temporary one)")
    args = parser.parse_args(argv)

    if not args.target.is_dir() or any(args.target.iterdir()):
        print(f"build_context: {args.target} must be an existing empty folder", file=sys.stderr)
        return 2
    try:
        files, size, links, folders = make_context(REPO_ROOT, args.target)
    except ConfigError:
        raise  # a ValueError too, but said by exits_on_config_error
    except (ValueError, OSError) as exc:
        print(f"build_context: {exc}", file=sys.stderr)
        return 1
    for rel in links:
        print(f"build_context: left out {rel} (a link; the image gets no links)", file=sys.stderr)
    kept_out = ", ".join(f"{key}={rel}" for key, rel in folders.items())
    print(f"build_context: {files} files ({size / 2**20:.1f} MiB) of code; left out: {IGNORE_FILE} patterns"
          + (f", {kept_out}" if kept_out else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
