"""Log-analysis mode: the files of one run (text logs or TensorBoard event files) -> its result.

``mode``: ``config`` checks a tprimat launch strictly against the config's workload, ``log`` takes the workload
from the log, ``auto`` picks ``config`` when the launcher's header ``tprimat launch: ... config=<hash>`` is there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from train.logs.assemble import build_log_result, build_result
from train.logs.patterns import is_event_file
from train.logs.scan import LogInputError, LogScan, merge_scans, not_a_text_log, scan_file
from train.logs.workload import log_framework, log_gpu_info, log_platform, log_workload
from train.profiles import ProfileError, apply_profile
from utils.config.load import load_config
from utils.config.model import Config
from utils.dataset.fingerprint import fingerprint
from utils.dataset.paths import job_data
from utils.machine.hardware import gpu_info_for_device
from utils.result.file import update_result
from utils.schema.model import Result
from utils.spec.models import workload_shape

MODES = ("auto", "log", "config")
CAPTURED_BY = "log-analysis mode: variables and libraries are this machine's, not the training run's"
WHAT_IS_READ = "Megatron-LM, Primus or NeMo iteration lines, a Megatron arguments block or a tprimat launch header"


@dataclass
class AnalysisOptions:
    """What the user said about the run (each None: read from the log)."""

    mode: str = "auto"
    platform: str | None = None
    framework: str | None = None
    model: str | None = None
    model_size: str = "full"  # only for a log that states no model dimensions
    gpu_name: str | None = None
    skip_steps: int | None = None  # warm-up in iterations from the first logged one
    returncode: int | None = None
    run_index: int | None = None


@dataclass
class Analysis:
    """One run's outcome: its result (None when none of its files is a training log) and the files left out."""

    result: Result | None
    mode: str | None  # config | log
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # files of the run that were not used, and why

    @property
    def used(self) -> int:
        return len(self.result.source.files) if self.result is not None else 0


def _adds_to_run(scan: LogScan) -> bool:
    """Whether a rank's log without iteration lines still tells something about the run (an error, sizes)."""
    return bool(scan.problems or scan.exceptions or scan.world_sizes or scan.memory or scan.platform_evidence)


def scan_logs(paths: list[Path]) -> tuple[list[LogScan], list[tuple[Path, str]]]:
    """Scans of the files that belong to the run, and why each other file does not. Another rank's log joins the run
    when it reports a problem or a size, even without iteration lines."""
    scans: list[LogScan] = []
    skipped: list[tuple[Path, str]] = []
    for path in paths:
        try:
            reason = not_a_text_log(path)
            if reason is None:
                scans.append(scan_file(path))
        except OSError as exc:
            reason = f"unreadable: {exc.strerror or exc}"
        if reason:
            skipped.append((path, reason))
    if not any(scan.recognised for scan in scans):
        return [], skipped + [(scan.files[0], f"no {WHAT_IS_READ}") for scan in scans]
    kept = [scan for scan in scans if scan.recognised or _adds_to_run(scan)]
    left_out = [scan for scan in scans if not (scan.recognised or _adds_to_run(scan))]
    return kept, skipped + [(scan.files[0], f"no {WHAT_IS_READ}") for scan in left_out]


