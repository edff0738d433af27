"""PROFILE=mlperf against the files its values cite (issue 35): the mlcommons trees and NeMo v2.1.0.

Every line train/profiles/mlperf.py cites in a tree must say what the profile runs: each row
of :data:`CITED` is (the profile's key, its value, repository, path, line, the text that line
must hold). A citation without a row fails, so no value goes unchecked. The trees are given,
never fetched here (docs/CONFORMANCE.md, "MLPerf"); each repository's rows are skipped with
the reason when its variable is not set:

* ``TPRIMAT_MLCOMMONS_TRAINING``: mlcommons/training at ``mlperf.REF_COMMIT``;
* ``TPRIMAT_MLCOMMONS_POLICIES``: mlcommons/training_policies at ``mlperf.RULES_COMMIT``;
* ``TPRIMAT_NEMO_TREE``: NVIDIA/NeMo at ``v2.1.0``.

The checker's files (mlcommons/logging) are the pinned package's own and are checked in
tests/unit/train/launch/test_mlperf_profile.py. The dry run of every vendor job under
PROFILE=mlperf through the real frameworks is the tuned suite's path with PROFILE=mlperf
(:func:`test_mlperf_dry_run_is_accepted_by_the_framework`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.conformance.helpers_conformance import conformance_config, megatron_ref_of, needs
from tests.helpers.nemo import make_dataset_stub
from train.launch import preflight as pf
from train.launch.context import job_context, load_plugin
from train.profiles import mlperf
from train.rules.versions import tree_commit
from utils.dataset.paths import valid_prefix

TREES = {mlperf.REF: "TPRIMAT_MLCOMMONS_TRAINING", mlperf.RULES: "TPRIMAT_MLCOMMONS_POLICIES",
         mlperf.NEMO: "TPRIMAT_NEMO_TREE"}
VERSIONS = {mlperf.REF: mlperf.REF_COMMIT, mlperf.RULES: mlperf.RULES_COMMIT, mlperf.NEMO: mlperf.NEMO_TAG}
P, C, H = mlperf.PRETRAIN, mlperf.CALLBACKS, mlperf.CONFIG_H100
R, A, L = mlperf.RULES_FILE, mlperf.ADAM, mlperf.LLAMA
T, RU, NE = mlperf.REF, mlperf.RULES, mlperf.NEMO
# (key, value, repository, path, line, text on that line)
CITED = [
    ("sl", 8192, T, P, 145, "llama31_config.seq_length = 8192"),
    ("sl", 8192, RU, R, 335, "|sequence_length |8192 |"),
    ("gbs", 32, T, H, 68, "export GBS=32"),
    ("gbs", 32, RU, R, 324, "|global_batch_size |unconstrained |"),
    ("lr", 8e-4, RU, R, 332, "|opt_base_learning_rate |unconstrained |"),
    ("min_lr", 8e-5, T, P, 157, "min_lr=max_lr * 0.1"),
    ("min_lr", 8e-5, RU, R, 333, "|opt_end_learning_rate |opt_base_learning_rate * 0.1 |"),
    ("warmup_steps", 128, RU, R, 330, "|opt_learning_rate_warmup_steps |unconstrained |"),
    ("lr_decay", "cosine", T, P, 422, 'constants.OPT_LR_DECAY_SCHEDULE: "cosine with linear warmup"'),
    ("lr_decay_iters", 1_200_000, T, P, 310, "'--max_steps', type=int, default=1200000"),
    ("lr_decay_iters", 1_200_000, T, P, 177, "pretrain.trainer.max_steps = max_steps"),
    ("lr_decay_iters", 1_200_000, RU, R, 337, "|max_steps |1200000 |"),
    ("weight_decay", 0.1, NE, A, 39, "weight_decay=0.1"),
    ("weight_decay", 0.1, RU, R, 329, "|opt_adamw_weight_decay |0.1 |"),
    ("beta1", 0.9, NE, A, 28, "adam_beta1: float = 0.9"),
    ("beta1", 0.9, RU, R, 325, "|opt_adamw_beta_1 |0.9 |"),
    ("beta2", 0.95, NE, A, 29, "adam_beta2: float = 0.95"),
    ("beta2", 0.95, RU, R, 326, "|opt_adamw_beta_2 |0.95 |"),
    ("adam_eps", 1e-5, NE, A, 44, "adam_eps=1e-5"),
    ("adam_eps", 1e-5, RU, R, 327, "|opt_adamw_epsilon |1e-5 |"),
    ("grad_clip", 1.0, NE, A, 32, "clip_grad: float = 1.0"),
    ("grad_clip", 1.0, NE, A, 46, "clip_grad=clip_grad"),
    ("grad_clip", 1.0, RU, R, 328, "|opt_gradient_clip_norm |1.0 |"),
    ("init_std", 0.02, NE, L, 112, "class Llama31Config(Llama3Config):"),
    ("init_std", 0.02, NE, L, 117, "init_method_std: float = 0.02"),
    ("init_std", 0.02, NE, L, 155, "class Llama31Config8B(Llama31Config):"),
    ("init_std", 0.02, T, P, 144, "llm.gpt.model.llama.Llama31Config8B"),
    ("init_std", 0.02, RU, R, 273, "=== Weight and Bias Initialization"),
    ("init_std", 0.02, RU, R, 276, "OPEN: Weights and biases must be initialized"),
    ("eval_interval", 12288, T, P, 307, '"--eval_every", type=int, default=12288'),
    ("eval_interval", 12288, RU, R, 450, "Every 12288 sequences"),
    ("eval_samples", 1024, T, P, 309, '"--eval_tokens", type=int, default=1024'),
    ("target_loss", 3.3, T, P, 320, '"--target_log_ppl", type=float, default=3.3'),
    ("target_loss", 3.3, RU, R, 147, "|Llama31_8b |3.3 log perplexity |"),
    ("stop_at_target", True, T, C, 133, "if not self.is_target_reached and loss <= self.target:"),
    ("stop_at_target", True, T, C, 134, "self.is_target_reached = True"),
    ("stop_at_target", True, T, C, 220, "for logger in trainer.loggers:"),
    ("stop_at_target", True, T, C, 224, "self.set_success_status()"),
]
# The lines the profile's notes cite (mlperf.WARMUP_NOTE, mlperf.FREE): (note, repository, path, line, text).
NOTE_CITED = [
    ("WARMUP_NOTE", T, H, 76, "export WARMUP_STEPS=512 # 16384 // GBS"),
    ("WARMUP_NOTE", T, mlperf.RUN, 149, "--warmup_steps $WARMUP_STEPS"),
    ("FREE", RU, R, 336, "|gradient_accumulation_steps |unconstrained |"),
    ("FREE", RU, R, 324, "|global_batch_size |unconstrained |"),
    ("FREE", RU, R, 251, "arbitrary sharding, batching, and packing are allowed"),
    ("FREE", RU, R, 337, "|llama31_8b |adamw |max_steps |1200000 |"),
    ("FREE", T, H, 70, "export MBS=1"),
    ("FREE", T, mlperf.CONFIG_H200, 69, "export MBS=2"),
]


def _lines(where: str) -> list[int]:
    """``line 145``, ``lines 7-10``, ``lines 133-134, 220-224``, ``line 310: ...; line 177`` -> the numbers cited
    (a range by its two ends, which :data:`CITED` checks)."""
    return [int(n) for n in re.findall(r"\b(\d+)\b", " ".join(re.findall(r"lines? ([\d ,\-]+)", where)))]


def test_every_citation_in_a_tree_has_a_row():
    rows = {(key, repo, path, line) for key, _, repo, path, line, _ in CITED}
    for value in mlperf.VALUES:
        for source in value.sources:
            if source.repository not in TREES:
                continue
            for line in _lines(source.where):
                assert (value.key, source.repository, source.path, line) in rows, (value.key, source.cite())
    for key, expected, *_ in CITED:
        assert mlperf.value_of(key) == expected, key


@pytest.mark.parametrize(("key", "value", "repository", "path", "line", "text"), [
    pytest.param(*row, id=f"{row[0]}-{row[3].rsplit('/', 1)[-1]}:{row[4]}", marks=needs(TREES[row[2]]))
    for row in CITED])
def test_the_cited_line_says_it(key, value, repository, path, line, text):
    tree = Path(os.environ[TREES[repository]])
    commit, how = tree_commit(tree)
    want = VERSIONS[repository]
    if commit is not None and not want.startswith("v"):
        assert commit == want, f"{tree} is at {commit} ({how}), the profile cites {want}"
    lines = (tree / path).read_text(encoding="utf-8").splitlines()
    assert text in lines[line - 1], f"{repository} {path}:{line} is {lines[line - 1]!r}"


def test_every_line_a_note_cites_has_a_row():
    rows = {(note, line) for note, _, _, line, _ in NOTE_CITED}
    for note in ("WARMUP_NOTE", "FREE"):
        cited = {int(n) for n in re.findall(r"\blines? (\d+)", getattr(mlperf, note))}
        ends = {int(n) for n in re.findall(r"\blines \d+-(\d+)", getattr(mlperf, note))}
        assert cited | ends <= {line for name, line in rows if name == note}, note


@pytest.mark.parametrize(("note", "repository", "path", "line", "text"), [
    pytest.param(*row, id=f"{row[0]}-{row[2].rsplit('/', 1)[-1]}:{row[3]}", marks=needs(TREES[row[1]]))
    for row in NOTE_CITED])
def test_the_line_a_note_cites_says_it(note, repository, path, line, text):
    lines = (Path(os.environ[TREES[repository]]) / path).read_text(encoding="utf-8").splitlines()
    assert text in lines[line - 1], f"{note}: {repository} {path}:{line} is {lines[line - 1]!r}"


JOBS = [pytest.param("nvd", "mega", marks=needs("TPRIMAT_MEGATRON_LM")),
        pytest.param("amd", "mega", marks=needs("TPRIMAT_MEGATRON_LM")),
        pytest.param("amd", "prim", marks=needs("TPRIMAT_PRIMUS")),
        pytest.param("nvd", "nemo", marks=needs("TPRIMAT_NEMO_PYTHON"))]


@pytest.mark.slow
@pytest.mark.parametrize(("platform", "framework"), JOBS)
def test_mlperf_dry_run_is_accepted_by_the_framework(tmp_path, platform, framework):
    """The framework's own code accepts the profile and resolves the schedule, epsilon and batch to its values."""
    ref = os.environ.get("TPRIMAT_MEGATRON_LM")
    cfg = conformance_config(tmp_path, "bf16-tp1-cp1", PROFILE="mlperf",
                             **({"MEGATRON_REF": megatron_ref_of(ref)} if ref else {}))
    if framework == "nemo":  # NeMo's schedule ends at the trainer's max_steps: mlperf.NEMO_HORIZON
        cfg = cfg.replace(train_iters=mlperf.MAX_STEPS)
    make_dataset_stub(valid_prefix(cfg, "llama"))  # the profile evaluates: NeMo's data module opens the held-out set
    ctx = job_context(cfg, platform, framework, "llama", dry_run=True)
    settings = pf.preflight(ctx, load_plugin(framework).plan(ctx)).settings
    assert (settings["seq_length"], settings["global_batch_size"], settings["lr"]) == (8192, 32, 8e-4)
    assert (settings["lr_decay_iters"], settings["lr_warmup_iters"], settings["adam_eps"]) == (1_200_000, 128, 1e-5)
