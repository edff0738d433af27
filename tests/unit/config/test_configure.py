"""utils/config/load.py: parsing, overrides, derived values and every validation message."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from utils.config.load import CONTAINER_DATA_DIR, in_tprimat_container, load_config, main, parse_env_file
from utils.config.model import FIELD_TYPES, REPO_ROOT, numeric_keys
from utils.config.rules import MAX_COUNT, RULES, ConfigError, base_type
from utils.config.secret import read_secret
from utils.machine.environment import container_image

BASE = {"TPRIMAT_CONFIG": str(REPO_ROOT / "config.env")}


def load(**overrides: str):
    return load_config(environ={**BASE, **overrides})


def test_defaults_from_config_env_match_the_fairness_table():
    cfg = load()
    assert (cfg.seed, cfg.sl, cfg.lr, cfg.min_lr, cfg.warmup_steps, cfg.train_iters) == (42, 2048, 3e-4, 0.0, 50, 500)
    assert (cfg.weight_decay, cfg.beta1, cfg.beta2, cfg.grad_clip, cfg.init_std) == (0.1, 0.9, 0.95, 1.0, 0.02)
    assert (cfg.tp, cfg.pp, cfg.cp, cfg.dp, cfg.ga, cfg.mbs) == (1, 1, 1, 8, 8, 1)
    assert cfg.gbs == 64 and cfg.world_size == 8
    assert cfg.models == ("llama", "qwen", "mistral")
    assert cfg.zero_stage == 1
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
        ({"FRAMEWORK": "jax"}, "FRAMEWORK='jax': allowed values are mega, prim, nemo, tran, deep, all"),
        ({"MODELS": "llama gpt"}, "MODELS='gpt': allowed values are llama, qwen, mistral"),
        ({"ZERO_STAGE": "4"}, "ZERO_STAGE=4: must be 0, 1, 2 or 3 (a DeepSpeed ZeRO stage)"),
        ({"ZERO_STAGE": "-1"}, "ZERO_STAGE=-1: must be 0, 1, 2 or 3 (a DeepSpeed ZeRO stage)"),
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
        ({"MODEL_LAYERS": "0"}, "MODEL_LAYERS=0: must be at least 1"),
        ({"MODEL_LAYERS": "-4"}, "MODEL_LAYERS=-4: must be at least 1"),
        ({"MODEL_LAYERS": "eight"}, "MODEL_LAYERS='eight': expected a whole number"),
        ({"MODEL_LAYERS": "33"}, "MODEL_LAYERS=33: llama (full) has 32 layers; use 1 to 32"),
        ({"MODEL_LAYERS": "29", "MODELS": "mistral qwen"}, "MODEL_LAYERS=29: qwen (full) has 28 layers; use 1 to 28"),
        ({"MODEL_LAYERS": "3", "MODEL_SIZE": "tiny"}, "MODEL_LAYERS=3: llama (tiny) has 2 layers; use 1 to 2"),
        ({"TRAN_COMPILE": "sometimes"}, "TRAN_COMPILE='sometimes': expected true or false"),
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


@pytest.mark.parametrize(("overrides", "message"), [
    ({"MODELS": "qwen", "TP": "8", "DP": "1", "GA": "64"},
     "TP=8 does not divide Qwen 2.5 7B's 28 heads and 4 query groups, so no stack can split its attention over 8 "
     "ranks (TP 1, 2, 4 can); MODELS has qwen at MODEL_SIZE=full"),
    ({"MODELS": "llama qwen", "MODEL_SIZE": "tiny", "TP": "2", "DP": "4"}, "Qwen 2.5 7B (tiny)'s 7 heads"),
])
def test_a_layout_no_stack_can_split_is_refused_in_one_line(overrides, message):
    """Issue 40, finding 6: Qwen 2.5 7B at TP 8 loaded, dry-ran, and was refused only by the preflight's
    init-std read-back; the config rule names the layout (utils/config/rules.py: tensor_split_problem)."""
    with pytest.raises(ConfigError) as excinfo:
        load(**overrides)
    assert message in str(excinfo.value) and "\n" not in str(excinfo.value)
    assert load(MODELS="llama mistral", TP="8", DP="1", GA="64").tp == 8  # 32 heads, 8 groups: splits


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


def test_inside_a_container_has_one_definition():
    """The tprimat image's marker, not /.dockerenv: the config's DATA_DIR and the result's record agree."""
    marked = {"TPRIMAT_IN_CONTAINER": "1"}
    assert in_tprimat_container(marked) and not in_tprimat_container({})
    assert container_image(marked)["in_container"] is True and container_image({})["in_container"] is False
    assert load_config(environ={**BASE, **marked}).data_dir == Path(CONTAINER_DATA_DIR)


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


