"""MEGATRON_IMPL (transformer_engine | local): the config key, and compare's like-for-like rule.

The launcher and preflight parts (``--transformer-impl local`` and the fusions it turns off in the
mega/prim dry runs) live with train/ and are tested there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluate.fairness import check_fairness
from evaluate.results import load_directory
from tests.helpers_evaluate import make_result, workload_config
from utils.configure import ConfigError
from utils.result_model import EffectiveSettings


def test_default_is_transformer_engine_and_local_is_accepted():
    assert workload_config().megatron_impl == "transformer_engine"
    assert workload_config(MEGATRON_IMPL="local").megatron_impl == "local"


def test_an_unknown_implementation_is_one_line_naming_both():
    with pytest.raises(ConfigError, match=r"^MEGATRON_IMPL='te': allowed values are transformer_engine, local$"):
        workload_config(MEGATRON_IMPL="te")


def _with_impl(impl: str):
    def mutate(result):
        result.effective_settings = EffectiveSettings(settings={"transformer_impl": impl}, resolved_by="test")
    return mutate


def test_mixing_implementations_is_not_like_for_like(tmp_path: Path):
    make_result(tmp_path, "amd", "mega", mutate=_with_impl("transformer_engine"))
    make_result(tmp_path, "nvd", "mega", mutate=_with_impl("local"))
    report = check_fairness(load_directory(tmp_path).results)
    assert not report.fair
    (difference,) = report.differences
    assert difference.describe() == ("[llama] transformer_impl (Megatron's implementation: not like-for-like) differs: "
                                     "amd_mega_llama=transformer_engine, nvd_mega_llama=local")


@pytest.mark.parametrize("impl", ["transformer_engine", "local"])
def test_one_implementation_on_both_vendors_is_fair(tmp_path: Path, impl: str):
    make_result(tmp_path, "amd", "mega", mutate=_with_impl(impl))
    make_result(tmp_path, "nvd", "mega", mutate=_with_impl(impl))
    make_result(tmp_path, "nvd", "tran")  # no Megatron implementation to compare: not part of the rule
    assert check_fairness(load_directory(tmp_path).results).fair
