"""purge.sh deletes only what tprimat generated; wrap.sh never packs a secret or follows a link.

Both run in a throwaway copy of the repository (tests/helpers/shell.py); the .git cases use a real git
repository made in the copy.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers.shell import REPO, clean_env, run_script
from utils.files.generated import RootError, check_root
from utils.files.locks import hold, result_lock_path

GENERATED_OUTPUT = [
    "train_cpu_tran_llama.json", "train_amd_prim_qwen_r2.json", "train_cpu_tran_llama.steps.jsonl", "compare.png",
    "compare.md", "loss_parity.png", "report.html", "gate.json", ".train_cpu_tran_llama.json.tmp-123",
    "logs/train_cpu_tran_llama.log",
    "logs/train_amd_prim_llama.primus_train.log", "generated/train_amd_prim_llama.primus.yaml",
    "profiles/train_cpu_tran_llama_rank0.json", "nemo/train_nvd_nemo_llama/lightning_logs/x",
    "nemo/index_cache/a.npy", "primus/anything", ".tprimat/train_cpu_tran_llama.json.lock",
    ".tprimat/output-folder",
]
NOT_OURS = ["notes.txt", "train_notes.json", "logs/HEAD", "logs/refs/heads/main", "generated/mine.yaml",
            "nemo/other/x", "keep/train_cpu_tran_llama.json"]


def _make(root: Path, names: list[str]) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name)


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink()}


@pytest.fixture
def repo(repo: Path) -> Path:
    """The shared copy (tests/e2e/conftest.py) filled with what purge.sh removes: outputs, caches, output.zip, data."""
    (repo / "output" / ".gitkeep").touch()
    _make(repo / "output", GENERATED_OUTPUT)
    (repo / "utils" / "__pycache__").mkdir()
    (repo / "utils" / "__pycache__" / "x.pyc").write_bytes(b"0")
    (repo / ".pytest_cache").mkdir()
    (repo / "output.zip").write_bytes(b"zip")
    _make(repo / "data_cache", ["sample/raw.jsonl"])
    return repo


def _git_repo(root: Path) -> dict[str, str]:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for argv in (["init", "-q"], ["add", "-A"],  # .gitignore keeps outputs, data and .venv out
                 ["add", "-f", "output/.gitkeep"], ["commit", "-qm", "code"]):
        subprocess.run(["git", "-C", str(root), *argv], check=True, env=env, capture_output=True)
    return env


# ---------------------------------------------------------------------------
# roots


@pytest.mark.parametrize("given", ["", "/", "..", "output/../..", "/tmp/../etc"])
def test_roots_refused_as_written(given: str, tmp_path: Path) -> None:
    with pytest.raises(RootError, match="refusing OUTPUT_DIR"):
        check_root(Path(given or "."), "OUTPUT_DIR", REPO, tmp_path, given=given)


def test_roots_refused_wherever_they_lead(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / "pyvenv.cfg").write_text("home = /usr\n")
    links = tmp_path / "links"
    links.mkdir()
    # A clone under /tmp holds pytest's tmp_path (the test's home) in its parent: the home check answers first.
    parent_why = "home folder" if tmp_path.resolve().is_relative_to(REPO.parent.resolve()) else "the repository"
    refused = {home: "home folder", tmp_path: "home folder", REPO: "the repository", REPO.parent: parent_why,
               REPO / "docs": "project's own files", REPO / "data": "project's own files", venv: "virtual environment"}
    for target, why in list(refused.items()):
        link = links / f"to-{len(list(links.iterdir()))}"
        link.symlink_to(target)
        refused[link] = why
    for path, why in refused.items():
        with pytest.raises(RootError, match=why):
            check_root(path, "OUTPUT_DIR", REPO, home)
    assert check_root(tmp_path / "elsewhere" / "out", "OUTPUT_DIR", REPO, home) == tmp_path / "elsewhere" / "out"


def test_output_dir_dot_git_in_a_real_clone_is_refused_and_git_is_intact(repo: Path, tmp_path: Path) -> None:
    git_env = _git_repo(repo)
    (repo / ".git" / "logs" / "train_cpu_tran_llama.log").write_text("would match a log name")
    before = _tree(repo / ".git")
    for given in (".git", str(repo / ".git"), ".git/objects", ".git/logs", ".venv"):
        proc = run_script(repo, "shell/purge.sh", env=clean_env(tmp_path, OUTPUT_DIR=given))
        assert proc.returncode == 1, (given, proc.stdout, proc.stderr)
        assert "refusing OUTPUT_DIR" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert _tree(repo / ".git") == before
    assert subprocess.run(["git", "-C", str(repo), "fsck", "--no-progress"], env=git_env,
                          capture_output=True).returncode == 0
    assert (repo / "output" / "train_cpu_tran_llama.json").exists(), "nothing removed anywhere"


def test_a_git_clone_elsewhere_is_not_an_output_folder(repo: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    _git_repo(repo)
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True, capture_output=True)
    (clone / "train_cpu_tran_llama.json").write_text("x")
    proc = run_script(repo, "shell/purge.sh", env=clean_env(tmp_path, OUTPUT_DIR=str(clone)))
    assert proc.returncode == 1 and "is a git repository" in proc.stderr
    assert (clone / "train_cpu_tran_llama.json").exists()


def test_a_tracked_folder_without_code_is_the_projects(repo: Path, tmp_path: Path) -> None:
    _git_repo(repo)
    proc = run_script(repo, "shell/purge.sh", env=clean_env(tmp_path, OUTPUT_DIR="docs"))
    assert proc.returncode == 1 and "project's own files (e.g. docs/" in proc.stderr
    assert (repo / "docs" / "DOCKER.md").exists()


# ---------------------------------------------------------------------------
# what goes


def test_only_generated_files_go_from_a_folder_holding_others(repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "mixed"
    _make(out, GENERATED_OUTPUT + NOT_OURS)
    secret = tmp_path / "secret.txt"
    secret.write_text("keep me")
    (out / "logs" / "train_link.log").symlink_to(secret)
    (out / "profiles" / "elsewhere").symlink_to(tmp_path, target_is_directory=True)
    (out / "train_cpu_tran_qwen.json").symlink_to(secret)
    proc = run_script(repo, "shell/purge.sh", env=clean_env(tmp_path, OUTPUT_DIR=str(out)))
    assert proc.returncode == 0, proc.stderr
    assert _tree(out) == {*NOT_OURS, "logs/train_link.log", "profiles/elsewhere", "train_cpu_tran_qwen.json"}
    assert secret.read_text() == "keep me" and (tmp_path / "repo").is_dir(), "links are never followed"
    assert not (out / "primus").exists() and not (out / ".tprimat").exists()
    assert not (out / "nemo" / "index_cache").exists()


def test_purge_refuses_a_folder_tprimat_did_not_write(repo: Path, tmp_path: Path) -> None:
    """Issue 49: purge deleted a user's own report.html and compare.md from a folder without tprimat's marker."""
    out = tmp_path / "mine"
    _make(out, ["report.html", "compare.md", "train_cpu_tran_llama.json", ".tprimat/x.lock"])
    proc = run_script(repo, "shell/purge.sh", env=clean_env(tmp_path, OUTPUT_DIR=str(out)))
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "holds no .tprimat/output-folder marker" in proc.stderr and "nothing removed" in proc.stderr
    assert _tree(out) == {"report.html", "compare.md", "train_cpu_tran_llama.json", ".tprimat/x.lock"}
    assert (repo / "output.zip").exists(), "nothing at all is removed"


def test_default_output_is_emptied_and_data_needs_with_data(repo: Path, tmp_path: Path) -> None:
    proc = run_script(repo, "shell/purge.sh", env=clean_env(tmp_path, OUTPUT_DIR=""))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (repo / "output").iterdir()) == [".gitkeep"]
    assert not (repo / "utils" / "__pycache__").exists() and not (repo / ".pytest_cache").exists()
    assert not (repo / "output.zip").exists()
    assert (repo / "data_cache" / "sample" / "raw.jsonl").exists(), "data needs --with-data"
    assert (repo / "utils" / "config" / "load.py").exists() and (repo / "config.env").exists()
    assert (repo / ".venv" / "bin" / "python").exists()
    assert run_script(repo, "shell/purge.sh", env=clean_env(tmp_path)).stdout.strip() == "purge: nothing to remove"


def test_with_data_and_dry_run(repo: Path, tmp_path: Path) -> None:
    (repo / "data_cache" / "mine.txt").write_text("a user's file")
    env = clean_env(tmp_path, DATA_DIR="data_cache")
    dry = run_script(repo, "shell/purge.sh", "--with-data", "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert "would remove data_cache/sample/raw.jsonl" in dry.stdout and "mine.txt" not in dry.stdout
    assert (repo / "data_cache" / "sample" / "raw.jsonl").exists() and (repo / "output.zip").exists()
    proc = run_script(repo, "shell/purge.sh", "--with-data", env=env)
    assert proc.returncode == 0, proc.stderr
    assert _tree(repo / "data_cache") == {"mine.txt"}


def test_data_the_pipeline_wrote_is_all_recognised(tmp_path: Path, sample_data_dir: Path) -> None:
    """Every file the real data stages left (shell/data.sh's session build) goes with --with-data."""
    import shutil

    from utils.files.purge import plan_purge, purge

    data = tmp_path / "data"
    shutil.copytree(sample_data_dir, data)
    out = tmp_path / "out"
    planned = plan_purge(REPO, out, data, with_data=True, home=tmp_path)
    purge([(root, target) for root, target in planned if root != Path(os.path.realpath(REPO))], REPO, dry_run=False)
    assert _tree(data) == set(), sorted(_tree(data))


def test_the_output_names_are_the_writers_names(tmp_path: Path) -> None:
    """The table recognises what each writer names its files (a renamed writer fails here first)."""
    from train.launch.context import log_path_for
    from train.nemo.plugin import nemo_dirs
    from utils.config.load import load_config
    from utils.files.generated import output_targets
    from utils.result.file import result_path
    from utils.result.step_log import step_log_path

    cfg = load_config(environ={"TPRIMAT_CONFIG": str(REPO / "config.env"), "OUTPUT_DIR": str(tmp_path),
                               "NNODES": "2", "DP": "16"})
    result = result_path(cfg.output_dir, "nvd", "nemo", "qwen", 3)
    log_dir, index_dir = nemo_dirs(cfg, result.stem)
    written = [result, step_log_path(result), log_path_for(cfg, "nvd", "nemo", "qwen", 3),
               result_lock_path(result), log_dir / "events", index_dir / "x.npy",
               cfg.output_dir / "logs" / f"{result.stem}.nemo_overrides.json"]
    for path in written:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    covered = {t.path for t in output_targets(tmp_path)}
    for path in written:
        assert path in covered or any(parent in covered for parent in path.parents), path


def test_a_running_job_blocks_the_purge(repo: Path, tmp_path: Path) -> None:
    result = repo / "output" / "train_cpu_tran_llama.json"
    with hold(result_lock_path(result), "r", command="a running launcher"):
        proc = run_script(repo, "shell/purge.sh", env=clean_env(tmp_path))
    assert proc.returncode == 1 and "a running launcher is writing there now" in proc.stderr
    assert result.exists()


# ---------------------------------------------------------------------------
# wrap


def _names(archive: Path) -> list[str]:
    with zipfile.ZipFile(archive) as zipped:
        return zipped.namelist()


def test_wrap_zips_output(repo: Path, tmp_path: Path) -> None:
    proc = run_script(repo, "shell/wrap.sh", env=clean_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    names = _names(repo / "output.zip")
    assert "output/train_cpu_tran_llama.json" in names and "output/logs/train_cpu_tran_llama.log" in names
    assert "output/report.html" in names  # the page, self-contained: it opens from inside the archive
    assert not any(".tprimat" in n or ".tmp-" in n for n in names), "bookkeeping and temp files stay out"
    assert not list(repo.glob(".output.zip.tmp-*")), "no partial archive left behind"


TOKEN = "hf_LEAKEDtokenabcdefghijk"


@pytest.mark.parametrize("line", [
    f"HF_TOKEN={TOKEN}\n",
    f"HF_TOKEN={TOKEN}  # mine, do not share\n",
    f"HF_TOKEN={TOKEN}\r\n",
    f'export HF_TOKEN="{TOKEN}"\r\n',
    f"\ufeffHF_TOKEN='{TOKEN}' # quoted\n",
], ids=["plain", "comment", "crlf", "export-quotes-crlf", "bom-single-quotes"])
def test_wrap_refuses_the_token_however_secrets_env_writes_it(repo: Path, tmp_path: Path, line: str) -> None:
    (repo / "secrets.env").write_text(line, newline="")
    (repo / "output" / "logs" / "train_cpu_tran_llama.log").write_text(f"header {TOKEN} trailer")
    (repo / "output.zip").unlink()
    proc = run_script(repo, "shell/wrap.sh", env=clean_env(tmp_path))
    assert proc.returncode == 1
    assert "logs/train_cpu_tran_llama.log" in proc.stderr and "secret value (not shown)" in proc.stderr
    assert TOKEN not in proc.stdout + proc.stderr
    assert not (repo / "output.zip").exists()


def test_wrap_refuses_a_token_split_across_read_chunks(repo: Path, tmp_path: Path) -> None:
    from utils.files import wrap

    (repo / "output" / "logs" / "train_big.log").write_bytes(b"x" * (wrap.CHUNK - 5) + TOKEN.encode() + b"y" * 10)
    proc = run_script(repo, "shell/wrap.sh", env=clean_env(tmp_path, HF_TOKEN=TOKEN))
    assert proc.returncode == 1 and "train_big.log" in proc.stderr and TOKEN not in proc.stderr


def test_wrap_never_follows_a_link(repo: Path, tmp_path: Path) -> None:
    (repo / "secrets.env").write_text(f"HF_TOKEN={TOKEN}\n")
    (repo / "output" / "innocent.txt").symlink_to(repo / "secrets.env")
    outside = tmp_path / "outside"
    _make(outside, ["private.txt"])
    (repo / "output" / "more").symlink_to(outside, target_is_directory=True)
    proc = run_script(repo, "shell/wrap.sh", env=clean_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "skipped innocent.txt (a link to" in proc.stderr and "skipped more (a link to" in proc.stderr
    names = _names(repo / "output.zip")
    assert not any("innocent" in n or "more" in n or "private" in n for n in names)
    with zipfile.ZipFile(repo / "output.zip") as zipped:
        assert all(TOKEN.encode() not in zipped.read(n) for n in names)


def test_wrap_refuses_env_files_skips_fifos_and_empty_output(repo: Path, tmp_path: Path) -> None:
    os.mkfifo(repo / "output" / "a-fifo")
    (repo / "output" / "local.env").write_text("HF_TOKEN=x\n")
    proc = run_script(repo, "shell/wrap.sh", env=clean_env(tmp_path), timeout=60)
    assert proc.returncode == 1 and "local.env" in proc.stderr and "skipped a-fifo (not a regular file)" in proc.stderr
    empty = tmp_path / "empty-out"
    (empty / ".tprimat").mkdir(parents=True)
    (empty / ".tprimat" / "output-folder").write_text("tprimat's")
    proc = run_script(repo, "shell/wrap.sh", env=clean_env(tmp_path, OUTPUT_DIR=str(empty)))
    assert proc.returncode == 1 and "no results" in proc.stderr


@pytest.mark.parametrize("given", ["/", "HOME", ".git"])
def test_wrap_refuses_folders_that_are_not_outputs(repo: Path, tmp_path: Path, given: str) -> None:
    env = clean_env(tmp_path)
    proc = run_script(repo, "shell/wrap.sh", env={**env, "OUTPUT_DIR": env["HOME"] if given == "HOME" else given})
    assert proc.returncode == 1 and "refusing OUTPUT_DIR" in proc.stderr
    assert (repo / "output.zip").read_bytes() == b"zip", "the old archive is untouched"


def test_help_of_both() -> None:
    for script in ("shell/purge.sh", "shell/wrap.sh"):
        proc = subprocess.run(["bash", str(REPO / script), "--help"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and "usage" in proc.stdout.lower(), sys.executable
