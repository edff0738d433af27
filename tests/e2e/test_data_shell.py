"""shell/data.sh: thin, shellcheck-clean, stops at the first failing stage, builds verified sample data."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers.paths import REPO
from tests.helpers.workload import tiny_environ

SCRIPT = REPO / "shell" / "data.sh"


def test_help_and_unknown_argument() -> None:
    ok = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True, timeout=30)
    assert ok.returncode == 0 and "data.fetch" in ok.stdout
    bad = subprocess.run(["bash", str(SCRIPT), "--bogus"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "unknown argument" in bad.stderr


def test_shellcheck_clean() -> None:
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "shellcheck"), "-x", str(SCRIPT)],
                          capture_output=True, text=True, timeout=60, cwd=REPO / "shell")
    assert proc.returncode == 0, proc.stdout


def test_stops_at_first_failing_stage(tmp_path: Path) -> None:
    env = tiny_environ(tmp_path / "data", tmp_path / "out", DATASET=f"local:{tmp_path / 'absent.jsonl'}")
    proc = subprocess.run(["bash", str(SCRIPT), "--no-progress"], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1
    assert "absent.jsonl" in proc.stderr and "data.fetch failed" in proc.stderr
    assert "== data.clean ==" not in proc.stdout


def test_a_bad_config_is_one_line_before_any_stage(tmp_path: Path) -> None:
    env = tiny_environ(tmp_path / "data", tmp_path / "out", DATASET="nonsense")
    proc = subprocess.run(["bash", str(SCRIPT), "--no-progress"], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "config error: DATASET='nonsense': allowed values are bc, c4, sample, local:<path>"]
    assert "== data." not in proc.stdout


@pytest.mark.slow
def test_sample_pipeline_end_to_end(sample_data_dir: Path) -> None:
    """The session fixture ran `DATASET=sample shell/data.sh`; both models must be verified datasets."""
    for model in ("llama", "qwen", "mistral"):
        prefix = sample_data_dir / f"sample-{model}_text_document"
        assert Path(f"{prefix}.bin").stat().st_size > 0
        report = json.loads(Path(f"{prefix}.verify.json").read_text())
        assert report["stage"] == "verify" and report["counts"]["documents"] > 0
        assert report["counts"]["dtype"] == "uint16"
        assert (sample_data_dir / "tokenizers" / f"sample-{model}" / "tokenizer.json").is_file()
