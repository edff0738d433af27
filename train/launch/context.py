"""One job's :class:`~train.launch.contract.RunContext` and its framework's plugin, for the launcher and the preflight.

Kept out of ``train/launch/launcher.py`` so the preflight driver (``train/launch/preflight.py``) can build a
job's context without importing the launcher that calls it.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from train.launch.contract import Plugin, RunContext
from train.profiles import apply_profile
from utils.config.model import Config
from utils.dataset.paths import job_data
from utils.machine.cpu_precision import apply_cpu_precision
from utils.result.file import result_path
from utils.spec.models import workload_shape
from utils.spec.registry import FRAMEWORKS


def job_context(cfg: Config, platform: str, framework: str, model: str, run_index: int | None = None,
                dry_run: bool = False) -> RunContext:
    """One job's context with PROFILE applied (:class:`train.profiles.ProfileError` when it cannot be).

    On the cpu platform ``cfg`` then carries the precision the CPU computes in (CPU_PRECISION); the trainers
    apply the same rule to the config they load (train/tran/worker.py ``run_worker``).
    """
    cfg, profile = apply_profile(cfg, platform, framework, model)
    cfg, precision = apply_cpu_precision(cfg, platform)
    return RunContext(cfg=cfg, platform=platform, framework=framework, model=model, run_index=run_index,
                      result_path=result_path(cfg.output_dir, platform, framework, model, run_index, cfg.profile),
                      log_path=log_path_for(cfg, platform, framework, model, run_index), data=job_data(cfg, model),
                      shape=workload_shape(cfg, model), dry_run=dry_run, profile=profile, precision=precision)


def log_path_for(cfg: Config, platform: str, framework: str, model: str, run_index: int | None) -> Path:
    """The job's log; with several nodes each node keeps its own (``..._node<k>.log``) on shared storage."""
    path = result_path(cfg.output_dir / "logs", platform, framework, model, run_index, cfg.profile).with_suffix(".log")
    return path.with_name(f"{path.stem}_node{cfg.node_rank}.log") if cfg.nnodes > 1 else path


def load_plugin(framework: str) -> Plugin:
    """The framework's plugin (:class:`train.launch.contract.Plugin`): the module ``utils/spec/registry.py`` names."""
    if framework not in FRAMEWORKS:
        raise ValueError(f"framework {framework!r}: allowed values are {', '.join(FRAMEWORKS)}")
    return importlib.import_module(FRAMEWORKS[framework].plugin)  # type: ignore[return-value]
