"""Which framework code a job runs: ``utils.schema.hardware.FrameworkVersions`` for this process and its trees.

A cross-vendor ``mega`` ratio is a GPU comparison only when both runs executed the same Megatron-LM commit. Versions
come from package metadata, the tree's recorded commit (:data:`RECORDED_COMMIT_FILE`, written by the Dockerfiles)
or git metadata; anything unknown is ``None`` with the reason. Also :func:`check_megatron_ref` and
:func:`check_megatron_tree` (the tree ``mega`` would run is ``MEGATRON_REF``).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from utils.config.rules import RULES
from utils.machine.environment import installed_version
from utils.machine.torch_build import torch_version
from utils.schema.hardware import FrameworkVersions

# The Dockerfiles clone MEGATRON_REF to /opt/tprimat/megatron-lm and write "<ref> <commit>" here.
MEGATRON_INSTALL = Path("/opt/tprimat/megatron-lm")
RECORDED_COMMIT_FILE = "TPRIMAT_MEGATRON_COMMIT"
REF_PATTERN = re.compile(RULES["megatron_ref"].pattern or "")
DISTRIBUTIONS = {
    "megatron_core": "megatron-core",
    "transformer_engine": "transformer-engine",
    "nemo": "nemo-toolkit",
    "deepspeed": "deepspeed",
    "transformers": "transformers",
    "torch": "torch",
}


class MegatronRefError(ValueError):
    """MEGATRON_REF is malformed, or the Megatron-LM tree is not at it (one line, names MEGATRON_REF)."""


def check_megatron_ref(ref: str) -> str:
    """A tag, branch or commit hash (the config loader's rule, utils/config/rules.py); the error names the key."""
    if not ref or not REF_PATTERN.fullmatch(ref):
        raise MegatronRefError(f"MEGATRON_REF={ref!r}: expected a Megatron-LM tag or commit, e.g. core_v0.12.0 "
                               "or 847781764fe468c90caec16309deded245c1022c")
    return ref


def _git(tree: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True, timeout=30,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else None


def tree_commit(tree: Path) -> tuple[str | None, str]:
    """(commit, how it is known) of a framework tree: the build-time record, else git, else (None, why)."""
    recorded = tree / RECORDED_COMMIT_FILE
    if recorded.is_file():
        words = recorded.read_text(encoding="utf-8").split()
        if words:
            return words[-1], f"recorded at image build in {recorded}"
    # Only the tree's own repository: a copy without .git inside another checkout would otherwise report that
    # checkout's HEAD (git walks up), as the conformance runner's Primus row once did.
    top = _git(tree, "rev-parse", "--show-toplevel")
    commit = _git(tree, "rev-parse", "HEAD") if top and Path(top).resolve() == tree.resolve() else None
    if commit:
        return commit, f"git metadata of {tree}"
    if not tree.is_dir():
        return None, f"{tree} does not exist"
    return None, f"{tree} has neither {RECORDED_COMMIT_FILE} nor git metadata"


def ref_commit(tree: Path, ref: str) -> str | None:
    """The commit ``ref`` names, resolved in the tree's git metadata (None when it cannot be resolved there)."""
    return _git(tree, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")


def check_megatron_tree(tree: Path, ref: str) -> str:
    """The tree's commit when it is MEGATRON_REF; otherwise a MegatronRefError naming both."""
    check_megatron_ref(ref)
    commit, how = tree_commit(tree)
    if commit is None:
        raise MegatronRefError(f"Megatron-LM at {tree}: commit unknown ({how}); mega runs MEGATRON_REF={ref}: "
                               "rebuild the image (./shell/build.sh) or set MEGATRON_PATH to a checkout of it")
    recorded = tree / RECORDED_COMMIT_FILE
    if recorded.is_file() and recorded.read_text(encoding="utf-8").split()[:1] == [ref]:
        return commit
    wanted = ref_commit(tree, ref) or ref
    if not (commit == wanted or commit.startswith(wanted) or wanted.startswith(commit)):
        raise MegatronRefError(f"Megatron-LM at {tree} is commit {commit[:12]} ({how}), not MEGATRON_REF={ref}: "
                               "rebuild the image (./shell/build.sh) or check out MEGATRON_REF there")
    return commit


def _accelerator_stack() -> tuple[str | None, str | None, str | None]:
    """(CUDA version, ROCm/HIP version, why neither) of the installed torch.

    Read from torch's own ``torch/version.py`` without importing torch (``utils/machine/torch_build.py``): the
    launcher needs nothing else of torch, and that import was 64% of its start-up before each job
    (docs/PERFORMANCE.md, "The quick benchmark").
    """
    version = torch_version()
    if version is None:
        return None, None, "torch is not installed"
    cuda, hip = getattr(version, "cuda", None), getattr(version, "hip", None)
    built = getattr(version, "__version__", "?")
    return cuda, hip, None if (cuda or hip) else f"torch {built} is a CPU build"


def _record_commit(values: dict[str, Any], unknown: dict[str, str], field: str, tree: Path | None,
                   what: str) -> None:
    """``values[field]`` = the tree's commit, or the reason in ``unknown[field]``."""
    if tree is None:
        unknown[field] = f"no {what} tree given"
        return
    values[field], how = tree_commit(tree)
    if values[field] is None:
        unknown[field] = how


def tree_core_version(tree: Path) -> str | None:
    """The megatron-core version a Megatron-LM tree states (``megatron/core/package_info.py``), read, not imported."""
    path = Path(tree) / "megatron" / "core" / "package_info.py"
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8", errors="replace")
    parts = {key: re.search(rf"^{key}\s*=\s*['\"]?([\w.]*)['\"]?\s*$", text, re.M)
             for key in ("MAJOR", "MINOR", "PATCH", "PRE_RELEASE")}
    if all(parts[key] for key in ("MAJOR", "MINOR", "PATCH")):
        pre = parts["PRE_RELEASE"].group(1) if parts["PRE_RELEASE"] else ""
        return ".".join(parts[key].group(1) for key in ("MAJOR", "MINOR", "PATCH")) + pre
    stated = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return stated.group(1) if stated else None


def framework_versions(framework: str, megatron_tree: Path | None = None,
                       primus_tree: Path | None = None) -> FrameworkVersions:
    """The versions of everything ``framework`` runs in this process (import-free for Megatron and NeMo)."""
    values: dict[str, Any] = {}
    unknown: dict[str, str] = {}
    for field, dist in DISTRIBUTIONS.items():
        values[field] = installed_version(dist)
        if values[field] is None:
            unknown[field] = f"{dist} is not installed in this Python"
    if framework in ("mega", "prim"):
        _record_commit(values, unknown, "megatron_lm_commit", megatron_tree, "Megatron-LM")
        # The tree's megatron package runs, not the image's installed megatron-core (NeMo 25.04's is 0.12).
        values["megatron_core"] = tree_core_version(megatron_tree) if megatron_tree else None
        unknown.pop("megatron_core", None)
        if values["megatron_core"] is None:
            unknown["megatron_core"] = f"no megatron/core/package_info.py version in {megatron_tree}"
    else:
        unknown["megatron_lm_commit"] = f"{framework} does not run a Megatron-LM tree of its own (megatron-core only)"
    if framework == "prim":
        _record_commit(values, unknown, "primus_commit", primus_tree, "Primus")
        values["primus"] = _git(primus_tree, "describe", "--tags", "--always") if values.get("primus_commit") else None
        if values["primus"] is None:
            unknown["primus"] = f"no release tag known for {primus_tree}"
    else:
        unknown.setdefault("primus", f"{framework} does not run Primus")
        unknown.setdefault("primus_commit", f"{framework} does not run Primus")
    cuda, rocm, why = _accelerator_stack()
    values["cuda"], values["rocm"] = cuda, rocm
    if cuda is None:
        unknown["cuda"] = why or "torch is a ROCm build"
    if rocm is None:
        unknown["rocm"] = why or "torch is a CUDA build"
    return FrameworkVersions(**values, unknown=unknown)
