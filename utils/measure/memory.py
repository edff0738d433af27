"""Will it fit: the peak memory per GPU of one training job, estimated before it starts.

Why one module: every framework's launch asks the same question, and a refusal must name the same numbers whichever
framework asks; the memory check, the dry run and the result's ``memory_estimate`` all come from :func:`estimate`.

The terms (:attr:`Estimate.terms`): ``weights``, ``gradients``, ``master_weights``, ``optimizer_states`` (bytes per
parameter as the framework keeps them, :class:`StateBytes`, times the parameters this GPU holds after TP, the
larger PP stage and any DP sharding); ``autocast_weight_copies`` (bf16 copies saved by ``torch.autocast``);
``gathered_parameters`` (FSDP2/ZeRO-3: two unsharded layers at once, plus FSDP2's root); ``activations`` (bytes per
token and layer, linear in h, f, kv and a x s, one set per kernel family: :data:`ACTIVATIONS`, derived tensor by
tensor in its comments; ``MBS x SL / CP`` tokens per micro-batch, divided by TP, ``min(PP, GA)`` in flight);
``output_head`` (logits and cross entropy); ``communication_buffers``; ``optimizer_step_transient``. The peak is
the larger of the backward peak and the optimizer-step peak (:attr:`Estimate.phase`).

Calibration (docs/PERFORMANCE.md): the coefficients were derived from the kernels, not fitted, and land within 2% of
the allocator peaks measured on an H100 (tests/unit/measure/test_memory.py holds 15%). Not modelled: FP8 weight
caches, recomputation, the CUDA context, communicator buffers and fragmentation, hence the warning within 10%.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from typing import Any

from utils.config.load import load_config
from utils.config.model import Config
from utils.config.rules import ConfigError
from utils.machine.hardware import DeviceMemory, device_memory, host_memory_gib
from utils.schema.measures import MemoryEstimate
from utils.spec.models import ModelShape, workload_shape
from utils.spec.registry import framework_names, model_names, platform_names

GIB = 1024**3
# DeepSpeed's default reduce_bucket_size (5e8 elements) in bf16: the contiguous-gradient bucket of ZeRO-1/2.
DEEPSPEED_BUCKET_BYTES = int(5e8) * 2
# How close to the GPU's memory an estimate may come before the check warns (calibration error ~2%, tested to 15%; the
# CUDA context, communicators and fragmentation are not counted).
TIGHT_FRACTION = 0.90


@dataclass(frozen=True)
class StateBytes:
    """Bytes per parameter of each kind a framework keeps, and whether the data-parallel group shards it."""

    weights: float
    gradients: float
    master_weights: float
    optimizer_states: float
    sharded: frozenset[str] = frozenset()  # names of the kinds above divided by the data-parallel group
    step_transient: float = 0.0  # bytes per parameter of this rank's partition, during the optimizer step only


@dataclass(frozen=True)
class ActivationCoefficients:
    """Bytes saved for the backward pass per token and layer: ``per_h*h + per_f*f + per_kv*kv + per_as*a*s``,
    plus ``head_per_vocab`` bytes per token per vocabulary entry at the output layer."""

    name: str
    per_h: float
    per_f: float
    per_kv: float
    per_as: float
    head_per_vocab: float


ACTIVATIONS: dict[str, ActivationCoefficients] = {
    # Hugging Face modules under bf16 autocast with fp32 weights (tran on DDP). The residual stream is fp32. Per layer:
    # each RMSNorm saves its fp32 input and its fp32 normalised output (2 x 8h); q/k/v and gate/up each cast the fp32
    # norm output to bf16 themselves and save it (3 x 2h + 2 x 2h); SDPA (flash) saves q, k, v and its output (2h + 2 x
    # 2kv + 2h); the output projection saves the contiguous copy of it (2h); SwiGLU saves gate, silu(gate), up and their
    # product (4 x 2f). Total 32h + 4kv + 8f. Head: the bf16 logits stay referenced (2V), log_softmax saves its fp32
    # output (4V), and its backward holds the incoming and outgoing fp32 gradients (2 x 4V): 14V.
    "hf_autocast": ActivationCoefficients("Hugging Face modules, bf16 autocast over fp32 weights",
                                          per_h=32, per_f=8, per_kv=4, per_as=0, head_per_vocab=14),
    # The same modules with bf16 weights (DeepSpeed bf16, FSDP2's param_dtype=bfloat16): no casts, a bf16
    # residual stream. RMSNorm upcasts inside: it saves the fp32 input and the bf16 normalised output (2 x 6h);
    # q/k/v share one saved bf16 input (2h), gate/up another (2h); SDPA 2h + 4kv + 2h; output projection input
    # 2h; SwiGLU 8f. Total 22h + 4kv + 8f. Head as above: 14V.
    "hf_bf16": ActivationCoefficients("Hugging Face modules, bf16 weights",
                                      per_h=22, per_f=8, per_kv=4, per_as=0, head_per_vocab=14),
    # Megatron-core's local implementation (no Transformer Engine), bf16, unfused softmax in fp32, no flash
    # attention: each RMSNorm saves its bf16 input and normalised product (2 x 4h); the fused QKV projection its
    # input (2h); attention saves q and the key/value heads repeated to every query head (2h + 2h + 2h), the fp32
    # softmax output and its bf16 copy (6 a s) and the permuted context (2h); the output projection input (2h);
    # fc1 its input (2h), SwiGLU its 2f-wide input (4f), fc2 its input (2f). Total 22h + 6f + 6as. Head: the
    # bf16 logits (2V), the fp32 softmax Megatron's cross entropy saves (4V), its fp32 gradient (4V): 10V.
    "megatron_local": ActivationCoefficients("Megatron-core local implementation, unfused fp32 softmax",
                                             per_h=22, per_f=6, per_kv=0, per_as=6, head_per_vocab=10),
    # Megatron-core with Transformer Engine (mega, prim, nemo in their images): fused norm+linear saves the
    # bf16 input and the normalised output (2 x (2h + 2h)); flash/cuDNN attention saves q, k, v and its output
    # (2h + 4kv + 2h), the output projection reuses that output; fc1's fused SwiGLU input 4f, fc2's input 2f.
    # Total 12h + 4kv + 6f. Head with the fused cross entropy: logits (2V), fp32 softmax (4V), bf16 gradient (2V).
    "megatron_te": ActivationCoefficients("Megatron-core with Transformer Engine, flash attention",
                                          per_h=12, per_f=6, per_kv=4, per_as=0, head_per_vocab=8),
}


@dataclass(frozen=True)
class Recipe:
    """How one framework configuration holds a model: its states, copies, kernels and buffers."""

    framework: str
    sharding: str  # what the fairness table calls it: DDP, FSDP2, ZeRO-1, distributed optimizer, none (one rank)
    param_dtype: str
    reduce_dtype: str
    states: StateBytes
    activations: ActivationCoefficients
    autocast_copies: bool = False
    gathered: bool = False  # FSDP2 / ZeRO-3: layers all-gathered before they run
    unsharded_root: bool = False  # FSDP2: the root (embedding, output layer) stays unsharded through the step
    fixed_bytes: int = 0
    shard_with_cp: bool = False  # Megatron's distributed optimizer shards over DP x CP
    notes: tuple[str, ...] = ()


# ---------------------------------------------------------------------------
# the frameworks' recipes

_ALL = frozenset({"weights", "gradients", "master_weights", "optimizer_states"})
_OPTIMIZER = frozenset({"master_weights", "optimizer_states"})


def tran_recipe(sharding: str, world_size: int) -> Recipe:
    """``tran``: ``fsdp2`` (fp32 master weights, gradients and AdamW states sharded, bf16 compute and fp32
    reduction) or ``ddp`` (fp32 everything replicated under bf16 autocast; one rank runs without the wrapper)."""
    if sharding == "fsdp2":
        return Recipe("tran", "FSDP2", "bf16", "fp32", StateBytes(4, 4, 0, 8, sharded=_ALL),
                      ACTIVATIONS["hf_bf16"], gathered=True, unsharded_root=True,
                      notes=("fp32 sharded parameters are the master weights (no separate copy)",))
    if sharding != "ddp":
        raise ValueError(f"tran sharding {sharding!r}: allowed values are fsdp2, ddp")
    # DDP's gradient buckets are a second fp32 copy of every gradient (gradient_as_bucket_view is off).
    buckets = 4 if world_size > 1 else 0
    return Recipe("tran", "DDP" if world_size > 1 else "none (one rank)", "fp32", "fp32",
                  StateBytes(4, 4 + buckets, 0, 8), ACTIVATIONS["hf_autocast"], autocast_copies=True,
                  notes=("fp32 weights are the master weights; autocast runs the matmuls in bf16",))


def deep_recipe(stage: int) -> Recipe:
    """``deep``: DeepSpeed bf16 (bf16 weights and gradients, fp32 master weights and AdamW states) at ZeRO
    ``stage``. Stage 0 (DeepSpeed's BF16_Optimizer) also keeps fp32 gradient accumulators."""
    if stage == 0:
        return Recipe("deep", "ZeRO-0", "bf16", "bf16", StateBytes(2, 2 + 4, 4, 8), ACTIVATIONS["hf_bf16"])
    sharded = {1: _OPTIMIZER, 2: _OPTIMIZER | {"gradients"}, 3: _ALL}.get(stage)
    if sharded is None:
        raise ValueError(f"ZeRO stage {stage}: allowed values are 0, 1, 2, 3")
    # Stages 1 and 2 flatten the partition's bf16 gradients and convert them to fp32 to step (2 + 4 bytes).
    transient = 6.0 if stage in (1, 2) else 0.0
    return Recipe("deep", f"ZeRO-{stage}", "bf16", "bf16",
                  StateBytes(2, 2, 4, 8, sharded=frozenset(sharded), step_transient=transient),
                  ACTIVATIONS["hf_bf16"], gathered=stage == 3, fixed_bytes=DEEPSPEED_BUCKET_BYTES)


def megatron_recipe(framework: str, transformer_impl: str = "transformer_engine",
                    distributed_optimizer: bool = True, grad_reduce_in_fp32: bool = False) -> Recipe:
    """``mega``/``prim``/``nemo``: Megatron-core bf16 weights, a gradient buffer (bf16 under tprimat's
    ``--grad-reduce-in-bf16``), fp32 master weights and AdamW states (sharded by the distributed optimizer)."""
    family = {"transformer_engine": "megatron_te", "local": "megatron_local"}.get(transformer_impl)
    if family is None:
        raise ValueError(f"transformer_impl {transformer_impl!r}: allowed values are transformer_engine, local")
    grads = 4 if grad_reduce_in_fp32 else 2
    return Recipe(framework, "distributed optimizer" if distributed_optimizer else "DDP", "bf16",
                  "fp32" if grad_reduce_in_fp32 else "bf16",
                  # The step gives each fp32 master shard an fp32 copy of its gradient.
                  StateBytes(2, grads, 4, 8, sharded=_OPTIMIZER if distributed_optimizer else frozenset(),
                             step_transient=4.0),
                  ACTIVATIONS[family], shard_with_cp=distributed_optimizer)


def recipe_for(framework: str, cfg: Any, **options: Any) -> Recipe:
    """The recipe ``framework`` runs under ``cfg``: tran FSDP2 (``sharding="ddp"`` for the old loop), deep at
    ZERO_STAGE, the Megatron-based ones with Transformer Engine unless ``transformer_impl="local"``."""
    if framework == "tran":
        return tran_recipe(options.get("sharding", "fsdp2"), cfg.world_size)
    if framework == "deep":
        return deep_recipe(options.get("zero_stage", cfg.zero_stage))
    if framework in ("mega", "prim", "nemo"):
        return megatron_recipe(framework, **options)
    raise ValueError(f"framework {framework!r}: no memory recipe (known: tran, deep, mega, prim, nemo)")


# ---------------------------------------------------------------------------
# the estimate


@dataclass(frozen=True)
class Estimate:
    """Peak bytes per GPU of one job, by term, and whether it fits the GPU it is meant for."""

    framework: str
    sharding: str
    param_dtype: str
    reduce_dtype: str
    model_label: str
    parameters: int
    parameters_per_gpu: int
    terms: dict[str, int]
    phase: str  # "backward" or "optimizer step": where the peak is
    device: DeviceMemory | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    processes: int = 1  # the job's processes on one host (GPUS_PER_NODE): on cpu they share its memory

    @property
    def peak_bytes(self) -> int:
        return _peak(self.terms)[0]

    @property
    def peak_gib(self) -> float:
        return self.peak_bytes / GIB

    @property
    def fits(self) -> bool | None:
        """True or False against the device's memory; None when the device's memory is unknown."""
        if self.device is None or self.device.memory_gib is None:
            return None
        return self.peak_gib <= self.device.memory_gib

    @property
    def tight(self) -> bool:
        return bool(self.fits) and self.peak_gib > TIGHT_FRACTION * self.device.memory_gib  # type: ignore[union-attr]

    def what(self) -> str:
        return f"{self.framework}, {self.sharding}, {self.model_label}, {self.parameters / 1e9:.2f} B params"

    def line(self) -> str:
        """One line for the dry run and the refusal, naming both numbers."""
        where = self.device
        if where is None or where.memory_gib is None:
            reason = where.reason if where is not None else "no device given"
            return f"estimated {self.peak_gib:.1f} GiB per GPU ({self.what()}); not checked: {reason}"
        sign = "<=" if self.fits else ">"
        return (f"estimated {self.peak_gib:.1f} GiB per GPU {sign} {where.memory_gib:.1f} GiB on "
                f"{where.device_name} ({self.what()})")

    def record(self, forced: bool = False) -> MemoryEstimate:
        """The result's ``memory_estimate`` block (GiB, as memory_metrics); ``forced``: run past a refusal."""
        device = self.device
        return MemoryEstimate(
            peak_gb=round(self.peak_gib, 2), phase=self.phase, framework=self.framework, sharding=self.sharding,
            param_dtype=self.param_dtype, reduce_dtype=self.reduce_dtype, model=self.model_label,
            parameters=self.parameters, parameters_per_gpu=self.parameters_per_gpu,
            terms_gb={name: round(value / GIB, 3) for name, value in self.terms.items()},
            device_name=device.device_name if device else None,
            device_memory_gb=device.memory_gib if device else None,
            device_basis=device.basis if device else None, fits=self.fits, forced=forced,
            reason=None if self.fits is not None else (device.reason if device else "no device given"))


_STEP_TERMS = ("optimizer_step_transient",)
_BACKWARD_TERMS = ("autocast_weight_copies", "gathered_parameters", "activations", "output_head")


def _peak(terms: dict[str, int]) -> tuple[int, str]:
    """(peak bytes, phase): persistent terms plus the larger of the backward's and the step's transients."""
    persistent = sum(v for k, v in terms.items() if k not in _STEP_TERMS and k not in _BACKWARD_TERMS)
    backward = sum(terms.get(k, 0) for k in _BACKWARD_TERMS)
    step = sum(terms.get(k, 0) for k in _STEP_TERMS)
    return (persistent + backward, "backward") if backward >= step else (persistent + step, "optimizer step")


def _stage_parameters(shape: ModelShape, layout: Config) -> tuple[int, int, int]:
    """(parameters on the larger pipeline stage of one GPU, of its matrices, of one of its layers)."""
    embedding = shape.vocab_size * shape.hidden_size
    layer = (shape.parameter_count() - embedding * (1 if shape.tied_embeddings else 2) - shape.hidden_size)
    layer //= shape.num_layers
    layers = math.ceil(shape.num_layers / layout.pp)
    first = layers * layer + embedding
    last = layers * layer + (0 if shape.tied_embeddings else embedding) + shape.hidden_size
    if layout.pp == 1:
        stage = layers * layer + embedding * (1 if shape.tied_embeddings else 2) + shape.hidden_size
        output = 0 if shape.tied_embeddings else embedding
    else:
        stage, output = max(first, last), (0 if shape.tied_embeddings else embedding) if last >= first else 0
    matrices = layers * (layer - 2 * shape.hidden_size) + output
    return math.ceil(stage / layout.tp), math.ceil(matrices / layout.tp), math.ceil(layer / layout.tp)


def estimate(shape: ModelShape, layout: Config, recipe: Recipe, device: DeviceMemory | None = None) -> Estimate:
    """Peak memory per GPU of ``recipe`` training ``shape`` in the parallel layout and batch of the config ``layout``
    (its TP, PP, CP, DP, MBS, SL, GA; see the module docstring)."""
    params, matrices, layer = _stage_parameters(shape, layout)
    shards = layout.dp * (layout.cp if recipe.shard_with_cp else 1)
    states = recipe.states
    terms: dict[str, int] = {}
    for kind in ("weights", "gradients", "master_weights", "optimizer_states"):
        per_param = getattr(states, kind)
        terms[kind] = int(params * per_param / (shards if kind in states.sharded else 1))
    terms["optimizer_step_transient"] = int(params * states.step_transient / shards)
    terms["communication_buffers"] = recipe.fixed_bytes
    terms["autocast_weight_copies"] = 2 * matrices if recipe.autocast_copies else 0
    gathered = 0
    if recipe.gathered:
        gathered = 2 * (2 * layer) + (2 + 4) * layer  # two bf16 layers; one layer's bf16 and fp32 gradient
        if recipe.unsharded_root:
            root = params - math.ceil(shape.num_layers / layout.pp) * layer
            gathered += (2 + 2) * root  # bf16 weights and bf16 gradient of the root, unsharded all step
    terms["gathered_parameters"] = gathered
    coeff = recipe.activations
    tokens = layout.mbs * layout.sl / layout.cp / layout.tp
    kv = shape.num_query_groups * shape.head_dim
    per_layer = tokens * (coeff.per_h * shape.hidden_size + coeff.per_f * shape.ffn_hidden_size + coeff.per_kv * kv
                          + coeff.per_as * shape.num_attention_heads * layout.sl / layout.cp)
    in_flight = min(layout.pp, layout.ga)
    terms["activations"] = int(per_layer * math.ceil(shape.num_layers / layout.pp) * in_flight)
    terms["output_head"] = int(tokens * coeff.head_per_vocab * shape.vocab_size)
    _, phase = _peak(terms)
    return Estimate(framework=recipe.framework, sharding=recipe.sharding, param_dtype=recipe.param_dtype,
                    reduce_dtype=recipe.reduce_dtype, model_label=shape.display_name,
                    parameters=shape.parameter_count(), parameters_per_gpu=params, terms=terms, phase=phase,
                    device=device, notes=recipe.notes, processes=getattr(layout, "gpus_per_node", 1))


@dataclass(frozen=True)
class Verdict:
    """What the launch does with an estimate: refuse (one line naming both numbers) or go, with warnings."""

    refusal: str | None
    warnings: tuple[str, ...] = ()
    forced: bool = False  # launched past a refusal by --force (the result's ``memory_estimate.forced``)


def verdict(result: Estimate, force: bool = False) -> Verdict:
    """Refuse a job that cannot fit unless ``force``; warn, never silently, when it was not checked or is tight."""
    line = result.line()
    if result.fits is None:
        if result.device is not None and result.device.basis == "platform cpu":
            return _host_verdict(result, force)  # the record keeps the estimate and the reason
        return Verdict(None, (f"memory check not done: {line}",))
    if not result.fits:
        if force:
            return Verdict(None, (f"--force: {line}; launched anyway",), forced=True)
        return Verdict(line)
    if result.tight:
        return Verdict(None, (f"{line}: within {100 - TIGHT_FRACTION * 100:.0f}% of the GPU's memory",))
    return Verdict(None)


def _host_verdict(result: Estimate, force: bool) -> Verdict:
    """cpu: no GPU to fit, but the job's processes share the host's memory; refuse what cannot fit in it (a huge
    ``SL`` would otherwise start and be killed by the kernel's OOM killer, or swap for hours)."""
    host = host_memory_gib()
    need = result.peak_gib * result.processes
    if host is None or need <= host:
        return Verdict(None)
    line = (f"estimated {need:.1f} GiB for {result.processes} process(es) > {host:.1f} GiB of host memory "
            f"({result.what()})")
    return Verdict(None, (f"--force: {line}; launched anyway",), forced=True) if force else Verdict(line)


@dataclass(frozen=True)
class MemoryCheck:
    """One job's estimate and what the launcher does with it: the dry run's note, the result's record."""

    estimate: Estimate
    verdict: Verdict

    @property
    def record(self) -> MemoryEstimate:
        return self.estimate.record(forced=self.verdict.forced)

    def dry_run_note(self) -> str:
        """The dry run's line: the estimate, and what a real run would do with it."""
        if self.verdict.refusal:
            return f"memory: {self.verdict.refusal} (a real run refuses it; --force runs it anyway)"
        said = "; ".join(self.verdict.warnings) or self.estimate.line()
        return f"memory: {said}"


def memory_check(framework: str, shape: ModelShape, layout: Config, platform: str, recipe: Recipe | None = None,
                 force: bool = False) -> MemoryCheck:
    """The check before a job starts, in one call: ``recipe`` (the framework's plugin's; None: the framework's
    default, :func:`recipe_for`) training ``shape`` in ``layout`` on one GPU of ``platform`` (the host on cpu), and the
    verdict (refuse, or go with warnings; ``force``: run past a refusal, warned)."""
    result = estimate(shape, layout, recipe or recipe_for(framework, layout), device_memory(platform))
    return MemoryCheck(result, verdict(result, force=force))


# ---------------------------------------------------------------------------
# CLI: the estimate of a config without launching anything (docs/PERFORMANCE.md's tables come from it)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m utils.measure.memory",
        description="Estimated peak memory per GPU of a job of config.env (plus environment overrides: DP=8 "
                    "MODEL_LAYERS=8 ...), against a GPU's memory (on cpu, the host's). Exit 2 on bad input, 1 when "
                    "a job does not fit.")
    parser.add_argument("--framework", nargs="+", choices=framework_names(), default=list(framework_names()))
    parser.add_argument("--model", choices=model_names(), default="llama")
    parser.add_argument("--platform", choices=platform_names(), default="nvd",
                        help="sized for this platform's visible GPU, else its reference GPU")
    parser.add_argument("--device", default=None, help="a GPU name of the memory table, e.g. 'AMD Instinct MI300X'")
    parser.add_argument("--transformer-impl", choices=("transformer_engine", "local"), default="transformer_engine",
                        help="Megatron's implementation for mega/prim/nemo")
    parser.add_argument("--tran-sharding", choices=("fsdp2", "ddp"), default="fsdp2")
    parser.add_argument("--terms", action="store_true", help="print every term in GiB")
    args = parser.parse_args(argv)
    try:
        cfg = load_config()
        shape = workload_shape(cfg, args.model)
    except (ConfigError, ValueError) as exc:
        print(f"memory: error: {exc}", file=sys.stderr)
        return 2
    device = device_memory(args.platform, args.device)
    options = {"tran": {"sharding": args.tran_sharding}, "deep": {}}
    worst = 0
    for framework in args.framework:
        recipe = recipe_for(framework, cfg, **options.get(framework, {"transformer_impl": args.transformer_impl}))
        result = estimate(shape, cfg, recipe, device)
        refusal = verdict(result).refusal  # the launcher's own verdict: on cpu, the host's memory
        print(f"{shape.display_name}: {result.line()} [peak in the {result.phase}]")
        if refusal and refusal != result.line():
            print(f"  refused: {refusal}")
        if args.terms:
            print("  " + ", ".join(f"{k} {v / GIB:.2f}" for k, v in result.terms.items() if v))
        worst = max(worst, 1 if refusal else 0)
    return worst


if __name__ == "__main__":
    raise SystemExit(main())
