"""NVIDIA's published performance recipe for Llama 3 8B on H100, as data (``mega`` and ``nemo`` on ``nvd``).

Source: NeMo v2.3.0 (``nvcr.io/nvidia/nemo:25.04``) ``scripts/performance``: ``llm/pretrain_llama3_8b.py`` with
``recipes/llama3_8b.py: pretrain_performance_optimizations``, the row of
``recommended_model_configs/model_configs_h100.csv`` and ``PerfEnvPlugin``'s environment. docs/PROFILES.md says
why not Megatron-Bridge's newer recipe. NeMo publishes no Qwen 2.5 7B performance recipe, so Qwen runs the Llama
recipe's settings, and its result says so.
"""

from __future__ import annotations

from train.profiles.recipe import Borrowed, NotTaken, Recipe, Setting, Source, VendorTable, delayed_fp8

NEMO = "NVIDIA/NeMo"
NEMO_VERSION = "v2.3.0"
CSV = Source(NEMO, "scripts/performance/recommended_model_configs/model_configs_h100.csv", NEMO_VERSION,
             "rows pre_train,llama3,8b,h100,{bf16,fp8}")
PERF_UTILS = Source(NEMO, "scripts/performance/utils.py", NEMO_VERSION, "set_primary_perf_configs")
EXECUTOR = Source(NEMO, "scripts/performance/utils.py", NEMO_VERSION, "slurm_executor env_vars")
LOGGING = Source(NEMO, "scripts/performance/utils.py", NEMO_VERSION, "set_exp_logging_configs")
RECIPE = Source(NEMO, "nemo/collections/llm/recipes/llama3_8b.py", NEMO_VERSION,
                "trainer(): DistributedDataParallelConfig")
PERF_OPTS = Source(NEMO, "nemo/collections/llm/recipes/llama3_8b.py", NEMO_VERSION,
                   "pretrain_performance_optimizations")
COMM_OVERLAP = Source(NEMO, "nemo/lightning/pytorch/callbacks/megatron_comm_overlap.py", NEMO_VERSION,
                      "MegatronCommOverlapCallback._get_optimizer_overlap_cfgs, data-parallel size > 1")
FP8_PLUGIN = Source(NEMO, "nemo/collections/llm/recipes/precision/mixed_precision.py", NEMO_VERSION,
                    "bf16_with_fp8_mixed (fp8_recipe 'ds', set_primary_perf_configs' default)")
PERF_ENV = Source(NEMO, "nemo/lightning/run/plugins.py", NEMO_VERSION, "PerfEnvPlugin.setup")
SCRIPT = Source(NEMO, "scripts/performance/llm/pretrain_llama3_8b.py", NEMO_VERSION, "__main__")
MODEL_DEFAULT = Source("NVIDIA/Megatron-LM", "megatron/core/transformer/transformer_config.py", "core_v0.12.0",
                       "attention_backend default AttnBackend.auto, which NeMo's Llama3Config8B keeps")

