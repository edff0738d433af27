"""Compile ahead, on the core the data stage leaves idle, the bytecode the quick benchmark's later processes import.

Why: uv installs ``.venv`` without bytecode (shell/setup.sh), so in a fresh clone the first process to import a
module compiles it. On the 2-core cpu host that put about 39 s on the quick benchmark's first run against a warm
one (docs/PERFORMANCE.md, "The quick benchmark"), most of it in the first job (torch's FSDP and the Hugging Face
model classes), the history, the comparison and the page. Compiling all of site-packages at install instead was
slower (16,860 files for the about 3,000 the quick benchmark reads).

What: shell/quickstart.sh starts this module in the background, niced, while ``shell/data.sh`` runs, which is mostly
one process on one core. It imports the named modules and the transformers class of each model; every import writes
the bytecode the later processes then read. The same files are compiled either way, by whichever process imports
them first, so no result changes; quickstart stops this process before the first job, so no measured step shares
the CPU with it. A module that fails to import is skipped: this is a cache, never a check.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Sequence

from utils.spec.models import get_shape
from utils.spec.registry import MODELS


def warm(modules: Sequence[str], models: Sequence[str]) -> list[str]:
    """Import each module, then each model's transformers class; return what could not be imported, and why."""
    skipped: list[str] = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # a cache: a failure only means the module is compiled later
            skipped.append(f"{name}: {type(exc).__name__}")
    if models:
        try:
            transformers = importlib.import_module("transformers")
            for model in models:
                getattr(transformers, get_shape(model).hf_architecture)  # transformers imports the class lazily
        except Exception as exc:
            skipped.append(f"transformers classes: {type(exc).__name__}")
    return skipped


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m utils.machine.bytecode",
        description="Import modules (and each model's transformers class) so that their bytecode is written before "
                    "the processes that need it start; used by shell/quickstart.sh in the background. Always exits 0.")
    parser.add_argument("modules", nargs="*", help="modules to import, e.g. torch.distributed.fsdp evaluate.compare")
    parser.add_argument("--models", default="", help=f"space-separated models ({', '.join(MODELS)}): their "
                                                     "transformers classes are imported too")
    args = parser.parse_args(argv)
    models = [model for model in args.models.split() if model in MODELS]
    started = time.monotonic()
    skipped = warm(args.modules, models)
    print(f"bytecode: {len(args.modules)} module(s) and {len(models)} model class(es) imported in "
          f"{time.monotonic() - started:.1f}s" + (f"; skipped: {'; '.join(skipped)}" if skipped else ""),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
