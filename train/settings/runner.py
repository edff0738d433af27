"""Start a probe in the framework's own Python and return its answer; locate that Python and the trees.

Inside the images that is the image's ``python3`` and trees (``MEGATRON_PATH``, ``PRIMUS_PATH``); elsewhere
``TPRIMAT_MEGATRON_LM``, ``TPRIMAT_PRIMUS``, ``TPRIMAT_MEGATRON_PYTHON`` and ``TPRIMAT_NEMO_PYTHON`` point at
upstream checkouts and the Pythons beside them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from train.settings.probe_common import ANSWER_PREFIX
from utils.config.model import REPO_ROOT

PROBE_TIMEOUT_S = 600


class FrameworkUnavailable(RuntimeError):
    """The framework's Python or tree is missing or unusable here (one line, names the variable to set)."""


class FrameworkRejected(RuntimeError):
    """The framework itself refused the configuration: its message and the setting it concerns."""

    def __init__(self, framework: str, message: str, setting: str | None) -> None:
        self.framework, self.message, self.setting = framework, message, setting
        where = f" (setting: {setting})" if setting else ""
        super().__init__(f"{framework} rejects the configuration{where}: {message}")


@dataclass(frozen=True)
class ProbeAnswer:
    """A probe's successful answer: the framework's raw values plus what it reported about itself."""

    payload: dict[str, Any]
    python: str

    @property
    def raw(self) -> dict[str, Any]:
        return self.payload["raw"]


def python_for(variable: str, environ: Mapping[str, str] | None = None) -> str:
    """The framework's Python: ``$variable`` when set, else this interpreter (the image's python3)."""
    env = os.environ if environ is None else environ
    chosen = env.get(variable) or sys.executable
    if not Path(chosen).is_file() or not os.access(chosen, os.X_OK):
        raise FrameworkUnavailable(f"{variable}={chosen}: no such Python; point it at the framework's interpreter")
    return chosen


def run_probe(module: str, request: dict[str, Any], python: str, framework: str, timeout: int = PROBE_TIMEOUT_S,
              extra_env: Mapping[str, str] | None = None) -> ProbeAnswer:
    """``python -m <module>`` (a framework's probe, e.g. ``train.megatron.probe``) with ``request`` on stdin;
    its answer, or the rejection raised."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(extra_env or {})}
    try:
        proc = subprocess.run([python, "-m", module], input=json.dumps(request), text=True,
                              capture_output=True, cwd=REPO_ROOT, env=env, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise FrameworkUnavailable(f"{framework}: resolving the settings took over {timeout} s ({python})") from None
    except OSError as exc:
        raise FrameworkUnavailable(f"{framework}: cannot start {python}: {exc.strerror or exc}") from None
    lines = [line for line in proc.stdout.splitlines() if line.startswith(ANSWER_PREFIX)]
    if not lines:
        tail = " | ".join(line.strip() for line in proc.stderr.strip().splitlines()[-3:])
        raise FrameworkUnavailable(f"{framework}: {python} could not run the settings probe (exit {proc.returncode})"
                                   f": {tail or 'no output'}")
    payload = json.loads(lines[-1][len(ANSWER_PREFIX):])
    if payload.get("unavailable"):
        raise FrameworkUnavailable(f"{framework}: its environment is broken: module {payload.get('missing_module')!r} "
                                   f"is missing in {python} ({payload.get('error')})")
    if not payload.get("ok"):
        raise FrameworkRejected(framework, str(payload.get("error")), payload.get("setting"))
    return ProbeAnswer(payload=payload, python=python)