# ---------------------------------------------------------------------------
# hostile values for every numeric key, generated from the config's own key table

HUGE_INT = str(10**30)
NON_NUMBERS = ("nan", "inf", "-inf", "1e400")
MALFORMED = ("12abc", "1.2.3", "0x1g", "--1", "1_0", "\u0663")  # 1_0 and an Arabic-Indic 3: Python-only numbers


def _kind(key: str) -> type:
    return int if key == "GBS" else base_type(FIELD_TYPES[key.lower()])[0]


def _hostile_cases() -> list[tuple[str, str]]:
    """Non-finite, malformed, negative and huge values for every numeric key (GBS, derived, too)."""
    cases = []
    for key in (*numeric_keys(), "GBS"):
        rule = RULES.get(key.lower())
        values = [*NON_NUMBERS, *MALFORMED, "-1"]
        if _kind(key) is float:
            values += ["-1e-9", HUGE_INT]
        else:
            values += ["1.5", HUGE_INT]
            if key != "GBS" and rule.minimum > 0:
                values.append("-0")  # zero in disguise
        cases += [(key, value) for value in values]
    return cases


@pytest.mark.parametrize(("key", "value"), _hostile_cases())
def test_every_numeric_key_rejects_hostile_values_with_one_line(key, value, capsys, monkeypatch):
    """``python -m utils.config.load`` (its main(), run in-process for speed) with KEY=value."""
    monkeypatch.setenv("TPRIMAT_CONFIG", str(REPO_ROOT / "config.env"))
    monkeypatch.setenv(key, value)
    assert main([]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"config error: {key}="), err


def test_hostile_table_covers_every_numeric_field():
    """A new numeric key joins the walk above by itself; each one needs a rule with both bounds."""
    numeric = set(numeric_keys())
    assert {"LR", "GRAD_CLIP", "INIT_STD", "MIN_LR", "WEIGHT_DECAY", "SAMPLE_MB", "SEED", "MASTER_PORT"} <= numeric
    assert "FP8" not in numeric and "PROFILING" not in numeric  # bools are not numbers here
    for key in numeric:
        rule = RULES.get(key.lower())
        assert rule is not None and rule.minimum is not None, f"{key} has no minimum in RULES"
        assert rule.maximum is not None, f"{key} has no maximum in RULES: a huge value would pass"
        if _kind(key) is int:
            assert rule.maximum <= MAX_COUNT, f"{key}: counts are bounded"


