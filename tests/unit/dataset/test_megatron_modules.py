"""megatron-core's dataset modules without megatron/core/__init__.py (utils/dataset/megatron_modules.py).

Each case runs in a fresh interpreter, because what is under test is which modules an import loads. The three
megatron-core versions are the ones tprimat's own processes import: 0.16.1 (the cpu ``.venv``), 0.15.0 (the amd
image) and 0.12.0 (the nvd image), the last two from the side wheels of tests/helpers/megatron_core.py.
That the samples built this way are Megatron's, token for token, is tests/unit/train/rules/test_sample_order.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib.metadata import version

import pytest

from tests.helpers.megatron_core import side_env
from utils.config.model import REPO_ROOT

PROBE = textwrap.dedent("""
    import json, sys
    from utils.dataset import megatron_modules
    if sys.argv[1] == "broken":  # a version whose modules do not import this way: the ordinary import follows
        megatron_modules._FIRST = "megatron.core.no_such_module"
    builder, gpt, indexed = megatron_modules.import_dataset_modules(
        "blended_megatron_dataset_builder", "gpt_dataset", "indexed_dataset")
    light = {
        "classes": [builder.BlendedMegatronDatasetBuilder.__module__, gpt.GPTDataset.__name__,
                    indexed.IndexedDataset.__name__],
        "tensor_parallel": "megatron.core.tensor_parallel" in sys.modules,
        "file": builder.__file__,
    }
    answer = {"light": light}
    if sys.argv[2] == "submodule":  # the rest of megatron.core imported later, as a pytest worker or a probe may
        from megatron.core.transformer.transformer_layer import TransformerLayer
        import megatron.core.distributed.fsdp.mcore_fsdp_adapter
        answer["layer"] = TransformerLayer.__name__
    if sys.argv[2] == "light-only":
        print(json.dumps(answer))
        raise SystemExit(0)
    import megatron.core
    answer["version"] = megatron.core.__version__
    from megatron.core import DistributedDataParallel
    answer["ddp"] = DistributedDataParallel.__name__
    answer["after"] = "megatron.core.tensor_parallel" in sys.modules
    print(json.dumps(answer))
""")


def _probe(mode: str, pythonpath: str, then: str = "whole") -> dict:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    run = subprocess.run([sys.executable, "-c", PROBE, mode, then], capture_output=True, text=True, env=env,
                         cwd=REPO_ROOT, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


LIGHT_CLASSES = ["megatron.core.datasets.blended_megatron_dataset_builder", "GPTDataset", "IndexedDataset"]


def test_dataset_modules_load_without_the_package_init_which_runs_when_asked() -> None:
    """The dataset classes come from the installed megatron-core, tensor parallelism not imported; then the
    package's own names (its version, DistributedDataParallel) still answer, its __init__ run on demand."""
    answer = _probe("light", str(REPO_ROOT))
    assert answer["light"]["classes"] == LIGHT_CLASSES
    assert answer["light"]["tensor_parallel"] is False
    assert answer["version"] == version("megatron-core")
    assert answer["ddp"] == "DistributedDataParallel"
    assert answer["after"] is True


@pytest.mark.parametrize("wheel", ["0.15.0", "0.12.0"])
def test_the_images_megatron_core_versions_load_the_same_way(wheel: str) -> None:
    """The amd and nvd images' megatron-core: the same dataset modules, from that wheel, without its __init__."""
    root = side_env(wheel)
    answer = _probe("light", f"{root}{os.pathsep}{REPO_ROOT}", then="light-only")
    assert answer["light"]["classes"] == LIGHT_CLASSES
    assert answer["light"]["tensor_parallel"] is False
    assert answer["light"]["file"].startswith(str(root))


def test_a_version_that_does_not_import_this_way_gets_the_ordinary_import() -> None:
    """A failed light import leaves no half-imported module behind: the package is imported whole instead."""
    answer = _probe("broken", str(REPO_ROOT))
    assert answer["light"]["classes"][1:] == ["GPTDataset", "IndexedDataset"]
    assert answer["light"]["tensor_parallel"] is True
    assert answer["version"] == version("megatron-core")
    assert answer["ddp"] == "DistributedDataParallel"


def test_a_later_import_of_the_rest_of_megatron_core_runs_the_package_init_before_it() -> None:
    """Importing megatron.core's model code after the light import: the package's __init__ runs first, as in an
    ordinary import; run in the middle of that import instead, it broke into circular-import errors (the suite's
    test_tran_init.py and test_nemo_launcher.py in a worker that had built tran's samples before)."""
    answer = _probe("light", str(REPO_ROOT), then="submodule")
    assert answer["light"]["tensor_parallel"] is False
    assert answer["layer"] == "TransformerLayer"
    assert answer["version"] == version("megatron-core") and answer["after"] is True
