"""``deep``'s worker: one rank of the DeepSpeed engine over ``tran``'s model, samples, schedule and loop.

After ``deepspeed.initialize`` it reads back what the engine resolved into ``effective_settings`` and stops when
it differs from the config.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from train.deep.plugin import FRAMEWORK
from train.rules.schedule import lr_at
from train.tran.evaluation import Evaluator, valid_samples
from train.tran.step import Dist, build_model, build_optimizer, model_inputs
from train.tran.worker import exit_worker, run_worker
from utils.config.model import Config
from utils.schema.run import EffectiveSettings

# What the engine resolved, by the other frameworks' record names -> (engine method, the config key it must equal),
# so the comparison's settings table lines DeepSpeed's values up with Megatron's.
RESOLVED = {
    "zero_stage": ("zero_optimization_stage", ("zero_optimization", "stage")),
    "global_batch_size": ("train_batch_size", ("train_batch_size",)),
    "micro_batch_size": ("train_micro_batch_size_per_gpu", ("train_micro_batch_size_per_gpu",)),
    "gradient_accumulation_steps": ("gradient_accumulation_steps", ("gradient_accumulation_steps",)),
    "clip_grad": ("gradient_clipping", ("gradient_clipping",)),
    "bf16": ("bfloat16_enabled", ("bf16", "enabled")),
    "fp16": ("fp16_enabled", ("fp16", "enabled")),
}


def resolved_settings(engine: Any, config: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(settings the engine reports, each difference from ``config`` as 'name: engine X, config Y')."""
    settings: dict[str, Any] = {}
    differences = []
    for name, (method, path) in RESOLVED.items():
        value = getattr(engine, method)()
        wanted: Any = config
        for key in path:
            wanted = wanted[key]
        settings[name] = value
        if value != wanted:
            differences.append(f"{name}: DeepSpeed resolved {value!r}, the config says {wanted!r}")
    bf16, fp16 = settings.pop("bf16"), settings.pop("fp16")
    settings["precision"] = "bf16" if bf16 else "fp16" if fp16 else "fp32"
    settings["optimizer"] = type(engine.optimizer).__name__
    settings["client_optimizer"] = type(getattr(engine, "client_optimizer", None) or engine.optimizer).__name__
    communication = getattr(engine, "communication_data_type", None)
    settings["communication_data_type"] = str(communication)
    settings["grad_reduce_in_fp32"] = None if communication is None else communication is torch.float32
    settings["overlap_grad_reduce"] = bool(config["zero_optimization"]["overlap_comm"])
    # The names tran's read-back uses (train/tran/shard.py), so the settings table lines the sharding up.
    names = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
    settings["sharding"] = f"ZeRO-{settings['zero_stage']}"
    settings["param_dtype"] = settings["precision"]
    settings["grad_reduce_dtype"] = names.get(communication)
    return settings, differences


SHM_OP = "deepspeed_shm_comm"


def _no_inference_shm_op() -> None:
    """Keep DeepSpeed from compiling its shared-memory all-reduce op for a cpu job. DeepSpeed 0.19.8's
    ``TorchBackend.__init__`` (``build_shm_op``) JIT-compiles ``deepspeed_shm_comm`` for the cpu accelerator: 40-150 s
    of CPU on the 2-core host (docs/PERFORMANCE.md, "The test suite"), for ``inference_all_reduce`` alone. Marked
    incompatible in ``deepspeed.ops.__compatible_ops__``, where it looks."""
    # deepspeed: 5.3 s to import (python -X importtime); only where DeepSpeed's ops are patched
    import deepspeed.ops

    table = getattr(deepspeed.ops, "__compatible_ops__", None)
    if isinstance(table, dict):
        table[SHM_OP] = False


@dataclass
class DeepSpeedTrainer:
    """Model, engine and data of one rank; :meth:`step` runs one optimizer step (GA micro-batches)."""

    cfg: Config
    model_name: str
    dist_info: Dist
    config: dict[str, Any]
    shape: Any = None
    data: Any = None
    engine: Any = None
    prefix: Path | None = None
    tokenizer_dir: Path | None = None
    precision_detail: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    version: str = ""

    def __post_init__(self) -> None:
        import deepspeed  # a failure here is recorded in the result by train_tran.train's guard

        cfg, device = self.cfg, self.dist_info.device
        if device.type == "cpu":
            _no_inference_shm_op()
        self.version = deepspeed.__version__
        self.shape, self.prefix, self.tokenizer_dir, self.data = model_inputs(cfg, self.model_name)
        torch.manual_seed(cfg.seed)  # the same initial weights as tran's (DeepSpeed broadcasts rank 0's)
        model = build_model(self.model_name, self.shape, device, cfg.init_std)
        optimizer = build_optimizer(model, cfg, device)
        self.engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=self.config)
        self.settings, differences = resolved_settings(self.engine, self.config)
        if differences:
            raise ValueError("DeepSpeed did not take the workload as configured: " + "; ".join(differences))
        weights = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32"}[cfg.precision]
        self.precision_detail = (f"{weights} weights and activations (DeepSpeed {weights}), fp32 master weights "
                                    f"and optimizer state, ZeRO stage {cfg.zero_stage} ({self.settings['optimizer']})")

    def effective_settings(self) -> EffectiveSettings:
        return EffectiveSettings(settings=self.settings, resolved_by=f"deepspeed.initialize (DeepSpeed {self.version})")

    def evaluator(self) -> Any:
        """This rank's held-out evaluation (train/tran/evaluation.py) through the engine's forward."""
        info = self.dist_info
        return Evaluator(self.cfg, info.rank, info.world_size, info.device,
                         valid_samples(self.cfg, self.model_name, self.data),
                         lambda input_ids: self.engine(input_ids=input_ids).logits, self.engine.train)

    def step(self, index: int) -> torch.Tensor:
        """Optimizer step ``index`` (0-based) at ``lr_at(index)``: GA micro-batches through the engine."""
        cfg, info = self.cfg, self.dist_info
        for group in self.engine.optimizer.param_groups:
            group["lr"] = lr_at(index, cfg)
        total = torch.zeros((), device=info.device)
        for micro in range(cfg.ga):
            tokens = self.data.micro_batch(index, micro, rank=info.rank, dp=cfg.dp, mbs=cfg.mbs, ga=cfg.ga)
            tokens = tokens.to(info.device, non_blocking=True)
            logits = self.engine(input_ids=tokens[:, :-1]).logits
            loss = torch.nn.functional.cross_entropy(
                logits.float().reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1))
            self.engine.backward(loss)  # scaled by 1/GA inside DeepSpeed
            self.engine.step()  # the optimizer steps (and clips) at the accumulation boundary only
            total += loss.detach()
        return total / cfg.ga


def bind(args: argparse.Namespace) -> Callable[[Config, str, Dist], DeepSpeedTrainer]:
    """The trainer factory with the launcher's DeepSpeed config."""
    try:
        config = json.loads(Path(args.deepspeed_config).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the DeepSpeed config {args.deepspeed_config}: {exc}") from None
    return lambda cfg, model, info: DeepSpeedTrainer(cfg, model, info, config)


def main(argv: list[str] | None = None) -> int:
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--deepspeed-config", required=True, type=Path,
                            help="DeepSpeed JSON config (written by the launcher from config.env)")

    return run_worker(argv, FRAMEWORK, "deep: the tran model trained by DeepSpeed with ZeRO (run under torchrun; "
                      "normally started by python -m train.launch --framework deep). Config comes from config.env "
                      "plus environment overrides.", add_arguments=arguments, bind=bind)


if __name__ == "__main__":
    exit_worker(main())
