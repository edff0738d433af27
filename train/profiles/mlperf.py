"""PROFILE=mlperf: MLPerf Training's Llama 3.1 8B rules (closed division) on every stack, each value cited.

MLPerf is the one public time-to-quality benchmark both vendors submit to, each on its own stack. Every value is a
``config.env`` key, so the fairness table and the preflight follow from the configuration alone; layout and
precision stay config.env's. Not an MLPerf submission; a tiny or proxy model says so.

Sources (docs/CONFORMANCE.md section "MLPerf"): ``mlcommons/training`` ``small_llm_pretraining/nemo/``
(:data:`REF_COMMIT`), ``mlcommons/training_policies`` (:data:`RULES_COMMIT`), ``mlcommons/logging``'s
``closed_llama31_8b.yaml`` and ``rcps_llama31_8b.json`` (pinned ``mlperf-logging==4.1.68``), NeMo v2.1.0's
optimizer defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from train.profiles.recipe import Source
from utils.spec.registry import framework_names

REF = "mlcommons/training"
# #815, 2025-08-18. The rules link 46bbcb7c (#814): pretrain_llama31.py lines 1-316 and config_H100_1x8x4_8b.sh are the
# same there (the diff starts at line 317: the target's default 5.6 -> 3.3).
REF_COMMIT = "9c2020622e497fa05bd09e0243f8fbc04ebf51c1"
RULES = "mlcommons/training_policies"
RULES_COMMIT = "d73e20f179151ce1b40dc300374f576a391f91ea"
LOGGING = "mlcommons/logging"
LOGGING_TAG = "6.0.0-rc6"  # = mlperf-logging 4.1.51; 4.1.68 (pinned) carries the same training_6.0.0 files
NEMO = "NVIDIA/NeMo"
NEMO_TAG = "v2.1.0"

PRETRAIN = "small_llm_pretraining/nemo/pretrain_llama31.py"
CALLBACKS = "small_llm_pretraining/nemo/callbacks.py"
CONFIG_H100 = "small_llm_pretraining/nemo/config_H100_1x8x4_8b.sh"
CONFIG_H200 = "small_llm_pretraining/nemo/config_H200_1x8x1_8b.sh"
RUN = "small_llm_pretraining/nemo/run_llama31.sh"
RULES_FILE = "training_rules.adoc"
CHECKER_FILE = "mlperf_logging/compliance_checker/training_6.0.0/closed_llama31_8b.yaml"
RCP_FILE = "mlperf_logging/rcp_checker/training_6.0.0/rcps_llama31_8b.json"
ADAM = "nemo/collections/llm/recipes/optim/adam.py"
LLAMA = "nemo/collections/llm/gpt/model/llama.py"

MODEL = "llama"  # MLPerf's model: Llama 3.1 8B (utils/spec/registry.py)
BENCHMARK = "llama31_8b"  # mlperf_logging.mllog.constants.LLAMA31_8B
MAX_STEPS = 1_200_000
# The smallest mean samples-to-target the checker accepts at GBS 32 (rcps_llama31_8b.json, olympic mean of 20 runs
# less its allowance: docs/CONFORMANCE.md); a step budget below it stops before MLPerf's reference converged.
RCP_MIN_SAMPLES_GBS32 = 173_650


def ref(path: str, where: str) -> Source:
    return Source(REF, path, REF_COMMIT, where)


def rules(where: str) -> Source:
    return Source(RULES, RULES_FILE, RULES_COMMIT, where)


def checker(where: str) -> Source:
    return Source(LOGGING, CHECKER_FILE, LOGGING_TAG, where)


def rcp(where: str) -> Source:
    return Source(LOGGING, RCP_FILE, LOGGING_TAG, where)


def nemo(path: str, where: str) -> Source:
    return Source(NEMO, path, NEMO_TAG, where)


@dataclass(frozen=True)
class MlperfValue:
    """One value of the rules: the config key it sets (a :class:`~utils.config.model.Config` field) and its sources.
    ``checked``: MLPerf's compliance checker enforces it (ruleset 6.0.0); ``workload``: a ``MODEL_SIZE=tiny`` run keeps
    config.env's value (:func:`applied_values`)."""

    key: str
    value: Any
    sources: tuple[Source, ...]
    checked: bool = False
    workload: bool = False
    note: str = ""

    def cite(self) -> str:
        return "; ".join(source.cite() for source in self.sources)