LLAMA3_8B_H100 = Recipe(
    id="nvd-llama3-8b-h100-nemo-2.3",
    platform="nvd",
    title="NVIDIA NeMo v2.3.0 scripts/performance: Llama 3 8B pre-training on 8x H100",
    frameworks=("mega", "nemo"),
    gpus=8,
    precisions=("bf16", "fp8"),
    settings=(
        Setting("seq_length", 8192, CSV),
        Setting("micro_batch_size", 1, CSV),
        Setting("global_batch_size", 128, CSV),
        Setting("tensor_model_parallel_size", 1, CSV),
        Setting("pipeline_model_parallel_size", 1, CSV),
        Setting("context_parallel_size", 2, CSV),
        Setting("overlap_grad_reduce", True, RECIPE, note="MegatronCommOverlapCallback sets the same at DP > 1"),
        Setting("overlap_param_gather", True, RECIPE, note="MegatronCommOverlapCallback sets the same at DP > 1"),
        Setting("ddp_average_in_collective", True, RECIPE),
        Setting("ddp_bucket_size", 128 * 1024 * 1024, COMM_OVERLAP),
        Setting("grad_reduce_in_fp32", False, PERF_OPTS, note="plugins.grad_reduce_in_fp32 = False"),
        Setting("manual_gc", True, PERF_OPTS, note="GarbageCollectionCallback"),
        Setting("manual_gc_interval", 100, PERF_OPTS, note="GarbageCollectionCallback(gc_interval_train=100)"),
        Setting("tp_comm_overlap", False, PERF_OPTS, note="MegatronCommOverlapCallback(tp_comm_overlap=False)"),
        Setting("cross_entropy_fusion_impl", "te", PERF_UTILS,
                note="model.config.cross_entropy_fusion_impl = 'te' (Transformer Engine's cross entropy)"),
        Setting("attention_backend", "auto", MODEL_DEFAULT,
                note="with NVTE_FLASH_ATTN=1 and NVTE_FUSED_ATTN=1 from slurm_executor: Transformer Engine picks"),
        *delayed_fp8(FP8_PLUGIN, FP8_PLUGIN, param_gather=True),
    ),
    env=(
        Setting("NVTE_FWD_LAYERNORM_SM_MARGIN", "16", PERF_ENV, note="enable_layernorm_sm_margin, margin 16"),
        Setting("NVTE_BWD_LAYERNORM_SM_MARGIN", "16", PERF_ENV, note="enable_layernorm_sm_margin, margin 16"),
        Setting("NCCL_NVLS_ENABLE", "0", EXECUTOR),
        Setting("CUDA_DEVICE_MAX_CONNECTIONS", "1", PERF_ENV, note="set when TP or CP > 1 (CP is 2)"),
        Setting("TORCH_NCCL_AVOID_RECORD_STREAMS", "1", EXECUTOR),
    ),
    not_taken=(
        NotTaken("optim", "distributed_fused_adam_with_cosine_annealing(max_lr=3e-4)",
                 Source(NEMO, "nemo/collections/llm/recipes/llama3_8b.py", NEMO_VERSION, "pretrain_recipe"),
                 "training algorithm: every profile trains with config.env's optimizer and schedule"),
        NotTaken("data", "MockDataModule", Source(NEMO, "nemo/collections/llm/recipes/llama3_8b.py", NEMO_VERSION,
                                                  "pretrain_recipe"),
                 "data: every profile reads the same encoded dataset and tokenizer"),
        NotTaken("max_steps", 100, Source(NEMO, "scripts/performance/argument_parser.py", NEMO_VERSION,
                                          "--max_steps default"), "TRAIN_ITERS is config.env's"),
        NotTaken("FLOPsMeasurementCallback, TimingCallback, NEMO_LOG_MEMORY_USAGE=1", "on", LOGGING,
                 "logging only; tprimat measures steps itself"),
        NotTaken("vboost", "sudo nvidia-smi boost-slider --vboost 1", SCRIPT,
                 "a root-only setting of the node run by the Slurm executor before the job, not a job setting; "
                 "set it on the node if wanted (the result does not record it)"),
    ),
    notes=(
        "the performance script starts from recipes/llama3_8b.py (Llama 3 8B); the model stays Llama 3.1 8B's "
        "architecture (utils/spec/models.py), which has the same dense shape",
    ),
)

QWEN_REASON = ("NeMo v2.3.0 publishes no Qwen 2.5 7B performance recipe (no row in "
               "scripts/performance/recommended_model_configs/model_configs_h100.csv, no performance_mode in "
               "nemo/collections/llm/recipes/qwen25_7b.py): the Llama 3 8B recipe's parallel and performance "
               "settings run on Qwen 2.5 7B's shape")

TABLE = VendorTable(
    platform="nvd",
    recipes={"llama": LLAMA3_8B_H100, "qwen": Borrowed(LLAMA3_8B_H100, "llama", QWEN_REASON)},
    searched=("NVIDIA/NeMo v2.3.0 scripts/performance (llm/, recommended_model_configs/model_configs_h100.csv)",
              "NVIDIA-NeMo/Megatron-Bridge v0.6.0 src/megatron/bridge/perf_recipes/"),
)
