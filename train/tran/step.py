"""One rank's model, optimizer and precision for the ``tran`` reference trainer (its LR: train/rules/schedule.py).

Kept apart from ``train/tran/worker.py`` so ``bench/monitor_overhead.py`` drives the very same optimizer step.
FSDP2 (``train/tran/shard.py``) reduce-scatters gradients after every micro-batch: holding unsharded gradients
would cost the full model's gradients again. ``Trainer(sharding="ddp")`` is the reference FSDP2's loss curve is
checked against (tests/unit/train/frameworks/test_tran_fsdp.py).
"""

from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import transformers

from train.megatron.inputs import index_cache_dir
from train.rules.samples import MegatronSamples
from train.rules.schedule import lr_at
from train.tran.evaluation import Evaluator, valid_samples
from train.tran.init import init_like_megatron
from train.tran.shard import compile_layers, decoder_layers, read_back, shard, timed
from utils.config.model import Config
from utils.dataset import paths as dataset
from utils.schema.run import EffectiveSettings
from utils.spec.models import get_shape, workload_shape


@dataclass(frozen=True)
class Dist:
    """Where this process sits in the job: global and local rank, world size, its device."""

    rank: int
    local_rank: int
    world_size: int
    device: torch.device


def _rope_arguments(config_class: type, shape: Any) -> dict[str, Any]:
    """RoPE base and scaling in the spelling of the installed transformers: 4.x would keep an unknown
    ``rope_parameters`` (5's) as a plain attribute, silently training with its default base."""
    if "rope_parameters" in inspect.signature(config_class.__init__).parameters:
        rope: dict[str, Any] = {"rope_type": "default", "rope_theta": shape.rope_theta}
        if shape.rope_scaling:
            rope = {**shape.rope_scaling, "rope_theta": shape.rope_theta}
        return {"rope_parameters": rope}
    return {"rope_theta": shape.rope_theta, "rope_scaling": dict(shape.rope_scaling) if shape.rope_scaling else None}


def build_model(model: str, shape: Any, device: torch.device, init_std: float) -> torch.nn.Module:
    """The transformers class named by the shape, randomly initialised on ``device``; ``tran``'s and ``deep``'s."""
    common = dict(
        vocab_size=shape.vocab_size, hidden_size=shape.hidden_size, intermediate_size=shape.ffn_hidden_size,
        num_hidden_layers=shape.num_layers, num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=shape.num_query_groups, max_position_embeddings=shape.max_position_embeddings,
        rms_norm_eps=shape.norm_eps, tie_word_embeddings=shape.tied_embeddings,
        initializer_range=init_std, attn_implementation="sdpa", use_cache=False,
    )
    if shape.hf_architecture == "LlamaForCausalLM":
        config_class, extra = transformers.LlamaConfig, {"attention_bias": shape.qkv_bias}
    elif shape.hf_architecture == "Qwen2ForCausalLM":
        if not shape.qkv_bias:
            raise ValueError("Qwen2ForCausalLM always has QKV bias; the shape says qkv_bias=False")
        config_class, extra = transformers.Qwen2Config, {}
    elif shape.hf_architecture == "MistralForCausalLM":
        if shape.qkv_bias:
            raise ValueError("MistralForCausalLM has no QKV bias; the shape says qkv_bias=True")
        # MistralConfig defaults to v0.1's 4096-token sliding window; v0.3 has none (utils/spec/models.py).
        config_class, extra = transformers.MistralConfig, {"sliding_window": None, "head_dim": shape.head_dim}
    else:
        raise ValueError(f"{model}: tran has no builder for {shape.hf_architecture}")
    config = config_class(**common, **extra, **_rope_arguments(config_class, shape))
    with device:  # initialise in place: an 8B model is never materialised on the host first
        built = getattr(transformers, shape.hf_architecture)(config)
    init_like_megatron(built, init_std, shape.num_layers)  # Megatron's rule, not transformers' (train/tran/init.py)
    return built


