"""The quick benchmark's bytecode warm-up (utils/machine/bytecode.py): imports write bytecode, failures are skipped.

That shell/quickstart.sh stops it with everything else on a signal is tests/e2e/test_job_tree_signals.py (the SIGINT
test's process tree includes it).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from utils.machine import bytecode


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "tprimat_warm_good.py").write_text("VALUE = 1\n", encoding="utf-8")
    (tmp_path / "tprimat_warm_bad.py").write_text("raise RuntimeError('not importable here')\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    for name in ("tprimat_warm_good", "tprimat_warm_bad"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return tmp_path


def test_an_import_writes_its_bytecode_and_a_failing_one_is_named_not_raised(modules: Path) -> None:
    skipped = bytecode.warm(["tprimat_warm_good", "tprimat_warm_bad", "tprimat_warm_missing"], [])
    assert skipped == ["tprimat_warm_bad: RuntimeError", "tprimat_warm_missing: ModuleNotFoundError"]
    # a module that fails when run was still compiled first: its bytecode is there for the next process too
    assert sorted(path.name.split(".")[0] for path in (modules / "__pycache__").glob("*.pyc")) == [
        "tprimat_warm_bad", "tprimat_warm_good"]


def test_the_models_transformers_classes_are_imported(modules: Path) -> None:
    assert bytecode.warm([], ["llama", "qwen"]) == []
    transformers = sys.modules["transformers"]
    assert transformers.LlamaForCausalLM.__module__ in sys.modules
    assert transformers.Qwen2ForCausalLM.__module__ in sys.modules


def test_the_command_always_exits_0_and_says_what_it_skipped(modules: Path, capsys: pytest.CaptureFixture) -> None:
    assert bytecode.main(["tprimat_warm_good", "tprimat_warm_bad", "--models", "not-a-model"]) == 0
    err = capsys.readouterr().err
    assert "bytecode: 2 module(s) and 0 model class(es) imported" in err
    assert "skipped: tprimat_warm_bad: RuntimeError" in err
