"""MODEL_LAYERS reaches every framework's dry run (issue 22), and so does the memory check's estimate.

mega and prim pass ``--num-layers N`` / ``num_layers: N`` to Megatron, nemo its recipe's
``model.config.num_layers``, tran and deep build the Hugging Face config with ``num_hidden_layers=N``; the
memory line of every dry run names the proxy by its label.
"""

from __future__ import annotations

import pytest

from tests.helpers.nemo import make_tokenizer, write_config
from train.launch.launcher import main as launch_main
from utils.config.load import load_config
from utils.dataset.paths import tokenizer_dir

LABEL = "Llama 3.1 8B [8 of 32 layers]"
DEPTH = {
    "mega": "--num-layers 8",
    "prim": "num_layers: 8",
    "nemo": '"model.config.num_layers": 8',
    "tran": "LlamaForCausalLM built with num_hidden_layers=8",
    "deep": "LlamaForCausalLM built with num_hidden_layers=8",
}


@pytest.fixture
def proxy_config(tmp_path, monkeypatch):
    config = write_config(tmp_path, MODEL_SIZE="full", MODELS="llama", MODEL_LAYERS="8", DP="1", GPUS_PER_NODE="1",
                          GA="8", MBS="1")
    make_tokenizer(tokenizer_dir(load_config(config, environ={}), "llama"), 400)
    monkeypatch.setenv("TPRIMAT_CONFIG", str(config))
    # the reference H100, whatever is here
    monkeypatch.setattr("utils.machine.hardware._nvidia_smi_gpus", lambda: None)
    for key in ("PLATFORM", "MODEL_LAYERS", "DP", "GPUS_PER_NODE", "MODELS", "MODEL_SIZE"):
        monkeypatch.delenv(key, raising=False)
    return config


@pytest.mark.parametrize("framework", sorted(DEPTH))
def test_model_layers_reaches_every_frameworks_dry_run(framework, proxy_config, capsys):
    platform = "amd" if framework == "prim" else "nvd"
    code = launch_main(["--platform", platform, "--framework", framework, "--model", "llama", "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0
    assert DEPTH[framework] in out
    memory = next(line for line in out.splitlines() if line.startswith("# note: memory:"))
    assert LABEL in memory and "2.80 B params" in memory and " <= " in memory


def test_the_whole_8b_on_one_h100_is_refused_in_the_dry_run_with_both_numbers(proxy_config, capsys, monkeypatch):
    monkeypatch.setenv("MODEL_LAYERS", "")
    assert launch_main(["--platform", "nvd", "--framework", "tran", "--model", "llama", "--dry-run"]) == 0
    memory = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("# note: memory:"))
    assert "GiB per GPU > 79.2 GiB on NVIDIA H100 80GB HBM3 (tran, FSDP2, Llama 3.1 8B, 8.03 B params)" in memory
    assert "a real run refuses it; --force runs it anyway" in memory


def test_a_job_that_cannot_fit_is_refused_before_it_starts_and_force_records_the_warning(proxy_config, monkeypatch,
                                                                                      capsys):
    from utils.result.file import read_result

    monkeypatch.setenv("MODEL_LAYERS", "")
    monkeypatch.setenv("TPRIMAT_FORCE_PLATFORM", "1")  # an nvd job on a host that may have no GPU
    args = ["--platform", "nvd", "--framework", "tran", "--model", "llama"]
    assert launch_main(args) == 1
    err = capsys.readouterr().err
    line = "GiB per GPU > 79.2 GiB on NVIDIA H100 80GB HBM3 (tran, FSDP2, Llama 3.1 8B, 8.03 B params)"
    assert "tprimat: estimated " in err and line in err
    path = load_config(proxy_config, environ={}).output_dir / "train_nvd_tran_llama.json"
    refused = read_result(path)
    peak = refused.memory_estimate.peak_gb
    assert refused.status == "failed" and refused.error.startswith(f"estimated {peak:.1f} {line}")
    assert refused.memory_estimate.fits is False and not refused.memory_estimate.forced
    # --force: past the memory check (this machine then stops at the dataset), the warning kept in the result.
    assert launch_main([*args, "--force"]) == 1
    forced = read_result(path)
    assert "dataset not usable" in forced.error and forced.memory_estimate.forced
    assert f"--force: estimated {peak:.1f} {line}; launched anyway" in forced.warnings


def test_a_cpu_job_larger_than_the_hosts_memory_is_refused_before_it_starts(proxy_config, monkeypatch, capsys):
    """Issue 49's sweep: ``SL=1000000`` on cpu was accepted ("not checked: platform cpu"); the job's processes
    share the host's memory, so the estimate of all of them is held against it (here a 500 GiB host)."""
    from utils.result.file import read_result

    monkeypatch.setattr("utils.measure.memory.host_memory_gib", lambda: 500.0)
    monkeypatch.setenv("SL", "1000000")
    args = ["--platform", "cpu", "--framework", "tran", "--model", "llama"]
    assert launch_main([*args, "--dry-run"]) == 0
    memory = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("# note: memory:"))
    assert "GiB for 1 process(es) > 500.0 GiB of host memory (tran, FSDP2, Llama 3.1 8B [8 of 32 layers]" in memory
    assert "a real run refuses it; --force runs it anyway" in memory
    assert launch_main(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "GiB of host memory" in err[0]
    refused = read_result(load_config(proxy_config, environ={}).output_dir / "train_cpu_tran_llama.json")
    assert refused.status == "failed" and "> 500.0 GiB of host memory" in refused.error
    assert launch_main([*args, "--force"]) == 1  # past the host check (this machine then stops at the dataset)
    forced = read_result(load_config(proxy_config, environ={}).output_dir / "train_cpu_tran_llama.json")
    assert "dataset not usable" in forced.error and forced.memory_estimate.forced
    capsys.readouterr()
    monkeypatch.setenv("SL", "256")  # the same job at a size the host holds goes on to the next check
    assert launch_main([*args, "--dry-run"]) == 0
    assert "host memory" not in capsys.readouterr().out