def model_inputs(cfg: Config, model: str) -> tuple[Any, Path, Path, Any]:
    """(shape, data prefix, tokenizer directory, :class:`train.rules.samples.MegatronSamples`) of one model; a tiny
    model's shape takes the tokenizer's vocabulary."""
    prefix, tokenizer_dir = dataset.dataset_prefix(cfg, model), dataset.tokenizer_dir(cfg, model)
    tokenizer = dataset.load_tokenizer(tokenizer_dir)
    vocab = dataset.vocab_size(tokenizer)
    if cfg.model_size == "tiny":
        shape = get_shape(model, "tiny", vocab_size=vocab, layers=cfg.model_layers)
    else:
        shape = workload_shape(cfg, model)
        if shape.vocab_size < vocab:
            raise ValueError(f"tokenizer has {vocab} tokens but the {model} shape's vocab is "
                             f"{shape.vocab_size}: token ids would overflow the embedding")
    samples = MegatronSamples(prefix, cfg.sl, cfg.seed, cfg.train_iters * cfg.gbs, index_cache_dir(cfg), vocab,
                              dataset.eod_id(tokenizer))
    return shape, prefix, tokenizer_dir, samples


def build_optimizer(model: torch.nn.Module, cfg: Config, device: torch.device) -> torch.optim.Optimizer:
    """AdamW (eps ADAM_EPS) with weight decay on matrices only, as Megatron; shared by ``tran`` and ``deep``."""
    decay = [p for p in model.parameters() if p.ndim >= 2]  # no weight decay on norms and biases
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr_at(0, cfg), betas=(cfg.beta1, cfg.beta2), eps=cfg.adam_eps, fused=device.type == "cuda")


def precision_setup(cfg: Config, device: torch.device) -> tuple[torch.dtype | None, Any, str]:
    """(autocast dtype or None, GradScaler or None, what actually runs). Weights stay fp32 (master weights)."""
    if cfg.precision == "bf16":
        return torch.bfloat16, None, f"bf16 autocast ({device.type}), fp32 weights and optimizer"
    if cfg.precision == "fp16":
        scaler = torch.amp.GradScaler(device.type)
        return torch.float16, scaler, f"fp16 autocast + GradScaler ({device.type}), fp32 weights and optimizer"
    return None, None, f"fp32 ({device.type})"


def ensure_process_group(device: torch.device) -> None:
    """A process group for FSDP2 when the job has none (one rank started without torchrun, as in-process tests)."""
    if not dist.is_initialized():
        dist.init_process_group("gloo" if device.type == "cpu" else "nccl", store=dist.HashStore(), rank=0,
                                world_size=1)


