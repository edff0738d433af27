"""Shared fixtures: a tiny offline workload and its data, prepared once per test session.

The sample data is built by the real pipeline (``shell/data.sh`` with
``DATASET=sample``), so every test that trains reads data and tokenizers through
the same loading code a real run uses.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.hermetic import cache_environ
from tests.helpers.paths import REPO

PYTHON = sys.executable

# Before any test module imports torch, matplotlib or huggingface_hub (some read these at import):
# caches go inside this checkout unless the caller (shell/test.sh, a developer) chose already.
for _name, _path in cache_environ(REPO).items():
    os.environ.setdefault(_name, _path)

# A workload small enough for 2 CPU cores that still exercises warm-up, GA and the LR schedule.
TINY_WORKLOAD = {
    "PLATFORM": "cpu",
    "DATASET": "sample",
    "MODEL_SIZE": "tiny",
    "MODELS": "llama qwen mistral",
    "FRAMEWORK": "tran",
    "SAMPLE_MB": "0.5",
    "SAMPLE_VOCAB": "2048",
    "TRAIN_ITERS": "12",
    "WARMUP_STEPS": "2",
    "SL": "64",
    "MBS": "2",
    "GA": "2",
    "TP": "1",
    "PP": "1",
    "CP": "1",
    "DP": "1",
    "NNODES": "1",
    "NODE_RANK": "0",
    "GPUS_PER_NODE": "1",
    "MEASURE_SKIP_STEPS": "",
    "LR": "3e-3",
    "MIN_LR": "3e-4",
    "RUNS": "1",
    "PROFILING": "false",
}


_SYSTEM_RANDOM = random.SystemRandom()


def _ephemeral_ports() -> range:
    """The kernel's range for outgoing connections and ``bind(0)`` (Linux's default when unreadable)."""
    try:
        low, high = (int(v) for v in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


def free_port() -> int:
    """A port free now, for MASTER_PORT, chosen at random below the kernel's ephemeral range.

    ``bind(0)`` hands out an ephemeral port, which any process's next outgoing connection (another
    clone's test, a rank's gloo socket) may take before the job listens on it. A random port from
    the range below, checked bindable on every interface, can only collide with another run's
    equally random pick. The OS's randomness, not ``random``'s: a test that seeds ``random`` would
    otherwise make two clones started together pick the same ports in the same order.
    """
    ephemeral = _ephemeral_ports()
    candidates = [port for port in range(10000, 65536) if port not in ephemeral]
    for port in _SYSTEM_RANDOM.sample(candidates, min(50, len(candidates))):
        with socket.socket() as sock:
            try:
                sock.bind(("", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tiny_environ(data_dir: Path, output_dir: Path, **overrides: str) -> dict[str, str]:
    """os.environ plus the tiny workload, pointed at test directories (never the repo's)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN",)}
    env.update(TINY_WORKLOAD)
    env.update(
        TPRIMAT_CONFIG=str(REPO / "config.env"),
        DATA_DIR=str(data_dir),
        OUTPUT_DIR=str(output_dir),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(free_port()),
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PYTHONUNBUFFERED="1",
        HISTORY_DB=str(output_dir.parent / "history.sqlite"),  # the results database, never the repository's
    )
    env.update(overrides)
    return env


@pytest.fixture(scope="session")
def sample_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Offline sample corpus, tokenizers and Megatron datasets for llama and qwen (built once)."""
    data_dir = tmp_path_factory.mktemp("sample-data")
    output_dir = tmp_path_factory.mktemp("sample-data-output")
    proc = subprocess.run(
        ["bash", str(REPO / "shell" / "data.sh")],
        env=tiny_environ(data_dir, output_dir),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        pytest.fail(f"shell/data.sh failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return data_dir


@pytest.fixture
def tiny_env(sample_data_dir: Path, tmp_path: Path) -> Callable[..., dict[str, str]]:
    """Factory: the tiny workload's environment with a fresh OUTPUT_DIR, plus overrides."""

    def make(**overrides: str) -> dict[str, str]:
        return tiny_environ(sample_data_dir, tmp_path / "output", **overrides)

    return make


def run_module(module: str, *args: str, env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess:
    """Run ``python -m module args`` from the repo root, capturing output."""
    return subprocess.run(
        [PYTHON, "-m", module, *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout
    )