def test_the_cli_itself_exits_2_with_one_line():
    """The same walk through a real ``python -m utils.config.load`` process, one value of each kind."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TPRIMAT_CONFIG": str(REPO_ROOT / "config.env")}
    for key, value in (("LR", "inf"), ("GRAD_CLIP", "nan"), ("SEED", "-1"), ("MBS", HUGE_INT), ("SL", "12abc")):
        proc = subprocess.run([sys.executable, "-m", "utils.config.load"], cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=60, env={**env, key: value})
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.startswith(f"config error: {key}=") and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.parametrize(("key", "value", "message"), [
    ("LR", "inf", "LR=inf: must be a finite number"),
    ("GRAD_CLIP", "nan", "GRAD_CLIP=nan: must be a finite number"),
    ("INIT_STD", "nan", "INIT_STD=nan: must be a finite number"),
    ("MIN_LR", "nan", "MIN_LR=nan: must be a finite number"),
    ("WEIGHT_DECAY", "inf", "WEIGHT_DECAY=inf: must be a finite number"),
    ("SAMPLE_MB", "inf", "SAMPLE_MB=inf: must be a finite number"),
    ("LR", "2", "LR=2.0: must be at most 1"),
    ("LR", "0", "LR=0.0: must be greater than 0"),
    ("MASTER_PORT", "70000", "MASTER_PORT=70000: must be a TCP port (1-65535)"),
    ("TRAIN_ITERS", HUGE_INT, f"TRAIN_ITERS={HUGE_INT}: must be at most 1200000"),
])
def test_issue_12_values_are_named(key, value, message):
    with pytest.raises(ConfigError) as excinfo:
        load(**{key: value})
    assert str(excinfo.value) == message


def test_field_types_are_the_real_types():
    assert FIELD_TYPES["lr"] is float and FIELD_TYPES["mbs"] is int and FIELD_TYPES["data_dir"] is Path
    assert base_type(FIELD_TYPES["measure_skip_steps"]) == (int, True)
    assert base_type(FIELD_TYPES["hf_home"]) == (Path, True)
    assert base_type(FIELD_TYPES["models"]) == (tuple[str, ...], False)


def test_replace_validates_with_the_same_rules():
    with pytest.raises(ConfigError, match="MIN_DOC_CHARS=-1: must not be negative"):
        load().replace(min_doc_chars=-1)
    with pytest.raises(ConfigError, match="LR=nan: must be a finite number"):
        load().replace(lr=float("nan"))


def test_framework_may_list_several():
    assert load(FRAMEWORK="tran mega").framework == ("tran", "mega")
    assert load().framework == ("all",)
    assert load(FRAMEWORK="tran,mega").as_env()["FRAMEWORK"] == "tran mega"


# ---------------------------------------------------------------------------
# the env file handed to docker


def test_docker_env_file(tmp_path, monkeypatch):
    secrets = tmp_path / "secrets.env"
    secrets.write_text("export HF_TOKEN='hf_DOCKERtokenabcdefghijk'  # mine\r\n")
    monkeypatch.setattr("utils.config.secret.DEFAULT_SECRETS_FILE", secrets)
    monkeypatch.setenv("TPRIMAT_CONFIG", str(REPO_ROOT / "config.env"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("MODELS", "qwen")
    target = tmp_path / "docker.env"
    assert main(["--docker-env-file", str(target)]) == 0
    assert target.stat().st_mode & 0o777 == 0o600
    lines = target.read_text().splitlines()
    assert "MODELS=qwen" in lines and "HF_TOKEN=hf_DOCKERtokenabcdefghijk" in lines
    assert not [line for line in lines if line.startswith("GBS=")]
    assert not list(tmp_path.glob(".docker.env.tmp-*")), "written atomically, nothing left behind"
    keys = [line.split("=", 1)[0] for line in lines]
    assert keys == [*(k for k in load().as_env() if k != "GBS"), "HF_TOKEN"]


def test_docker_env_file_refuses_a_value_with_a_line_break(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TPRIMAT_CONFIG", str(REPO_ROOT / "config.env"))
    monkeypatch.setenv("MASTER_ADDR", "node0\nEVIL=1")
    assert main(["--docker-env-file", str(tmp_path / "x.env")]) == 2
    assert "MASTER_ADDR=node0\\nEVIL=1: holds a control character" in capsys.readouterr().err  # refused on load
    assert not (tmp_path / "x.env").exists()


def test_get_refuses_a_secret(monkeypatch, capsys):
    monkeypatch.setenv("TPRIMAT_CONFIG", str(REPO_ROOT / "config.env"))
    monkeypatch.setenv("HF_TOKEN", "hf_GETtokenabcdefghijklmn")
    assert main(["--get", "HF_TOKEN"]) == 2
    captured = capsys.readouterr()
    assert "never printed" in captured.err and "hf_GET" not in captured.out + captured.err


def test_model_layers_and_tran_compile_defaults():
    cfg = load()
    assert cfg.model_layers is None  # every layer
    assert cfg.tran_compile is None and cfg.tran_compile_on("nvd") and cfg.tran_compile_on("amd")
    assert not cfg.tran_compile_on("cpu")
    assert load(TRAN_COMPILE="true").tran_compile_on("cpu") and not load(TRAN_COMPILE="0").tran_compile_on("nvd")
    assert load(MODEL_LAYERS="8").model_layers == 8 and load(MODEL_LAYERS="32", MODELS="llama").model_layers == 32
