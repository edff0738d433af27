"""utils/configure.py: parsing, overrides, derived values and every validation message."""

from __future__ import annotations

from pathlib import Path

import pytest

from utils.configure import REPO_ROOT, ConfigError, load_config, main, parse_env_file, read_secret

BASE = {"TPRIMAT_CONFIG": str(REPO_ROOT / "config.env")}


def load(**overrides: str):
    return load_config(environ={**BASE, **overrides})


def test_defaults_from_config_env_match_the_fairness_table():
    cfg = load()
    assert (cfg.seed, cfg.sl, cfg.lr, cfg.min_lr, cfg.warmup_steps, cfg.train_iters) == (42, 2048, 3e-4, 0.0, 50, 500)
    assert (cfg.weight_decay, cfg.beta1, cfg.beta2, cfg.grad_clip, cfg.init_std) == (0.1, 0.9, 0.95, 1.0, 0.02)
    assert (cfg.tp, cfg.pp, cfg.cp, cfg.dp, cfg.ga, cfg.mbs) == (1, 1, 1, 8, 8, 1)
    assert cfg.gbs == 64 and cfg.world_size == 8
    assert cfg.models == ("llama", "qwen")
    assert cfg.precision == "bf16" and cfg.fp8 is False
    assert cfg.skip_steps == 50  # max(2, 10% of 500)


def test_environment_overrides_the_file_and_derived_values_follow():
    cfg = load(MBS="2", GA="4")
    assert cfg.mbs == 2 and cfg.gbs == 2 * 8 * 4


def test_skip_steps_default_and_override():
    assert load(TRAIN_ITERS="10", WARMUP_STEPS="1").skip_steps == 2
    assert load(MEASURE_SKIP_STEPS="7").skip_steps == 7


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"MBS": "two"}, "MBS='two': expected a whole number"),
        ({"LR": "fast"}, "LR='fast': expected a number"),
        ({"FP8": "maybe"}, "FP8='maybe': expected true or false"),
        ({"DATASET": "wiki"}, "DATASET='wiki': allowed values are bc, c4, sample, local:<path>"),
        ({"FRAMEWORK": "jax"}, "FRAMEWORK='jax': allowed values are mega, prim, nemo, tran, all"),
        ({"MODELS": "llama gpt"}, "MODELS='gpt': allowed values are llama, qwen"),
        ({"MODEL_SIZE": "huge"}, "MODEL_SIZE='huge'"),
        ({"PLATFORM": "tpu"}, "PLATFORM='tpu': allowed values are amd, nvd, cpu"),
        ({"PRECISION": "int8"}, "PRECISION='int8'"),
        ({"MBS": "0"}, "MBS=0: must be at least 1"),
        ({"MIN_LR": "1e-2"}, "MIN_LR=0.01: must not exceed LR=0.0003"),
        ({"BETA2": "1.5"}, "BETA2=1.5: must be in [0, 1)"),
        ({"WARMUP_STEPS": "600"}, "WARMUP_STEPS=600: must not exceed TRAIN_ITERS=500"),
        ({"NODE_RANK": "1"}, "NODE_RANK=1: must be below NNODES=1"),
        ({"MEASURE_SKIP_STEPS": "500"}, "MEASURE_SKIP_STEPS=500"),
        ({"FP8": "true", "PRECISION": "fp16"}, "FP8=true with PRECISION=fp16"),
        ({"DATASET": "local:"}, "a path must follow local:"),
    ],
)
def test_bad_values_name_key_value_and_what_is_allowed(overrides, message):
    with pytest.raises(ConfigError) as excinfo:
        load(**overrides)
    assert message in str(excinfo.value)


def test_world_size_mismatch_names_both_sides():
    with pytest.raises(ConfigError) as excinfo:
        load(DP="4")
    text = str(excinfo.value)
    assert "TP*PP*CP*DP = 1*1*1*4 = 4" in text and "NNODES*GPUS_PER_NODE = 1*8 = 8" in text


def test_explicit_gbs_is_checked_not_trusted():
    assert load(GBS="64").gbs == 64
    with pytest.raises(ConfigError, match=r"GBS=128 but MBS\*DP\*GA = 1\*8\*8 = 64"):
        load(GBS="128")


def test_multi_node_world_size():
    cfg = load(NNODES="2", GPUS_PER_NODE="4", NODE_RANK="1")
    assert cfg.world_size == 8 and cfg.node_rank == 1


def test_local_dataset_label_is_file_safe():
    assert load(DATASET="local:/srv/my corpus.jsonl").dataset_name == "local-my_corpus"


def test_relative_paths_resolve_against_the_repo():
    cfg = load(DATA_DIR="mydata", OUTPUT_DIR="")
    assert cfg.data_dir == REPO_ROOT / "mydata"
    assert cfg.output_dir == REPO_ROOT / "output"


def test_container_default_data_dir():
    assert load_config(environ={**BASE, "TPRIMAT_IN_CONTAINER": "1"}).data_dir == Path("/data/tprimat")
    # Native runs keep ./data_cache even where the machine itself is a container (no tprimat marker).
    assert load_config(environ=BASE).data_dir == REPO_ROOT / "data_cache"


def test_workload_has_every_fairness_key():
    workload = load().workload()
    assert workload["GBS"] == 64 and workload["WORLD_SIZE"] == 8 and workload["PRECISION"] == "bf16"
    assert "DATA_DIR" not in workload and "MASTER_PORT" not in workload


def test_env_file_parsing(tmp_path):
    path = tmp_path / "c.env"
    path.write_text("# comment\n\nexport A=1\nB=\"x y\"  # trailing\nC='q'\nD=\n")
    assert parse_env_file(path) == {"A": "1", "B": "x y", "C": "q", "D": ""}
    path.write_text("not an assignment\n")
    with pytest.raises(ConfigError, match=r"c\.env:1: expected KEY=value"):
        parse_env_file(path)


def test_unknown_key_in_file_is_an_error(tmp_path):
    path = tmp_path / "c.env"
    path.write_text((REPO_ROOT / "config.env").read_text() + "MBZ=3\n")
    with pytest.raises(ConfigError, match="unknown key"):
        load_config(path, environ={})


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "absent.env", environ={})


def test_secret_from_environment_or_file_never_in_config(tmp_path):
    secrets = tmp_path / "secrets.env"
    secrets.write_text("HF_TOKEN=hf_filetoken\n")
    assert read_secret("HF_TOKEN", environ={"HF_TOKEN": "hf_envtoken"}, secrets_file=secrets) == "hf_envtoken"
    assert read_secret("HF_TOKEN", environ={}, secrets_file=secrets) == "hf_filetoken"
    assert read_secret("HF_TOKEN", environ={}, secrets_file=tmp_path / "none.env") is None
    secrets.write_text("garbage hf_secret_value\n")
    with pytest.raises(ConfigError) as excinfo:
        read_secret("HF_TOKEN", environ={}, secrets_file=secrets)
    assert "hf_secret_value" not in str(excinfo.value)
    assert "HF_TOKEN" not in load().to_dict()


def test_cli_get_and_error_exit(capsys, monkeypatch):
    monkeypatch.setenv("TPRIMAT_CONFIG", str(REPO_ROOT / "config.env"))
    monkeypatch.setenv("MBS", "2")
    assert main(["--get", "GBS"]) == 0
    assert capsys.readouterr().out.strip() == "128"
    monkeypatch.setenv("MBS", "zero")
    assert main([]) == 2
    assert "MBS='zero'" in capsys.readouterr().err
