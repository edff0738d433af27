"""Issue 26 item 3: manifests are read through typed models; a malformed one is one line, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data import encode, verify
from data.common import DataError
from data.manifest import ManifestMalformed, load_manifest
from data.ready import check_dataset, dataset_problem
from utils.config.load import load_config

LINE = "manifest malformed: outputs must be a mapping"


def _break_encode_manifest(data_dir: Path, model: str = "llama", **fields: object) -> Path:
    path = Path(f"{data_dir / f'sample-{model}_text_document'}.manifest.json")
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest.update(fields or {"outputs": [1, 2]})
    path.write_text(json.dumps(manifest), encoding="utf-8")
    return path


@pytest.mark.parametrize("force", [False, True])
def test_verify_says_one_line_with_or_without_force(data_copy: Path, capsys: pytest.CaptureFixture[str],
                                                     force: bool) -> None:
    path = _break_encode_manifest(data_copy)
    assert verify.main(["--model", "llama", *(["--force"] if force else [])]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == f"data.verify: FAILED: {path}: {LINE}"
    assert len(err) == 2 and "Traceback" not in "\n".join(err)
    assert not Path(f"{data_copy / 'sample-llama_text_document'}.verify.json").exists()


def test_ready_refuses_with_the_same_line(data_copy: Path) -> None:
    path = _break_encode_manifest(data_copy)
    with pytest.raises(DataError) as info:
        check_dataset(load_config(), "llama")
    assert str(info.value) == f"{path}: {LINE}"


def test_the_launchers_reason_is_that_line(data_copy: Path) -> None:
    """data/ready.py's DataError is the launcher's reason (train/launch/checks.py), for the failed result."""
    path = _break_encode_manifest(data_copy)
    reason = dataset_problem(load_config(), "llama")
    assert reason == f"dataset not usable: {path}: {LINE}"


def test_encode_redoes_a_malformed_manifest(data_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _break_encode_manifest(data_copy, "qwen")
    assert encode.main(["--model", "qwen", "--no-progress"]) == 0
    assert LINE in capsys.readouterr().out
    assert isinstance(json.loads(path.read_text(encoding="utf-8"))["outputs"], dict)


@pytest.mark.parametrize(("content", "problem"), [
    ({"outputs": {"a.bin": {"sha256": 5, "bytes": 1}}}, "outputs.a.bin.sha256 must be a string"),
    ({"outputs": {"a.bin": {"sha256": "0" * 64, "bytes": "12"}}}, "outputs.a.bin.bytes must be an integer"),
    ({"outputs": {"a.bin": {"sha256": "0" * 64, "bytes": -1}}}, "outputs.a.bin.bytes must not be negative"),
    ({"key": [1]}, "key must be a mapping"),
    ({"counts": None}, "counts must be a mapping"),
    ({"token_policy": {"policy": "other", "bos": False, "eod": True, "matches": "x"}},
     "token_policy.policy is not a known value"),
])
def test_each_shape_problem_is_named(tmp_path: Path, content: dict, problem: str) -> None:
    manifest = {"schema": 1, "stage": "encode", "key": {}, "outputs": {}, "counts": {}, **content}
    path = tmp_path / "x.manifest.json"
    path.write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(ManifestMalformed) as info:
        load_manifest(path)
    assert str(info.value) == f"{path}: manifest malformed: {problem}"


def test_not_an_object_and_oversized_manifests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "x.manifest.json"
    path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ManifestMalformed, match="not a JSON object"):
        load_manifest(path)
    path.write_text("{" * 100_000, encoding="utf-8")  # deep nesting: not JSON we can read, so "missing"
    assert load_manifest(path) is None
    from data import manifest

    monkeypatch.setattr(manifest, "MAX_MANIFEST_BYTES", 10)
    path.write_text(json.dumps({"schema": 1}), encoding="utf-8")
    with pytest.raises(ManifestMalformed, match="larger than 10 bytes"):
        load_manifest(path)


def test_a_manifest_that_is_no_regular_file_is_redone_without_blocking(tmp_path: Path) -> None:
    """Read through utils/io/json_input.py: a FIFO (which a plain read would wait on forever) is not a manifest."""
    import os

    path = tmp_path / "fifo.manifest.json"
    os.mkfifo(path)
    assert load_manifest(path) is None
