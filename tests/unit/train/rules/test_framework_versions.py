"""The framework-versions producer and the MEGATRON_REF checks (no framework installed here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import REPO
from train.rules.versions import (
    RECORDED_COMMIT_FILE,
    MegatronRefError,
    check_megatron_ref,
    check_megatron_tree,
    framework_versions,
    tree_commit,
)
from utils.schema.hardware import FrameworkVersions

COMMIT = "847781764fe468c90caec16309deded245c1022c"


def _git_tree(path: Path) -> str:
    path.mkdir()
    run = {"cwd": path, "check": True, "capture_output": True}
    subprocess.run(["git", "init", "-q"], **run)
    (path / "pretrain_gpt.py").write_text("", encoding="utf-8")
    subprocess.run(["git", "add", "."], **run)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"], **run)
    subprocess.run(["git", "tag", "core_v9.9.9"], **run)
    return subprocess.run(["git", "rev-parse", "HEAD"], **run, text=True).stdout.strip()


@pytest.mark.parametrize("ref", ["core_v0.12.0", COMMIT, "847781764f", "main"])
def test_well_formed_refs(ref: str):
    assert check_megatron_ref(ref) == ref


@pytest.mark.parametrize("ref", ["", "a b", "x;rm -rf /", "../../etc", "-x"])
def test_malformed_refs_name_the_key(ref: str):
    with pytest.raises(MegatronRefError, match="MEGATRON_REF="):
        check_megatron_ref(ref)


def test_recorded_commit_wins_over_git(tmp_path: Path):
    tree = tmp_path / "megatron-lm"
    _git_tree(tree)
    (tree / RECORDED_COMMIT_FILE).write_text(f"core_v0.12.0 {COMMIT}\n", encoding="utf-8")
    assert tree_commit(tree) == (COMMIT, f"recorded at image build in {tree / RECORDED_COMMIT_FILE}")
    assert check_megatron_tree(tree, "core_v0.12.0") == COMMIT


def test_git_tree_is_checked_against_the_ref(tmp_path: Path):
    tree = tmp_path / "megatron-lm"
    head = _git_tree(tree)
    assert check_megatron_tree(tree, "core_v9.9.9") == head  # a tag resolved in the tree
    assert check_megatron_tree(tree, head[:10]) == head  # an abbreviated commit
    with pytest.raises(MegatronRefError, match=r"not MEGATRON_REF=core_v0\.12\.0.*rebuild the image"):
        check_megatron_tree(tree, "core_v0.12.0")


def test_unknown_commit_is_one_line_naming_the_ref(tmp_path: Path):
    tree = tmp_path / "plain"
    tree.mkdir()
    with pytest.raises(MegatronRefError) as caught:
        check_megatron_tree(tree, COMMIT)
    assert "commit unknown" in str(caught.value) and f"MEGATRON_REF={COMMIT}" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_versions_of_this_process(tmp_path: Path):
    tree = tmp_path / "megatron-lm"
    head = _git_tree(tree)
    versions = framework_versions("mega", megatron_tree=tree)
    assert isinstance(versions, FrameworkVersions)
    assert versions.megatron_lm_commit == head and versions.torch and versions.transformers
    assert versions.nemo is None and "nemo" in versions.unknown
    assert versions.cuda is None and "CPU build" in versions.unknown["cuda"]
    assert "primus" in versions.unknown and versions.primus is None


def test_primus_version_from_its_tree(tmp_path: Path):
    tree = tmp_path / "primus"
    head = _git_tree(tree)
    versions = framework_versions("prim", megatron_tree=tmp_path / "absent", primus_tree=tree)
    assert versions.primus_commit == head and versions.primus == "core_v9.9.9"
    assert versions.megatron_lm_commit is None and "does not exist" in versions.unknown["megatron_lm_commit"]


def test_nemo_runs_no_tree_of_its_own():
    versions = framework_versions("nemo")
    assert versions.megatron_lm_commit is None and "megatron-core only" in versions.unknown["megatron_lm_commit"]


def test_mega_records_its_trees_megatron_core_not_the_installed_one(tmp_path: Path):
    """mega imports the MEGATRON_REF tree's megatron package; the NeMo image's installed megatron-core is 0.12."""
    tree = tmp_path / "megatron-lm"
    _git_tree(tree)
    info = tree / "megatron" / "core" / "package_info.py"
    info.parent.mkdir(parents=True)
    info.write_text("MAJOR = 0\nMINOR = 15\nPATCH = 0\nPRE_RELEASE = 'rc8'\n", encoding="utf-8")
    versions = framework_versions("mega", megatron_tree=tree)
    assert versions.megatron_core == "0.15.0rc8" and "megatron_core" not in versions.unknown
    info.unlink()
    assert "package_info" in framework_versions("mega", megatron_tree=tree).unknown["megatron_core"]


def test_a_copy_inside_another_checkout_is_not_given_that_checkouts_commit(tmp_path: Path):
    """A framework tree copied without .git into another repository (the conformance runner's Primus tree under
    .side/) once reported the enclosing checkout's HEAD: git walks up. Only the tree's own repository counts."""
    outer = tmp_path / "checkout"
    _git_tree(outer)
    copy = outer / ".side" / "primus_v0.5.0"
    copy.mkdir(parents=True)
    commit, how = tree_commit(copy)
    assert commit is None and "neither" in how
    assert tree_commit(outer)[0] is not None  # its own repository still counts


ASK_STACK = ("import json, sys; from train.rules.versions import _accelerator_stack; "
             "print(json.dumps([_accelerator_stack(), 'torch' in sys.modules]))")


def _stack_in_a_fresh_interpreter(pythonpath: str | None = None) -> tuple[list, bool]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [pythonpath, str(REPO)]))}
    done = subprocess.run([sys.executable, "-c", ASK_STACK], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120, check=True)
    stack, imported = json.loads(done.stdout)
    return stack, imported


def test_the_accelerator_stack_is_torchs_own_answer_without_importing_torch():
    """The launcher's process reads torch/version.py alone: the same answer as torch.version, and no torch import."""
    import torch

    stack, imported = _stack_in_a_fresh_interpreter()
    assert stack == [torch.version.cuda, torch.version.hip, f"torch {torch.__version__} is a CPU build"]
    assert imported is False


def test_a_rocm_build_is_named_from_its_version_file(tmp_path: Path):
    """A torch whose version.py says HIP (as a ROCm wheel's does): that version, read, not imported."""
    fake = tmp_path / "site" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('importing this torch is not expected')\n")
    (fake / "version.py").write_text("__version__ = '2.9.0+rocm6.4'\ncuda = None\nhip = '6.4.43482'\n")
    stack, imported = _stack_in_a_fresh_interpreter(str(tmp_path / "site"))
    assert stack == [None, "6.4.43482", None] and imported is False