# The warm-up is the RCP's, not the reference configs' (issue 50): the checker knows the GBS-32 point's 4,096 samples.
WARMUP_NOTE = ("128 steps = the GBS-32 RCP's 4,096 warm-up samples; the reference's own configs pass WARMUP_STEPS=512 "
               f"(16,384 samples: {CONFIG_H100} line 76, passed on by {RUN} line 149), which tprimat does not take; "
               "the rules leave it free; a tiny run keeps 128 steps")

VALUES: tuple[MlperfValue, ...] = (
    MlperfValue("sl", 8192, (ref(PRETRAIN, "line 145: llama31_config.seq_length = 8192"), rules("line 335"),
                             checker("lines 7-10: max_sequence_length == 8192")), checked=True, workload=True),
    MlperfValue("gbs", 32, (rcp("lines 23-42: the GBS-32 reference convergence point"),
                            ref(CONFIG_H100, "line 68: export GBS=32"),
                            rules("line 324: unconstrained (within the RCPs)")),
                workload=True, note="an RCP point; GA = 32 / (MBS x DP) on the node"),
    MlperfValue("lr", 8e-4, (rcp("lines 23-42: opt_base_learning_rate 8e-4 at GBS 32"), rules("line 332")),
                note="the reference's own configs (5e-4, 1e-3) are never passed on by run_llama31.sh:130-152 and "
                     "match no RCP"),
    MlperfValue("min_lr", 8e-5, (ref(PRETRAIN, "line 157: min_lr=max_lr * 0.1"), rules("line 333"))),
    MlperfValue("warmup_steps", 128, (rcp("lines 23-42: 4,096 warm-up samples at GBS 32 = 128 steps"),
                                      rules("line 330")),
                note=WARMUP_NOTE),
    MlperfValue("lr_decay", "cosine", (ref(PRETRAIN, "line 422: 'cosine with linear warmup'"),
                                       checker("lines 36-39: opt_learning_rate_decay_schedule")), checked=True),
    MlperfValue("lr_decay_iters", MAX_STEPS, (ref(PRETRAIN, "line 310: --max_steps default 1200000; line 177"),
                                              rules("line 337"), checker("lines 83-86: max_steps == 1200000; "
                                                                         "lines 31-34: decay = 1200000 - warm-up")),
                checked=True, note="the cosine ends at step 1,200,000 whatever the run's length; the run stops at "
                                   "the target or at TRAIN_ITERS"),
    MlperfValue("weight_decay", 0.1, (nemo(ADAM, "line 39"), rules("line 329"), checker("lines 56-59")), checked=True),
    MlperfValue("beta1", 0.9, (nemo(ADAM, "line 28"), rules("line 325"), checker("lines 41-44")), checked=True),
    MlperfValue("beta2", 0.95, (nemo(ADAM, "line 29"), rules("line 326"), checker("lines 46-49")), checked=True),
    MlperfValue("adam_eps", 1e-5, (nemo(ADAM, "line 44"), rules("line 327"), checker("lines 51-54")), checked=True),
    MlperfValue("grad_clip", 1.0, (nemo(ADAM, "lines 32, 46"), rules("line 328"), checker("lines 61-64")),
                checked=True),
    MlperfValue("init_std", 0.02, (nemo(LLAMA, "line 117: Llama31Config.init_method_std = 0.02 (class at line 112), "
                                               "inherited by Llama31Config8B (line 155)"),
                                   ref(PRETRAIN, "line 144: Llama31Config8B"), rules("lines 273-276"))),
    MlperfValue("eval_interval", 12288, (ref(PRETRAIN, "line 307: --eval_every 12288"), rules("line 450")),
                workload=True, note="samples between evaluations (384 steps at GBS 32)"),
    MlperfValue("eval_samples", 1024, (ref(PRETRAIN, "line 309: --eval_tokens 1024"),
                                       checker("lines 71-74: eval_samples == 1024")), checked=True),
    MlperfValue("target_loss", 3.3, (ref(PRETRAIN, "line 320: --target_log_ppl 3.3"), rules("line 147"),
                                     checker("lines 76-81: one eval_accuracy in (0, 3.3]")), checked=True,
                note="log perplexity = the mean per-token cross-entropy on the held-out sequences"),
    MlperfValue("stop_at_target", True, (ref(CALLBACKS, "lines 133-134, 220-224: stop when the target is met"),)),
)

