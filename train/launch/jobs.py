"""Which training jobs a platform runs: framework selection, the prim<->nemo mapping, repeats.

The one place that decides what ``FRAMEWORK`` means (``all``, one name, or several in order), so
``shell/train.sh`` and ``train/launch/launcher.py`` cannot disagree. ``prim`` asked for on ``nvd`` runs ``nemo``
and the reverse, always with a printed note.

    python -m train.launch.jobs [--platform P]          # one job per line, tab-separated, for shell loops
    python -m train.launch.jobs --summary CODES_FILE     # after the loop: table of exit codes and result status
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from train.profiles import ProfileError, apply_profile
from utils.config.load import load_config
from utils.config.model import REPO_ROOT, Config
from utils.config.rules import ConfigError
from utils.machine.hardware import resolve_platform
from utils.result.file import result_path, status_of
from utils.spec.registry import FRAMEWORK_ALL, FRAMEWORKS, VENDOR_STACK_MAP, frameworks_on, platform_names

PLATFORMS = platform_names()
FRAMEWORKS_BY_PLATFORM: dict[str, tuple[str, ...]] = {platform: frameworks_on(platform) for platform in PLATFORMS}

TRAIN_DIR = REPO_ROOT / "train"
FIELD_SEPARATOR = "\t"
NO_RUN_INDEX = "-"


@dataclass(frozen=True)
class Job:
    """One training run: what to run, with which script, and where its result must appear."""

    platform: str
    framework: str
    model: str
    run_index: int | None
    script: Path
    result: Path

    def to_line(self) -> str:
        """The tab-separated form ``shell/train.sh`` reads with ``read -r``."""
        index = NO_RUN_INDEX if self.run_index is None else str(self.run_index)
        fields = (self.platform, self.framework, self.model, index, str(self.script), str(self.result))
        return FIELD_SEPARATOR.join(fields)


def _check_platform(platform: str) -> None:
    if platform not in FRAMEWORKS_BY_PLATFORM:
        raise ValueError(f"platform {platform!r} is not valid; use one of: {', '.join(PLATFORMS)}")


def resolve_framework(platform: str, framework: str) -> tuple[str, str | None]:
    """Return the framework to run on ``platform`` and a note when it was mapped.

    ``all`` is not a single framework: expand it with :func:`frameworks_for`.
    A framework the platform cannot run (``mega`` on ``cpu``) is a ``ValueError``
    that lists the valid ones, rather than a job that fails later for an obscure reason.
    """
    _check_platform(platform)
    valid = FRAMEWORKS_BY_PLATFORM[platform]
    mapped = VENDOR_STACK_MAP.get((platform, framework))
    if mapped is not None:
        return mapped, f"FRAMEWORK={framework} on {platform} runs {mapped} (the {platform} vendor stack)"
    if framework not in valid:
        problem = "is not available on platform" if framework in FRAMEWORKS else "is not a framework; on platform"
        raise ValueError(
            f"FRAMEWORK={framework!r} {problem} {platform}; valid: {', '.join(valid)} (or {FRAMEWORK_ALL})"
        )
    return framework, None


def frameworks_for(platform: str, framework: str | Sequence[str]) -> tuple[tuple[str, ...], list[str]]:
    """Expand ``FRAMEWORK`` (``all``, one name or several) into the platform's frameworks plus notes.

    Several names run in the order given; a name that maps onto one already listed
    (``prim nemo`` on nvd) runs once.
    """
    _check_platform(platform)
    names = framework.split() if isinstance(framework, str) else list(framework)
    if names == [FRAMEWORK_ALL]:
        return FRAMEWORKS_BY_PLATFORM[platform], []
    if not names:
        raise ValueError(f"FRAMEWORK is empty; valid on platform {platform}: "
                         f"{', '.join(FRAMEWORKS_BY_PLATFORM[platform])} (or {FRAMEWORK_ALL})")
    resolved: list[str] = []
    notes: list[str] = []
    for name in names:
        if name == FRAMEWORK_ALL:
            raise ValueError(f"FRAMEWORK={' '.join(names)!r}: {FRAMEWORK_ALL} stands alone")
        runs, note = resolve_framework(platform, name)
        if note:
            notes.append(note)
        if runs not in resolved:
            resolved.append(runs)
    return tuple(resolved), notes


def script_path(platform: str, framework: str, model: str) -> Path:
    return TRAIN_DIR / f"train_{platform}_{framework}_{model}.sh"


def plan_jobs(cfg: Config, platform: str) -> tuple[list[Job], list[str]]:
    """Jobs for ``FRAMEWORK`` x ``MODELS`` x ``RUNS`` in run order, plus the mapping notes.

    With ``RUNS=1`` the result file has no run suffix; with more, runs are numbered from 1.
    """
    frameworks, notes = frameworks_for(platform, cfg.framework)
    run_indices: list[int | None] = [None] if cfg.runs == 1 else list(range(1, cfg.runs + 1))
    jobs: list[Job] = []
    for framework in frameworks:
        for model in cfg.models:
            script = script_path(platform, framework, model)
            if not script.is_file():
                raise ValueError(f"no launcher {script.relative_to(REPO_ROOT)} for {platform}/{framework}/{model}")
            try:  # the profile the job runs names its result (a tuned job falling back to identical: identical)
                profile = apply_profile(cfg, platform, framework, model)[0].profile
            except ProfileError:
                profile = cfg.profile  # the job will stop with that error and write no result
            for run_index in run_indices:
                result = result_path(cfg.output_dir, platform, framework, model, run_index, profile)
                jobs.append(Job(platform, framework, model, run_index, script, result))
    return jobs, notes


def select_jobs(cfg: Config, platform: str) -> list[Job]:
    """The jobs :func:`plan_jobs` selects, without the notes."""
    return plan_jobs(cfg, platform)[0]


# ---------------------------------------------------------------------------
# summary after the loop


@dataclass(frozen=True)
class JobOutcome:
    job: Job
    exit_code: int
    status: str


def read_exit_codes(path: Path) -> dict[str, int]:
    """Read ``<result path><TAB><exit code>`` lines written by ``shell/train.sh``."""
    codes: dict[str, int] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        result, sep, code = line.rpartition(FIELD_SEPARATOR)
        if not sep or not code.strip().lstrip("-").isdigit():
            raise ValueError(f"{path}:{number}: expected '<result path><TAB><exit code>', got {line!r}")
        codes[result] = int(code)
    return codes


def summarize(jobs: list[Job], exit_codes: dict[str, int]) -> list[JobOutcome]:
    outcomes = []
    for job in jobs:
        code = exit_codes.get(str(job.result))
        status = status_of(job.result) if code is not None else "not run"
        outcomes.append(JobOutcome(job, -1 if code is None else code, status))
    return outcomes


# Header underlined with ASCII dashes, no other rules: plain text in logs and any locale,
# and every row starts with its platform, so a log reader can grep the rows.
_PLAIN_HEAD = box.Box("    \n    \n -- \n    \n    \n    \n    \n    \n", ascii=True)


def format_summary(outcomes: list[JobOutcome], output_dir: Path) -> str:
    """The table ``shell/train.sh`` prints after the loop, plus a one-line verdict."""
    table = Table(box=_PLAIN_HEAD, show_edge=False, pad_edge=False, header_style="")
    for header in ("platform", "framework", "model", "run", "exit", "status", "result"):
        table.add_column(header, no_wrap=True)
    for o in outcomes:
        try:
            shown = str(o.job.result.relative_to(output_dir))
        except ValueError:
            shown = str(o.job.result)
        table.add_row(
            o.job.platform, o.job.framework, o.job.model,
            "-" if o.job.run_index is None else str(o.job.run_index),
            "-" if o.exit_code < 0 else str(o.exit_code), o.status, shown,
        )
    buffer = io.StringIO()
    # Wide enough that no path is ever wrapped or cut; trailing padding is stripped below.
    Console(file=buffer, width=10_000, color_system=None, force_terminal=False).print(table)
    lines = [line.rstrip() for line in buffer.getvalue().splitlines()]
    good = sum(1 for o in outcomes if o.exit_code == 0 and o.status == "ok")
    lines.append(f"{good} of {len(outcomes)} job(s) finished ok; results in {output_dir}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# CLI


def _platform(requested: str | None, cfg: Config) -> str:
    if requested:
        return requested

    return resolve_platform(cfg)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m train.launch.jobs",
        description="List the training jobs for a platform (FRAMEWORK x MODELS x RUNS from config.env), "
        "one per line: platform, framework, model, run index ('-' when RUNS=1), script, result file, "
        "tab-separated. Mapping notes go to stderr.",
        epilog="FRAMEWORK is all, one name or several ('tran mega', run in that order). Frameworks per platform: "
        + "; ".join(f"{p}: {' '.join(f)}" for p, f in FRAMEWORKS_BY_PLATFORM.items())
        + ". prim on nvd runs nemo and nemo on amd runs prim (each vendor's own stack).",
    )
    parser.add_argument("--platform", choices=PLATFORMS, help="default: PLATFORM from config, else detected")
    parser.add_argument("--summary", type=Path, metavar="CODES_FILE",
                        help="print the summary table instead; CODES_FILE has '<result path><TAB><exit code>' "
                        "lines written by shell/train.sh")
    args = parser.parse_args(argv)
    try:
        cfg = load_config()
        platform = _platform(args.platform, cfg)
        jobs, notes = plan_jobs(cfg, platform)
        if args.summary is not None:
            outcomes = summarize(jobs, read_exit_codes(args.summary))
            print(format_summary(outcomes, cfg.output_dir))
            return 0 if all(o.exit_code == 0 and o.status == "ok" for o in outcomes) else 1
    except (ConfigError, ValueError, OSError) as exc:
        print(f"train.launch.jobs: {exc}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    for job in jobs:
        print(job.to_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