def _config_mode(scan: LogScan, options: AnalysisOptions, load: Callable[[], Config]) -> Result:
    header = scan.launch or {}
    job: dict[str, str] = {}
    for key in ("platform", "framework", "model"):
        given, logged = getattr(options, key), header.get(key)
        if given and logged and given != logged:
            raise LogInputError(f"--{key} {given} but the log's tprimat launch header says {key}={logged}")
        if not (given or logged):
            raise LogInputError(f"the log has no tprimat launch header naming the {key}: pass --{key}")
        job[key] = given or logged  # type: ignore[assignment]
    try:  # the launcher ran config.env with PROFILE applied (a tuned job's workload is its vendor recipe's)
        cfg, profile = apply_profile(load(), job["platform"], job["framework"], job["model"])
    except ProfileError as exc:
        raise LogInputError(str(exc)) from None
    shape, data = workload_shape(cfg, job["model"]), job_data(cfg, job["model"])
    gpu = gpu_info_for_device(job["platform"], options.gpu_name, cfg.world_size) if options.gpu_name else None
    run_index = options.run_index
    if run_index is None and header.get("run_index", "-").isdigit():
        run_index = int(header["run_index"])
    result = build_result(
        cfg, log_path=scan.files[0] if scan.files else Path("-"), platform=job["platform"],
        framework=job["framework"], model=job["model"], returncode=options.returncode, shape=shape, gpu_info=gpu,
        run_index=run_index, scan=scan,
        fingerprint=fingerprint(cfg, shape, data.prefix, data.tokenizer_dir),
    )
    result.environment.captured_by = CAPTURED_BY
    update_result(result, profile=profile.name, profile_settings=profile.block())
    if gpu is not None:
        result.warnings.append(f"gpu_info from --gpu-name {options.gpu_name!r}, not detected")
    return result


def _log_mode(scan: LogScan, options: AnalysisOptions) -> Result:
    header = scan.launch or {}  # a tprimat log read with --from-log: its header still names the job
    run = log_workload(scan, model=options.model or header.get("model"), model_size=options.model_size)
    framework, notes = log_framework(scan, options.framework or header.get("framework"))
    platform, platform_notes = log_platform(scan, framework, options.platform or header.get("platform"))
    gpu = log_gpu_info(platform, options.gpu_name, run.training.num_gpus, bool(run.training.workload.FP8))
    if scan.framework_hint == "nemo" and scan.kind == "log":
        notes.append("NeMo's TimingCallback does not synchronise the device before reading its clock: step times "
                     "are host-side")
    return build_log_result(scan, run, platform=platform, framework=framework, gpu_info=gpu,
                            returncode=options.returncode, skip_iterations=options.skip_steps,
                            run_index=options.run_index, notes=[*notes, *platform_notes])


def analyse_scans(scans: list[LogScan], options: AnalysisOptions,
                  load: Callable[[], Config] = load_config) -> tuple[Result, str]:
    """(result, mode) of one run from the scans of its logs (rank 0 first) or its events."""
    if options.mode not in MODES:
        raise ValueError(f"mode {options.mode!r}: allowed values are {', '.join(MODES)}")
    scan = merge_scans(scans) if len(scans) > 1 else scans[0]
    if scan.kind != "tensorboard" and (options.mode == "config" or (options.mode == "auto" and scan.launch)):
        return _config_mode(scan, options, load), "config"
    return _log_mode(scan, options), "log"


def analyse_run(paths: list[Path], options: AnalysisOptions, load: Callable[[], Config] = load_config) -> Analysis:
    """The run whose files are ``paths`` (its event files, or its ranks' text logs, rank 0 first). ``result`` is None
    when no file is a training log (each is then in ``skipped`` with why)."""
    if paths and all(is_event_file(p) for p in paths):
        from train.logs.tensorboard import scan_events  # tensorboard's protobufs: 0.7 s (-X importtime)

        try:
            scans = [scan_events(paths)]
        except LogInputError as exc:
            return Analysis(None, None, [(path, str(exc)) for path in paths])
        skipped: list[tuple[Path, str]] = []
    else:
        scans, skipped = scan_logs(paths)
        if not scans:
            return Analysis(None, None, skipped)
    result, mode = analyse_scans(scans, options, load)
    return Analysis(result, mode, skipped)


def analyse_files(paths: list[Path], options: AnalysisOptions,
                  load: Callable[[], Config] = load_config) -> Analysis:
    """Like :func:`analyse_run`, but files that hold no training log are an error naming why."""
    analysis = analyse_run(paths, options, load)
    if analysis.result is None:
        if len(analysis.skipped) == 1:
            raise LogInputError(f"{analysis.skipped[0][0]}: {analysis.skipped[0][1]}")
        raise LogInputError(f"none of the {len(paths)} file(s) holds {WHAT_IS_READ}")
    return analysis