# What MLPerf leaves free, kept at config.env's, and the precision, declared (never silent).
FREE = ("MBS, TP, PP, CP (and so DP and GA) stay config.env's: MLPerf fixes no layout "
        f"({RULES} {RULES_COMMIT[:8]} {RULES_FILE}: gradient accumulation is unconstrained, line 336, the global "
        "batch within the RCPs, line 324, sharding and batching are free, line 251; MBS, TP, PP and CP have no row "
        f"in the llama31_8b table, lines 324-337; the reference ({REF} {REF_COMMIT[:8]}) sets MBS per system: "
        f"{CONFIG_H100} line 70, "
        f"{CONFIG_H200} line 69)")
PRECISION_NOTE = (f"precision is config.env's PRECISION/FP8, a declared choice: MLPerf allows fp32, bf16, fp16 and fp8 "
                  f"({RULES_FILE} lines 187-203); its RCPs are BF16 ({RCP_FILE}); the reference trains FP8 hybrid "
                  f"over bf16 ({PRETRAIN} lines 160-172)")
DATA_NOTE = ("data: MLPerf trains on C4 en shards 00768-00895 (c4-train.en_6, pretrain_llama31.py lines 215-218) and "
             "evaluates the first 91,205 validation documents (consolidate_data.sh lines 27-42); tprimat trains on "
             "DATASET and evaluates its validation split (utils/dataset/paths.py valid_prefix), recorded in the result")


@dataclass(frozen=True)
class MlperfRecipe:
    """The one MLPerf recipe: the same rules for every framework of every platform."""

    id: str = "mlperf-training-6.0-llama31-8b"
    title: str = "MLPerf Training 6.0 Llama 3.1 8B rules (closed division), mlcommons/training reference"
    frameworks: tuple[str, ...] = tuple(framework_names())
    values: tuple[MlperfValue, ...] = VALUES
    notes: tuple[str, ...] = (FREE, PRECISION_NOTE, DATA_NOTE)


RECIPE = MlperfRecipe()

# NeMo v2.3.0 ends every LR schedule at the trainer's max_steps (MegatronStrategy.setup copies it over the recipe's,
# nemo/lightning/pytorch/strategies/megatron_strategy.py line 437): its cosine reaches 1,200,000 only when TRAIN_ITERS
# is 1,200,000, as the reference's trainer.max_steps is (the run then ends at the target, as the reference's does).
NEMO_HORIZON = ("nemo: NeMo v2.3.0 ends the LR schedule at the trainer's max_steps (MegatronStrategy.setup, "
                "nemo/lightning/pytorch/strategies/megatron_strategy.py line 437), so a nemo job needs "
                f"TRAIN_ITERS={MAX_STEPS} (ended by the target, as the reference's run is); with a shorter budget its "
                "preflight refuses it (lr_decay_iters resolves to TRAIN_ITERS)")


def value_of(key: str) -> Any:
    """The rules' value of one config key (``sl``, ``gbs``, ``lr``...)."""
    return next(v.value for v in VALUES if v.key == key)


def applied_values(tiny: bool) -> tuple[MlperfValue, ...]:
    """The values a run takes: all of them, or with ``MODEL_SIZE=tiny`` all but the workload's. A tiny model runs the
    rules' optimizer, schedule, evaluation size and target at config.env's sequence length, batch and evaluation
    cadence, so that a cpu run checks the pipeline (MLLOG, the checker) in seconds."""
    return tuple(v for v in VALUES if not (tiny and v.workload))
