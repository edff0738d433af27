"""purge.sh refuses dangerous paths and removes only what tprimat generated; wrap.sh packs output/."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.helpers_shell import REPO, clean_env, copy_repo, run_script


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = copy_repo(tmp_path / "repo")
    (root / "output" / ".gitkeep").touch()
    (root / "output" / "train_cpu_tran_llama.json").write_text("{}")
    (root / "output" / "logs").mkdir()
    (root / "output" / "logs" / "run.log").write_text("log")
    (root / "utils" / "__pycache__").mkdir()
    (root / "utils" / "__pycache__" / "x.pyc").write_bytes(b"0")
    (root / ".pytest_cache").mkdir()
    (root / "output.zip").write_bytes(b"zip")
    (root / "data_cache" / "sample").mkdir(parents=True)
    (root / "data_cache" / "sample" / "raw.jsonl").write_text("{}")
    return root


def _guard(path: str, tmp_path: Path, root: Path = REPO, **env: str):
    """Call tprimat_safe_target directly (the function every purge target passes through)."""
    script = f'source "{root}/shell/platform.sh"; source "{root}/shell/paths.sh"; tprimat_safe_target X "$1"'
    return subprocess.run(["bash", "-c", script, "guard", path], env=clean_env(tmp_path, **env),
                          capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("path", ["", "/", "..", "output/../..", "/tmp/../etc"])
def test_guard_refuses(path: str, tmp_path: Path) -> None:
    proc = _guard(path, tmp_path)
    assert proc.returncode == 1
    assert "refusing" in proc.stderr and proc.stdout == ""


def test_guard_refuses_home_repo_and_outside(tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    for path in (env["HOME"], str(REPO), str(REPO.parent), "/usr/lib", str(tmp_path / "elsewhere")):
        proc = _guard(path, tmp_path)
        assert proc.returncode == 1, path
    assert _guard(str(REPO / "output"), tmp_path).stdout.strip() == str(REPO / "output")


def test_guard_allows_the_container_data_mount_only_in_a_container(tmp_path: Path) -> None:
    # Only the tprimat image's marker counts: this test machine may itself be a container.
    assert _guard("/data/tprimat", tmp_path).returncode == 1
    assert _guard("/data/tprimat", tmp_path, TPRIMAT_IN_CONTAINER="1").returncode == 0
    assert _guard("/data", tmp_path, TPRIMAT_IN_CONTAINER="1").returncode == 1


@pytest.mark.parametrize("value", ["/", "..", "../..", "output/../../x"])
def test_purge_refuses_dangerous_output_dir(repo: Path, tmp_path: Path, value: str) -> None:
    proc = run_script(repo, "shell/purge.sh", env=clean_env(tmp_path, OUTPUT_DIR=value))
    assert proc.returncode != 0
    assert "refusing" in proc.stderr
    assert (repo / "output" / "train_cpu_tran_llama.json").exists(), "nothing removed"
    assert (repo / "utils" / "__pycache__").exists()


def test_purge_refuses_home_as_output_dir(repo: Path, tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    (Path(env["HOME"]) / "keep.txt").write_text("x")
    proc = run_script(repo, "shell/purge.sh", env={**env, "OUTPUT_DIR": env["HOME"]})
    assert proc.returncode == 1
    assert (Path(env["HOME"]) / "keep.txt").exists()


def test_purge_with_data_refuses_outside_data_dir(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "x").write_text("x")
    proc = run_script(repo, "shell/purge.sh", "--with-data", env=clean_env(tmp_path, DATA_DIR=str(outside)))
    assert proc.returncode == 1
    assert (outside / "x").exists()
    assert (repo / "output" / "train_cpu_tran_llama.json").exists()


@pytest.mark.parametrize(("flag", "key", "value", "kept"), [
    ("--with-data", "DATA_DIR", "data", "data/common.py"),   # DATA_DIR=data is the data/ package
    ("", "OUTPUT_DIR", "shell", "shell/purge.sh"),
])
def test_purge_refuses_a_directory_of_the_project_itself(repo: Path, tmp_path: Path, flag: str, key: str,
                                                          value: str, kept: str) -> None:
    """No git in the copy: the *.py/*.sh fallback decides."""
    proc = run_script(repo, "shell/purge.sh", *filter(None, [flag]), env=clean_env(tmp_path, **{key: value}))
    assert proc.returncode == 1
    assert "project's own files" in proc.stderr
    assert (repo / kept).exists()
    assert (repo / "output" / "train_cpu_tran_llama.json").exists(), "nothing removed"


def test_purge_refuses_a_tracked_directory_without_code(repo: Path, tmp_path: Path) -> None:
    """With git, tracked files decide: docs/ holds no *.py or *.sh but is still the project's."""
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "docs", "output/.gitkeep"], check=True)
    env = clean_env(tmp_path, OUTPUT_DIR="docs")
    env["GIT_CONFIG_GLOBAL"] = "/dev/null"
    proc = run_script(repo, "shell/purge.sh", env=env)
    assert proc.returncode == 1 and "docs/" in proc.stderr
    assert (repo / "docs" / "DOCKER.md").exists()
    # output/ holds only a tracked .gitkeep: still purged
    assert run_script(repo, "shell/purge.sh", env=clean_env(tmp_path)).returncode == 0
    assert sorted(p.name for p in (repo / "output").iterdir()) == [".gitkeep"]


def test_purge_with_empty_output_dir_uses_the_repo_default(repo: Path, tmp_path: Path) -> None:
    """OUTPUT_DIR= (empty) means ./output: purge empties exactly that, keeps .gitkeep and data."""
    proc = run_script(repo, "shell/purge.sh", env=clean_env(tmp_path, OUTPUT_DIR=""))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (repo / "output").iterdir()) == [".gitkeep"]
    assert not (repo / "utils" / "__pycache__").exists()
    assert not (repo / ".pytest_cache").exists()
    assert not (repo / "output.zip").exists()
    assert (repo / "data_cache" / "sample" / "raw.jsonl").exists(), "data needs --with-data"
    assert (repo / "utils" / "configure.py").exists() and (repo / "config.env").exists()


def test_purge_with_data_and_dry_run(repo: Path, tmp_path: Path) -> None:
    env = clean_env(tmp_path, DATA_DIR="data_cache")
    dry = run_script(repo, "shell/purge.sh", "--with-data", "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert "would remove data_cache/sample" in dry.stdout
    assert (repo / "data_cache" / "sample").exists()
    proc = run_script(repo, "shell/purge.sh", "--with-data", env=env)
    assert proc.returncode == 0, proc.stderr
    assert (repo / "data_cache").is_dir() and not any((repo / "data_cache").iterdir())


def test_wrap_zips_output(repo: Path, tmp_path: Path) -> None:
    proc = run_script(repo, "shell/wrap.sh", env=clean_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(repo / "output.zip") as archive:
        names = archive.namelist()
    assert "output/train_cpu_tran_llama.json" in names and "output/logs/run.log" in names
    assert not list(repo.glob("output.zip.*")), "no partial archive left behind"


def test_wrap_refuses_a_leaked_secret(repo: Path, tmp_path: Path) -> None:
    token = "hf_LEAKEDtokenabcdefghijk"
    (repo / "secrets.env").write_text(f"HF_TOKEN={token}\n")
    (repo / "output" / "logs" / "run.log").write_text(f"header {token} trailer")
    (repo / "output.zip").unlink()
    proc = run_script(repo, "shell/wrap.sh", env=clean_env(tmp_path))
    assert proc.returncode == 1
    assert "run.log" in proc.stderr and token not in proc.stdout + proc.stderr
    assert not (repo / "output.zip").exists()


def test_wrap_refuses_env_files_and_empty_output(repo: Path, tmp_path: Path) -> None:
    (repo / "output" / "secrets.env").write_text("HF_TOKEN=x\n")
    assert run_script(repo, "shell/wrap.sh", env=clean_env(tmp_path)).returncode == 1
    empty = tmp_path / "empty-out"
    empty.mkdir()
    proc = run_script(repo, "shell/wrap.sh", env=clean_env(tmp_path, OUTPUT_DIR=str(empty)))
    assert proc.returncode == 1 and "no results" in proc.stderr
