"""What the installed torch was built for (CUDA, ROCm or neither), from its own version file, without importing it.

Why: importing torch costs about 3.6 s on the 2-core cpu host, and the platform detection and the launcher's
framework versions need only ``torch.version``'s ``cuda`` and ``hip``; ``torch/version.py`` is plain assignments.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def torch_version() -> ModuleType | None:
    """``torch.version`` of the installed torch: the imported one when torch is in this process, else its
    ``version.py`` loaded alone, else (no such file) torch imported; None when torch is not installed."""
    imported = sys.modules.get("torch.version")
    if imported is not None:
        return imported
    spec = importlib.util.find_spec("torch")
    if spec is None:
        return None
    for folder in spec.submodule_search_locations or []:
        path = Path(folder) / "version.py"
        if path.is_file():
            alone = importlib.util.spec_from_file_location("_tprimat_torch_version", path)
            if alone is not None and alone.loader is not None:
                module = importlib.util.module_from_spec(alone)
                alone.loader.exec_module(module)
                return module
    try:
        import torch  # local: the point of this module is not to pay its ~4.6 s import (above)
    except ImportError:
        return None
    return torch.version
