"""Where the suite's build and cache folders live: inside the checkout, never in the home folder.

Why: DeepSpeed compiles its CPU ops into ``TORCH_EXTENSIONS_DIR`` (default
``~/.cache/torch_extensions``), a folder every checkout on the machine shared. An op half-built
by another checkout failed ``tests/unit/train/frameworks/test_deep.py`` with ``AttributeError: ... vector_kernel_level``
in a fresh clone (issue 20). Matplotlib, fontconfig, Triton and Hugging Face keep caches in the
home folder the same way. Each checkout now keeps its own under ``<checkout>/.cache/`` (git- and
docker-ignored): a second run in the same clone reuses the ~45 s op build, another clone never
sees it.

``shell/test.sh`` (the README's test command) exports exactly :func:`cache_environ` (a test holds
the two equal); ``tests/conftest.py`` sets the same values when pytest is started directly and a
variable is not already set.
"""

from __future__ import annotations

from pathlib import Path

CACHE_FOLDER = ".cache"

# Variable -> folder under <checkout>/.cache. Each names where a library the suite runs writes
# its cache or build output when the variable is unset (the default in the comment).
CACHE_DIRS: dict[str, str] = {
    "TORCH_EXTENSIONS_DIR": "torch_extensions",  # ~/.cache/torch_extensions: DeepSpeed's CPU ops
    "TRITON_CACHE_DIR": "triton",  # ~/.triton/cache: compiled Triton kernels
    "TORCHINDUCTOR_CACHE_DIR": "torchinductor",  # /tmp/torchinductor_<user>: torch.compile
    "HF_HOME": "huggingface",  # ~/.cache/huggingface: hub, datasets and modules caches
    "MPLCONFIGDIR": "matplotlib",  # ~/.config/matplotlib and ~/.cache/matplotlib: the font list
    "XDG_CACHE_HOME": "xdg",  # ~/.cache: fontconfig and anything else following the XDG rule
}


def cache_environ(root: Path) -> dict[str, str]:
    """``{variable: <root>/.cache/<folder>}`` for every cache the suite may write."""
    return {name: str(root / CACHE_FOLDER / folder) for name, folder in CACHE_DIRS.items()}
