"""run_<step>.sh and entry.sh against a recording docker stand-in: the exact `docker run` argv."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.shell import (
    docker_calls,
    docker_env_file_modes,
    docker_env_files,
    flag_values,
    run_script,
    script_env,
)

STEPS = ("data", "train", "purge", "wrap")


def _run_call(env: dict[str, str]) -> tuple[int, list[str]]:
    calls = docker_calls(env)
    runs = [(i, c) for i, c in enumerate(calls, start=1) if c and c[0] == "run"]
    assert len(runs) == 1, f"expected one docker run, got {calls}"
    return runs[0]


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("platform", ["amd", "nvd"])
def test_run_step_argv(repo: Path, tmp_path: Path, platform: str, step: str) -> None:
    env = script_env(tmp_path, PLATFORM=platform, OUTPUT_DIR=str(repo / "output"))
    proc = run_script(repo, f"shell/run_{step}.sh", env=env)
    assert proc.returncode == 0, proc.stderr
    calls = docker_calls(env)
    assert calls[0] == ["info"], "the engine is probed first"
    assert ["image", "inspect", f"tprimat:{platform}"] in calls
    number, argv = _run_call(env)
    image_at = argv.index(f"tprimat:{platform}")
    assert argv[image_at + 1:] == ["bash", f"shell/{step}.sh"]
    opts = argv[:image_at]
    assert opts[0] == "run" and "--rm" in opts
    (name,) = flag_values(opts, "--name")
    assert re.fullmatch(rf"tprimat-{step}-\d+", name), "a named container, so a signal can reach it"
    if platform == "nvd":
        assert flag_values(opts, "--gpus") == ["all"]
        assert not any(o.startswith("--device") for o in opts)
    else:
        for flag in ("--device=/dev/kfd", "--device=/dev/dri", "--cap-add=SYS_PTRACE"):
            assert flag in opts
        assert flag_values(opts, "--group-add") == ["video"]
        assert flag_values(opts, "--security-opt") == ["seccomp=unconfined"]
        assert "--gpus" not in opts
    for flag in ("--ipc=host", "--network=host", "--shm-size=16g"):
        assert flag in opts
    assert flag_values(opts, "--ulimit") == ["memlock=-1", "stack=67108864"]
    assert flag_values(opts, "-v") == [
        f"{repo}:/workspace/code",
        f"{tmp_path / 'data'}:/data/tprimat",
        f"{tmp_path / 'hf'}:/root/.cache/huggingface",
    ]
    assert flag_values(opts, "-w") == ["/workspace/code"]
    env_values = flag_values(opts, "-e")
    for pair in (f"PLATFORM={platform}", "DATA_DIR=/data/tprimat", "OUTPUT_DIR=/workspace/code/output",
                 "HF_HOME=/root/.cache/huggingface"):
        assert pair in env_values
    # No secrets.env in the copy: exactly one env file, the rendered effective config.
    env_files = flag_values(opts, "--env-file")
    assert len(env_files) == 1 and "tprimat-docker.env" in env_files[0]
    assert not Path(env_files[0]).exists(), "the rendered config is removed after the run"
    (config_text,) = docker_env_files(env, number)
    lines = config_text.splitlines()
    assert "MODELS=llama qwen mistral" in lines, "values arrive unquoted (docker keeps quotes literally)"
    assert all("=" in line and not line.startswith("#") for line in lines)
    assert (tmp_path / "data").is_dir() and (tmp_path / "hf").is_dir(), "mount sources created"


def test_secret_from_secrets_env_travels_in_the_rendered_env_file_only(repo: Path, tmp_path: Path) -> None:
    token = "hf_TESTTOKENabcdefghijklmnop"
    (repo / "secrets.env").write_text(f"# comment\nHF_TOKEN={token}\n")
    env = script_env(tmp_path, PLATFORM="nvd")
    proc = run_script(repo, "shell/run_train.sh", env=env)
    assert proc.returncode == 0, proc.stderr
    number, argv = _run_call(env)
    env_files = flag_values(argv, "--env-file")
    assert len(env_files) == 1 and str(repo / "secrets.env") not in argv, "secrets.env is never handed to docker"
    assert not any(token in arg for arg in argv) and "HF_TOKEN" not in flag_values(argv, "-e")
    assert token not in proc.stdout + proc.stderr
    (rendered,) = docker_env_files(env, number)
    assert rendered.splitlines()[-1] == f"HF_TOKEN={token}"
    assert docker_env_file_modes(env, number) == ["600"], "only the owner may read a file holding the token"
    assert not Path(env_files[0]).exists(), "removed after the run"


def test_host_token_wins_over_secrets_env_and_stays_out_of_argv(repo: Path, tmp_path: Path) -> None:
    token = "hf_ENVtokenabcdefghijklmnop"
    (repo / "secrets.env").write_text("HF_TOKEN=hf_FILEtokenabcdefghijklmno\n")
    env = script_env(tmp_path, PLATFORM="nvd", HF_TOKEN=token, NCCL_SOCKET_IFNAME="eth7")
    assert run_script(repo, "shell/run_train.sh", env=env).returncode == 0
    number, argv = _run_call(env)
    values = flag_values(argv, "-e")
    assert "NCCL_SOCKET_IFNAME" in values, "tuning variables are forwarded by name"
    assert "HF_TOKEN" not in values and not any(token in arg for arg in argv)
    assert f"HF_TOKEN={token}" in docker_env_files(env, number)[0].splitlines()


def test_no_token_anywhere_means_no_token_line(repo: Path, tmp_path: Path) -> None:
    env = script_env(tmp_path, PLATFORM="amd")
    assert run_script(repo, "shell/run_train.sh", env=env).returncode == 0
    number, _ = _run_call(env)
    assert not [line for line in docker_env_files(env, number)[0].splitlines() if line.startswith("HF_TOKEN")]


def test_env_overrides_reach_the_container(repo: Path, tmp_path: Path) -> None:
    env = script_env(tmp_path, PLATFORM="amd", MBS="2", GA="4", NNODES="2", NODE_RANK="1", MASTER_ADDR="node0",
               GPUS_PER_NODE="4")
    assert run_script(repo, "shell/run_train.sh", env=env).returncode == 0
    number, _ = _run_call(env)
    lines = docker_env_files(env, number)[0].splitlines()
    for pair in ("MBS=2", "GA=4", "NNODES=2", "NODE_RANK=1", "MASTER_ADDR=node0", "GPUS_PER_NODE=4"):
        assert pair in lines


def test_output_dir_outside_repo_is_mounted(repo: Path, tmp_path: Path) -> None:
    env = script_env(tmp_path, PLATFORM="nvd", OUTPUT_DIR=str(tmp_path / "results"))
    assert run_script(repo, "shell/run_train.sh", env=env).returncode == 0
    _, argv = _run_call(env)
    assert f"{tmp_path / 'results'}:/output/tprimat" in flag_values(argv, "-v")
    assert "OUTPUT_DIR=/output/tprimat" in flag_values(argv, "-e")


@pytest.mark.parametrize("code", ["1", "3", "137"])
def test_container_exit_status_propagates(repo: Path, tmp_path: Path, code: str) -> None:
    env = script_env(tmp_path, PLATFORM="nvd", FAKE_DOCKER_RUN_RC=code)
    proc = run_script(repo, "shell/run_data.sh", env=env)
    assert proc.returncode == int(code)
    assert f"exited with status {code}" in proc.stderr


def test_missing_image_says_build_first(repo: Path, tmp_path: Path) -> None:
    env = script_env(tmp_path, PLATFORM="amd", FAKE_DOCKER_IMAGE_RC="1")
    proc = run_script(repo, "shell/run_train.sh", env=env)
    assert proc.returncode == 1
    assert "shell/build.sh" in proc.stderr
    assert not [c for c in docker_calls(env) if c[0] == "run"]


def test_arguments_pass_through_to_the_step(repo: Path, tmp_path: Path) -> None:
    env = script_env(tmp_path, PLATFORM="nvd")
    assert run_script(repo, "shell/run_purge.sh", "--with-data", env=env).returncode == 0
    _, argv = _run_call(env)
    assert argv[-3:] == ["bash", "shell/purge.sh", "--with-data"]


def test_cpu_runs_natively(repo: Path, tmp_path: Path) -> None:
    env = script_env(tmp_path, PLATFORM="cpu")
    proc = run_script(repo, "shell/run_purge.sh", "--dry-run", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "platform cpu has no container" in proc.stdout
    assert docker_calls(env) == []


def test_no_engine_runs_natively(repo: Path, tmp_path: Path) -> None:
    env = script_env(tmp_path, PLATFORM="nvd", FAKE_DOCKER_INFO_RC="1")
    proc = run_script(repo, "shell/run_purge.sh", "--dry-run", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "no Docker engine answers" in proc.stdout
    assert docker_calls(env) == [["info"]]


def test_native_fallback_propagates_the_step_status(repo: Path, tmp_path: Path) -> None:
    env = script_env(tmp_path, PLATFORM="cpu")
    proc = run_script(repo, "shell/run_purge.sh", "--bogus", env=env)
    assert proc.returncode == 2


def test_unknown_platform_is_an_error(repo: Path, tmp_path: Path) -> None:
    env = script_env(tmp_path, PLATFORM="tpu")
    proc = run_script(repo, "shell/run_train.sh", env=env)
    assert proc.returncode == 2
    assert "PLATFORM='tpu': allowed values are amd, nvd, cpu" in proc.stderr
    assert docker_calls(env) == []


@pytest.mark.parametrize("platform", ["amd", "nvd"])
def test_entry_opens_an_interactive_shell_in_the_same_container(repo: Path, tmp_path: Path,
                                                               platform: str) -> None:
    env = script_env(tmp_path, PLATFORM=platform)
    assert run_script(repo, "shell/run_train.sh", env=env).returncode == 0
    _, run_argv = _run_call(env)
    env2 = script_env(tmp_path, PLATFORM=platform, FAKE_DOCKER_DIR=str(tmp_path / "entry-calls"))
    assert run_script(repo, "shell/entry.sh", env=env2).returncode == 0
    _, entry_argv = _run_call(env2)
    assert entry_argv[:3] == ["run", "--rm", "-it"]
    assert entry_argv[-1] == "bash"

    def comparable(argv: list[str]) -> list[str]:
        # the rendered config file has a random name, a step's container a name of its own (so that a
        # signal can reach it); everything else must be identical
        if "--name" in argv:
            at = argv.index("--name")
            argv = argv[:at] + argv[at + 2:]
        return [a if "tprimat-docker.env" not in a else "<config>" for a in argv if a not in ("-it",)]

    assert comparable(entry_argv)[:-1] == comparable(run_argv)[:-2]


def test_entry_on_cpu_opens_a_native_shell(repo: Path, tmp_path: Path) -> None:
    env = script_env(tmp_path, PLATFORM="cpu")
    proc = run_script(repo, "shell/entry.sh", env=env, stdin="echo inside-$PLATFORM\n")
    assert proc.returncode == 0
    assert "inside-cpu" in proc.stdout
    assert docker_calls(env) == []


def test_a_signal_to_run_step_reaches_the_container(repo: Path, tmp_path: Path) -> None:
    """SIGTERM to run_<step>.sh is passed to the step inside its container (docker kill), whose own
    traps stop its jobs; the script then exits 128 + SIGTERM instead of leaving the container running."""
    env = script_env(tmp_path, PLATFORM="nvd", FAKE_DOCKER_RUN_SECONDS="60")
    proc = subprocess.Popen(["bash", str(repo / "shell/run_data.sh")], env=env, cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not any(c and c[0] == "run" for c in docker_calls(env)):
        assert time.monotonic() < deadline and proc.poll() is None, "the container never started"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    _, run = _run_call(env)
    (name,) = flag_values(run, "--name")
    assert ["kill", "--signal=TERM", name] in docker_calls(env)
    assert f"stopping container {name}" in err