@dataclass
class Trainer:
    """Model, optimizer and data of one rank; :meth:`step` runs one optimizer step (GA micro-batches)."""

    cfg: Config
    model_name: str
    dist_info: Dist
    shape: Any = None
    data: Any = None
    model: torch.nn.Module = None  # type: ignore[assignment]
    optimizer: torch.optim.Optimizer = None  # type: ignore[assignment]
    autocast_dtype: torch.dtype | None = None
    scaler: Any = None
    precision_detail: str = ""
    prefix: Path | None = None
    tokenizer_dir: Path | None = None
    extra_warnings: list[str] = field(default_factory=list)
    sharding: str = "fsdp2"  # "ddp": the loop before issue 22, the parity reference
    compiled: bool = False  # TRAN_COMPILE as it ran
    compile_time_seconds: float | None = None
    settings: dict[str, Any] = field(default_factory=dict)  # read back from the built model (shard.read_back)

    def __post_init__(self) -> None:
        cfg, device = self.cfg, self.dist_info.device
        self.shape, self.prefix, self.tokenizer_dir, self.data = model_inputs(cfg, self.model_name)
        torch.manual_seed(cfg.seed)  # same init on every rank (DDP also broadcasts rank 0's weights)
        model = build_model(self.model_name, self.shape, device, cfg.init_std)
        self.compiled = cfg.tran_compile_on("cpu" if device.type == "cpu" else "gpu")
        if self.compiled:
            compile_layers(model)  # before sharding, as torchtitan does
        if self.sharding == "fsdp2":
            ensure_process_group(device)
            model = shard(model, cfg.precision)
            self.settings = read_back(model)
            self._check_built(len(decoder_layers(model)) + 1)
            self.autocast_dtype = None
            self.scaler = torch.amp.GradScaler(device.type) if cfg.precision == "fp16" else None
            self.precision_detail = (
                f"{self.settings['param_dtype']} compute weights (FSDP2 MixedPrecisionPolicy, no autocast), "
                f"{self.settings['master_dtype']} master weights, gradients and AdamW states sharded over "
                f"{self.settings['shard_ranks']} rank(s), gradients reduced in {self.settings['grad_reduce_dtype']}"
                + (", GradScaler" if self.scaler else ""))
        elif self.sharding == "ddp":
            if self.dist_info.world_size > 1:
                model = torch.nn.parallel.DistributedDataParallel(
                    model, device_ids=[device.index] if device.type == "cuda" else None)
            self.autocast_dtype, self.scaler, self.precision_detail = precision_setup(cfg, device)
            self.settings = {"sharding": "DDP" if self.dist_info.world_size > 1 else "none"}
        else:
            raise ValueError(f"tran sharding {self.sharding!r}: allowed values are fsdp2, ddp")
        self.settings["compile"] = self.compiled
        self.model = model
        self.optimizer = build_optimizer(model, cfg, device)
        if self.compiled:
            self.compile_time_seconds = self.warm_up()

    def _check_built(self, modules: int) -> None:
        """Stop before step 1 when the built model is not the FSDP2 the plan states (one line, both values)."""
        cfg = self.cfg
        planned = {"sharding": "FSDP2 (fully_shard)", "fully_shard_modules": modules, "param_dtype": cfg.precision,
                   "grad_reduce_dtype": "fp32", "master_dtype": "fp32", "shard_ranks": self.dist_info.world_size}
        wrong = [f"{key}: built {self.settings.get(key)!r}, planned {value!r}" for key, value in planned.items()
                 if self.settings.get(key) != value]
        if wrong:
            raise ValueError("tran's model is not the FSDP2 the plan states: " + "; ".join(wrong))

    def effective_settings(self) -> EffectiveSettings:
        """What the built model runs (read back from it, not from the config), for the result."""
        return EffectiveSettings(settings=dict(self.settings), resolved_by=(
            "tprimat itself (tran is the reference trainer); its sharding, parameter and reduce dtypes and compile "
            "read back from the built model (train/tran/shard.py read_back)"))

    def evaluator(self) -> Any:
        """This rank's held-out evaluation (train/tran/evaluation.py) through this model and precision."""
        info = self.dist_info

        def forward(input_ids: torch.Tensor) -> torch.Tensor:
            with torch.autocast(info.device.type, dtype=self.autocast_dtype, enabled=self.autocast_dtype is not None):
                return self.model(input_ids=input_ids).logits

        return Evaluator(self.cfg, info.rank, info.world_size, info.device, valid_samples(self.cfg, self.model_name,
                                                                                           self.data),
                         forward, self.model.train)

    def warm_up(self) -> float:
        """One forward and backward pass of the first micro-batch, which compiles the layers; its gradients are
        dropped. Returns its seconds: the compile time, kept out of the measured steps (it includes one pass)."""
        def one_pass() -> None:
            self._micro_batch_loss(0, 0).backward()
            self.optimizer.zero_grad(set_to_none=True)

        return timed(self.dist_info.device, one_pass)

    def _micro_batch_loss(self, index: int, micro: int) -> torch.Tensor:
        cfg, info = self.cfg, self.dist_info
        tokens = self.data.micro_batch(index, micro, rank=info.rank, dp=cfg.dp, mbs=cfg.mbs, ga=cfg.ga)
        tokens = tokens.to(info.device, non_blocking=True)
        with torch.autocast(info.device.type, dtype=self.autocast_dtype, enabled=self.autocast_dtype is not None):
            logits = self.model(input_ids=tokens[:, :-1]).logits
        return torch.nn.functional.cross_entropy(
            logits.float().reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1))

    def step(self, index: int) -> torch.Tensor:
        """Optimizer step ``index`` (0-based, at ``lr_at(index)`` as in Megatron): GA micro-batches, clip, update.
        Returns this rank's mean loss."""
        cfg, info = self.cfg, self.dist_info
        lr = lr_at(index, cfg)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        total = torch.zeros((), device=info.device)
        ddp = isinstance(self.model, torch.nn.parallel.DistributedDataParallel)
        for micro in range(cfg.ga):
            last = micro == cfg.ga - 1
            sync = self.model.no_sync() if ddp and not last else contextlib.nullcontext()
            with sync:
                loss = self._micro_batch_loss(index, micro)
                scaled = loss / cfg.ga
                (self.scaler.scale(scaled) if self.scaler else scaled).backward()
            total += loss.detach()
        if self.scaler:
            self.scaler.unscale_(self.optimizer)
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return total / cfg.ga


