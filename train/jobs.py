"""Which training jobs a platform runs: framework selection, the prim<->nemo mapping, repeats.

This is the one place that decides what ``FRAMEWORK`` means on a platform, so that
``shell/train.sh`` (which loops over the jobs) and ``train/launch.py`` (which runs one)
cannot disagree. Each vendor's own stack stands in for the other's: ``prim`` (Primus,
AMD) asked for on ``nvd`` runs ``nemo`` (NeMo, NVIDIA) and the reverse, always with a
printed note so a mapped job is never mistaken for the framework that was asked for.

CLI (run from the repository root)::

    python -m train.jobs [--platform P]          # one job per line, tab-separated, for shell loops
    python -m train.jobs --summary CODES_FILE     # after the loop: table of exit codes and result status
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from utils.configure import PLATFORMS, REPO_ROOT, Config, ConfigError, load_config

FRAMEWORKS_BY_PLATFORM: dict[str, tuple[str, ...]] = {
    "amd": ("mega", "prim", "tran"),
    "nvd": ("mega", "nemo", "tran"),
    "cpu": ("tran",),
}

# The vendor stack that stands in for the other vendor's: Primus <-> NeMo.
VENDOR_STACK_MAP: dict[tuple[str, str], str] = {
    ("nvd", "prim"): "nemo",
    ("amd", "nemo"): "prim",
}

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
        raise ValueError(
            f"FRAMEWORK={framework!r} is not available on platform {platform}; "
            f"valid: {', '.join(valid)} (or all)"
        )
    return framework, None


def frameworks_for(platform: str, framework: str) -> tuple[tuple[str, ...], list[str]]:
    """Expand ``FRAMEWORK`` (one name or ``all``) into the platform's frameworks plus notes."""
    _check_platform(platform)
    if framework == "all":
        return FRAMEWORKS_BY_PLATFORM[platform], []
    resolved, note = resolve_framework(platform, framework)
    return (resolved,), [note] if note else []


def script_path(platform: str, framework: str, model: str) -> Path:
    return TRAIN_DIR / f"train_{platform}_{framework}_{model}.sh"


def plan_jobs(cfg: Config, platform: str) -> tuple[list[Job], list[str]]:
    """Jobs for ``FRAMEWORK`` x ``MODELS`` x ``RUNS`` in run order, plus the mapping notes.

    With ``RUNS=1`` the result file has no run suffix; with more, runs are numbered from 1.
    """
    from utils.result import result_path  # the result module owns file naming

    frameworks, notes = frameworks_for(platform, cfg.framework)
    run_indices: list[int | None] = [None] if cfg.runs == 1 else list(range(1, cfg.runs + 1))
    jobs: list[Job] = []
    for framework in frameworks:
        for model in cfg.models:
            script = script_path(platform, framework, model)
            if not script.is_file():
                raise ValueError(f"no launcher {script.relative_to(REPO_ROOT)} for {platform}/{framework}/{model}")
            for run_index in run_indices:
                result = result_path(cfg.output_dir, platform, framework, model, run_index)
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
    from utils.result import status_of

    outcomes = []
    for job in jobs:
        code = exit_codes.get(str(job.result))
        status = status_of(job.result) if code is not None else "not run"
        outcomes.append(JobOutcome(job, -1 if code is None else code, status))
    return outcomes


def format_summary(outcomes: list[JobOutcome], output_dir: Path) -> str:
    headers = ("platform", "framework", "model", "run", "exit", "status", "result")
    rows = []
    for o in outcomes:
        try:
            shown = str(o.job.result.relative_to(output_dir))
        except ValueError:
            shown = str(o.job.result)
        rows.append((
            o.job.platform, o.job.framework, o.job.model,
            "-" if o.job.run_index is None else str(o.job.run_index),
            "-" if o.exit_code < 0 else str(o.exit_code), o.status, shown,
        ))
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    good = sum(1 for o in outcomes if o.exit_code == 0 and o.status == "ok")
    lines.append(f"{good} of {len(outcomes)} job(s) finished ok; results in {output_dir}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# CLI


def _platform(requested: str | None, cfg: Config) -> str:
    if requested:
        return requested
    if cfg.platform:
        return cfg.platform
    from utils.hardware import detect_platform

    return detect_platform()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m train.jobs",
        description="List the training jobs for a platform (FRAMEWORK x MODELS x RUNS from config.env), "
        "one per line: platform, framework, model, run index ('-' when RUNS=1), script, result file, "
        "tab-separated. Mapping notes go to stderr.",
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
        print(f"train.jobs: {exc}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    for job in jobs:
        print(job.to_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
