"""Where the Megatron-LM and Primus trees are, in the images and (through ``TPRIMAT_*``) elsewhere."""

from __future__ import annotations

import os
from pathlib import Path

from train.megatron.args import ATTENTION_BACKEND
from train.settings.runner import FrameworkUnavailable
from utils.config.model import Config

# The preflight's variables (train/settings/runner.py): a Python that imports Megatron-LM (and Primus),
# and the trees it judges, where they are not the images' (the conformance tests, a laptop).
MEGATRON_PYTHON = "TPRIMAT_MEGATRON_PYTHON"
MEGATRON_TREE = "TPRIMAT_MEGATRON_LM"
PRIMUS_TREE = "TPRIMAT_PRIMUS"
# The target GPU's compute-capability major, which Megatron's validate_args asks the first GPU for when
# TP or CP > 1 (only used on a host without a GPU): H100 is 9 (sm_90), MI300X (gfx942) reports 9 under ROCm.
GPU_ARCH = {"nvd": 9, "amd": 9}

DEFAULT_PRIMUS_PATH = Path("/workspace/Primus")  # rocm/primus images
# MEGATRON_REF, cloned by both Dockerfiles at build time (train/rules/versions.py records it), so
# mega runs the same Megatron-LM commit on AMD and NVIDIA; prim keeps Primus's own third_party copy.
MEGATRON_INSTALL = Path("/opt/tprimat/megatron-lm")


def primus_root(cfg: Config) -> Path:
    """``PRIMUS_PATH`` from the config (or environment), else the Primus image's location."""
    return Path(cfg.primus_path) if cfg.primus_path else DEFAULT_PRIMUS_PATH


def primus_megatron(cfg: Config) -> Path:
    """The Megatron-LM that Primus runs: its own submodule, not MEGATRON_REF."""
    return primus_root(cfg) / "third_party" / "Megatron-LM"


def megatron_candidates(cfg: Config, platform: str) -> list[Path]:
    """Where ``mega``'s Megatron-LM is: ``MEGATRON_PATH``, else MEGATRON_REF's install in both images."""
    if platform not in ATTENTION_BACKEND:
        raise ValueError(f"platform {platform!r}: Megatron runs on {', '.join(ATTENTION_BACKEND)}")
    return [Path(cfg.megatron_path)] if cfg.megatron_path else [MEGATRON_INSTALL]


def find_megatron(cfg: Config, platform: str) -> tuple[Path, str | None]:
    """(Megatron-LM root, None) or (the first candidate, why it is not usable here)."""
    candidates = megatron_candidates(cfg, platform)
    for root in candidates:
        if (root / "pretrain_gpt.py").is_file():
            return root, None
    tried = ", ".join(str(c) for c in candidates)
    return candidates[0], (f"Megatron-LM not found: no pretrain_gpt.py in {tried}; the images install "
                           f"MEGATRON_REF={cfg.megatron_ref} there (./shell/build.sh), or set MEGATRON_PATH "
                           "in config.env to a checkout of it")


def preflight_tree(variable: str, default: Path, marker: str, what: str, hint: str) -> Path:
    """``$variable``, else ``default``: the tree the preflight asks, which must hold ``marker``."""
    tree = Path(os.environ.get(variable) or default)
    if not (tree / marker).is_file():
        raise FrameworkUnavailable(f"{what} not found: no {marker} in {tree}; {hint}")
    return tree
