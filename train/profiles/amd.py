"""AMD's published MI300X recipes for Llama 3.1 8B and Qwen 2.5 7B, as data (``mega`` and ``prim`` on ``amd``).

Source: Primus v0.5.0 (``bfeac70c``, ``rocm/primus:v25.11``): ``examples/megatron/configs/MI300X/*-pretrain.yaml``
overrides and ``examples/run_pretrain.sh``'s environment; FP8 is ``fp8: hybrid`` with ``trainer_base.yaml``'s
scaling. Unstated settings stay identical (docs/PROFILES.md). Primus-Turbo settings apply to ``prim`` only;
values that would change the model, the algorithm or the data are listed as not taken.
"""

from __future__ import annotations

from train.profiles.recipe import NotTaken, Recipe, Setting, Source, VendorTable, delayed_fp8

PRIMUS = "AMD-AGI/Primus"
PRIMUS_VERSION = "v0.5.0"
LLAMA_EXP = "examples/megatron/configs/MI300X/llama3.1_8B-pretrain.yaml"
QWEN_EXP = "examples/megatron/configs/MI300X/qwen2.5_7B-pretrain.yaml"
RUN_SCRIPT = "examples/run_pretrain.sh"
TRAINER_BASE = Source(PRIMUS, "primus/configs/modules/megatron/trainer_base.yaml", PRIMUS_VERSION,
                      "fp8 block: 'fp8: null # e4m3, hybrid', recipe, amax history and algorithm, param gather")
FP8_OPTION = Source(PRIMUS, "examples/megatron/configs/MI300X/llama4_17B16E-pretrain.yaml", PRIMUS_VERSION,
                    "'# fp8: hybrid', the FP8 option Primus's examples name")
SCRATCH = Source(PRIMUS, RUN_SCRIPT, PRIMUS_VERSION, "export HSA_NO_SCRATCH_RECLAIM=${HSA_NO_SCRATCH_RECLAIM:-0}")
LAYOUT_DEFAULT = Source(PRIMUS, "primus/configs/models/megatron/language_model.yaml", PRIMUS_VERSION,
                        "context_parallel_size: 1 (the examples leave it at this default)")
HIPBLASLT = Source(PRIMUS, RUN_SCRIPT, PRIMUS_VERSION, "handle_hipblaslt_tuning, stage 0 (the default)")


def _exp(path: str, where: str) -> Source:
    return Source(PRIMUS, path, PRIMUS_VERSION, f"modules.pre_trainer.overrides: {where}")


FP8_SETTINGS = delayed_fp8(FP8_OPTION, TRAINER_BASE, param_gather=False)

ENV = (
    Setting("HSA_NO_SCRATCH_RECLAIM", "0", SCRATCH,
            note="the launcher's default (the identical profile keeps scratch memory: 1)"),
    Setting("TE_HIPBLASLT_TUNING_RUN_COUNT", "10", HIPBLASLT,
            note="read only when Transformer Engine's online hipBLASLt tuning is on"),
    Setting("TE_HIPBLASLT_TUNING_ALGO_COUNT", "50", HIPBLASLT,
            note="read only when Transformer Engine's online hipBLASLt tuning is on"),
)


def _not_taken(path: str, values: dict[str, object]) -> tuple[NotTaken, ...]:
    reasons = {
        "init_method_std": "architecture: every profile initialises with config.env's INIT_STD",
        "norm_epsilon": "architecture: the model's own epsilon (utils/spec/models.py)",
        "max_position_embeddings": "architecture: the model's own maximum positions (utils/spec/models.py)",
        "lr": "training algorithm: config.env's LR", "lr_warmup_iters": "training algorithm: config.env's WARMUP_STEPS",
        "train_iters": "config.env's TRAIN_ITERS", "eod_mask_loss": "training algorithm: no EOD loss masking anywhere",
        "lr_decay_iters": "training algorithm: LR decay over config.env's TRAIN_ITERS (lr_decay_iters = TRAIN_ITERS)",
        "mock_data": "data: every profile reads the same encoded dataset and tokenizer",
    }
    return tuple(NotTaken(key, value, _exp(path, key), reasons[key]) for key, value in values.items())


HIPBLASLT_OFFLINE = NotTaken(
    "PRIMUS_HIPBLASLT_TUNING_STAGE", "1-3", Source(PRIMUS, RUN_SCRIPT, PRIMUS_VERSION, "handle_hipblaslt_tuning"),
    "offline GEMM tuning is a three-run workflow (dump shapes, tune, rerun with the tuned file) on the target node; "
    "the published examples run stage 0, as tuned does")

PRIMUS_ONLY = ("enable_primus_turbo", "use_turbo_attention", "use_turbo_grouped_mlp")
NOTES = {"use_turbo_grouped_mlp": "a mixture-of-experts kernel: no effect on a dense model"}


def _example(recipe_id: str, path: str, stated: dict[str, object], not_taken: dict[str, object],
             where: dict[str, str] | None = None) -> Recipe:
    """One MI300X example experiment: the overrides it states (``where`` names a key's line when it is not
    plain), CP at Primus's default, the FP8 option, run_pretrain.sh's environment, and what tuned leaves out."""
    where = where or {}
    settings = [Setting(key, value, _exp(path, where.get(key, key)), frameworks=("prim",) if key in PRIMUS_ONLY
                        else (), note=NOTES.get(key, "") if value else "")
                for key, value in stated.items()]
    settings.insert(5, Setting("context_parallel_size", 1, LAYOUT_DEFAULT))
    return Recipe(id=recipe_id, platform="amd", title=f"AMD Primus {PRIMUS_VERSION} {path} with run_pretrain.sh",
                  frameworks=("mega", "prim"), gpus=8, precisions=("bf16", "fp8"),
                  settings=(*settings, *FP8_SETTINGS), env=ENV,
                  not_taken=(*_not_taken(path, not_taken), HIPBLASLT_OFFLINE))


# What both examples state alike, between their batch (SL, MBS, GBS) and their Primus-Turbo kernels (in file order).
STATED_ALIKE = {"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, "overlap_grad_reduce": True,
                "overlap_param_gather": True, "gradient_accumulation_fusion": False, "enable_primus_turbo": True}
NOT_TAKEN = {"init_method_std": 0.008, "norm_epsilon": 1e-6, "lr": 1e-5, "lr_warmup_iters": 2, "train_iters": 50,
             "eod_mask_loss": True, "mock_data": True}

LLAMA31_8B_MI300X = _example(
    "amd-llama3.1-8b-mi300x-primus-0.5.0", LLAMA_EXP,
    {"seq_length": 8192, "micro_batch_size": 2, "global_batch_size": 128, **STATED_ALIKE,
     "use_turbo_attention": False, "use_turbo_grouped_mlp": False},
    {**NOT_TAKEN, "max_position_embeddings": 8192})

QWEN25_7B_MI300X = _example(
    "amd-qwen2.5-7b-mi300x-primus-0.5.0", QWEN_EXP,
    {"seq_length": 2048, "micro_batch_size": 10, "global_batch_size": 640, **STATED_ALIKE,
     "use_turbo_attention": True, "use_turbo_grouped_mlp": True},
    {**NOT_TAKEN, "max_position_embeddings": 131072, "lr_decay_iters": 320000},
    where={"seq_length": "seq_length: ${PRIMUS_SEQ_LENGTH:2048}"})

TABLE = VendorTable(
    platform="amd",
    recipes={"llama": LLAMA31_8B_MI300X, "qwen": QWEN25_7B_MI300X},
    searched=("AMD-AGI/Primus v0.5.0 examples/megatron/configs/MI300X/",),
)
