"""The suite is hermetic: its build and cache folders are this checkout's own, never the home folder's.

Two clones on one machine must both pass, one after the other and at the same time (issue 20): a
DeepSpeed op half-built by another checkout in ``~/.cache/torch_extensions`` failed
``tests/unit/train/frameworks/test_deep.py``. The table is ``tests/helpers/hermetic.py``; ``shell/test.sh`` exports it
and ``tests/conftest.py`` sets it for a direct ``python -m pytest``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.hermetic import CACHE_FOLDER, cache_environ
from tests.helpers.paths import REPO
from tests.helpers.proc import ephemeral_ports, free_port
from utils.files.build_context import ignored, read_patterns

CACHE = REPO / CACHE_FOLDER

# Where each library the suite runs would write, as the library itself resolves it. torch's
# _get_build_directory is what DeepSpeed's op builder (torch.utils.cpp_extension.load) builds into;
# importing font_manager writes matplotlib's font list.
RESOLVE = """
import json
import matplotlib
from matplotlib import font_manager
from torch.utils.cpp_extension import _get_build_directory
import huggingface_hub.constants as hub
import datasets.config as hf_datasets
print(json.dumps({
    "deepspeed op build": _get_build_directory("deepspeed_shm_comm", False),
    "matplotlib config": matplotlib.get_configdir(),
    "matplotlib cache": matplotlib.get_cachedir(),
    "huggingface hub": hub.HF_HUB_CACHE,
    "huggingface datasets": str(hf_datasets.HF_DATASETS_CACHE),
    "huggingface modules": str(hf_datasets.HF_MODULES_CACHE),
}))
"""


def _inside(path: str, folder: Path) -> bool:
    resolved = Path(os.path.realpath(path))
    return resolved == folder.resolve() or folder.resolve() in resolved.parents


def test_the_test_command_sets_every_cache_inside_the_checkout() -> None:
    proc = subprocess.run(["bash", str(REPO / "shell" / "test.sh"), "--env"], capture_output=True, text=True,
                          timeout=30, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    exported = dict(line.split("=", 1) for line in proc.stdout.splitlines())
    assert exported == cache_environ(REPO), "shell/test.sh and tests/helpers/hermetic.py disagree"
    assert all(_inside(value, CACHE) for value in exported.values()), exported


def test_the_running_suite_keeps_its_caches_in_the_checkout() -> None:
    """Through shell/test.sh or a direct ``python -m pytest`` (tests/conftest.py), not a caller's shared folder."""
    outside = {name: os.environ.get(name) for name in cache_environ(REPO)
               if not _inside(os.environ.get(name, "/"), REPO)}
    assert not outside, f"cache folders outside the checkout {REPO}, shared with other checkouts: {outside}"


def test_the_cache_folder_stays_out_of_git_and_the_image() -> None:
    assert f"{CACHE_FOLDER}/" in (REPO / ".gitignore").read_text().splitlines()
    assert ignored(f"{CACHE_FOLDER}/torch_extensions/py311_cpu/x.so",
                   read_patterns((REPO / ".dockerignore").read_text()))


def test_libraries_resolve_their_caches_into_the_checkout_and_leave_home_alone(tmp_path: Path) -> None:
    """What DeepSpeed, matplotlib and Hugging Face compute from the suite's environment, with an empty home."""
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home)}
    proc = subprocess.run([sys.executable, "-c", RESOLVE], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    where = json.loads(proc.stdout.strip().splitlines()[-1])
    outside = {what: path for what, path in where.items() if not _inside(path, CACHE)}
    assert not outside, f"outside {CACHE}: {outside}"
    assert not list(home.iterdir()), f"written in the home folder: {sorted(map(str, home.rglob('*')))}"


def test_master_ports_come_from_outside_the_ephemeral_range() -> None:
    """An ephemeral port may be taken by any outgoing connection, another clone's included, before a job listens."""
    ports = {free_port() for _ in range(20)}
    assert not ports & set(ephemeral_ports()), ports
    assert len(ports) > 1, "a random pick, not one fixed port every run shares"
