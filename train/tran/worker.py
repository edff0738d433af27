"""``tran``: the vendor-neutral reference trainer, the same file on cpu, nvd and amd.

A Hugging Face causal LM built from the shape table, a plain PyTorch loop with AdamW and FSDP2 mixed precision
(train/tran/shard.py) under ``torchrun``. Data-parallel only: TP/PP/CP > 1 and FP8 are refused, never faked.
``deep`` (train/deep/worker.py) reuses :func:`run_worker` and :func:`train`. SIGTERM sets a flag agreed through
the loss all-reduce, so all ranks stop after the same step.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import torch
import torch.distributed as dist

from train.profiles import apply_profile
from train.rules.schedule import lr_at
from train.tran.plugin import check_supported
from train.tran.step import Dist, Trainer
from utils.config.load import load_config
from utils.config.model import Config
from utils.config.rules import ConfigError
from utils.dataset.fingerprint import fingerprint
from utils.io.atomic import atomic_path
from utils.machine.cpu_precision import apply_cpu_precision
from utils.machine.hardware import collect_gpu_info, detect_platform
from utils.measure.monitor import StepMonitor
from utils.measure.power import MeasuredWindow
from utils.measure.quality import FIXED_SET, PER_TOKEN_MEAN, build_quality, make_evaluation, stop_reason
from utils.result.failures import trainer_error
from utils.result.file import Interrupted, new_result, result_guard
from utils.result.step_log import StepLog, record_steps, step_log_path
from utils.schema.measures import Profiling, Source
from utils.schema.model import Result
from utils.schema.run import ModelShapeBlock
from utils.spec.models import workload_shape
from utils.spec.registry import model_names, platform_names

if TYPE_CHECKING:
    from utils.measure.monitor import StepRecord


def setup_distributed(cfg: Config, platform: str) -> Dist:
    """Join the torchrun job (or run alone), check the world size, pick the device."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world != cfg.world_size:
        raise ConfigError(f"torchrun started {world} process(es) but TP*PP*CP*DP = {cfg.world_size}: "
                          "NNODES*GPUS_PER_NODE must equal the config's world size")
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    if platform == "cpu":
        device = torch.device("cpu")
    else:
        if not torch.cuda.is_available() or local_rank >= torch.cuda.device_count():
            raise RuntimeError(f"platform {platform}: local rank {local_rank} needs a GPU but torch sees "
                               f"{torch.cuda.device_count() if torch.cuda.is_available() else 0}")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ and not dist.is_initialized():  # under torchrun
        dist.init_process_group("gloo" if device.type == "cpu" else "nccl")
    return Dist(rank, local_rank, world, device)


class StopRequest:
    """SIGINT/SIGTERM only set a flag; the loop stops after the current step on every rank (see module doc)."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def install(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.signum is None:  # os.write: print() is not safe to re-enter from a signal handler
            os.write(2, f"tprimat worker: {signal.Signals(signum).name} received; stopping after this step\n".encode())
        self.signum = self.signum or signum


def profiler_for(cfg: Config, info: Dist, result_path: Path) -> tuple[Any, Profiling | None]:
    """``torch.profiler`` over 0-based steps [PROFILE_STEP_START, PROFILE_STEP_END) (Megatron's convention),
    after one warm-up step when there is one, each rank's trace in ``<OUTPUT_DIR>/profiles/``."""
    if not cfg.profiling:
        return contextlib.nullcontext(), None
    start, end = cfg.profile_step_start, min(cfg.profile_step_end, cfg.train_iters)
    if start >= cfg.train_iters:
        return contextlib.nullcontext(), Profiling(reason=(
            f"PROFILE_STEP_START={start} is not below TRAIN_ITERS={cfg.train_iters}: nothing profiled"))
    active, warmup = max(1, end - start), min(1, start)
    directory = cfg.output_dir / "profiles"
    directory.mkdir(parents=True, exist_ok=True)
    trace = directory / f"{result_path.stem}_rank{info.rank}.json"

    def write_trace(prof: Any) -> None:
        with atomic_path(trace, suffix=".json") as tmp:
            prof.export_chrome_trace(str(tmp))

    activities = [torch.profiler.ProfilerActivity.CPU]
    if info.device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    profiler = torch.profiler.profile(
        activities=activities, on_trace_ready=write_trace,
        schedule=torch.profiler.schedule(wait=start - warmup, warmup=warmup, active=active, repeat=1))
    details = Profiling(steps=[start + 1, start + active], step_numbering="1-based, inclusive",
                        trace=str(directory / f"{result_path.stem}_rank<r>.json"), rank0_trace=str(trace))
    return profiler, details


def reduce_loss(local_loss: torch.Tensor, stop: bool, info: Dist) -> tuple[torch.Tensor, torch.Tensor | bool]:
    """(mean loss over DP ranks, whether any rank asked to stop), both left on the device (no host sync): one
    all-reduce."""
    if info.world_size == 1:
        return local_loss.detach(), stop
    packed = torch.stack([local_loss.detach().float(), torch.tensor(float(stop), device=info.device)])
    dist.all_reduce(packed)
    return packed[0] / info.world_size, packed[1]


STOP_CHECK_EVERY = 10  # a host read of the all-reduced stop flag waits for the queue: not every step


def stop_agreed(flag: torch.Tensor | bool, index: int) -> bool:
    """Whether the ranks agreed to stop after step ``index`` (0-based); every rank reads the same steps."""
    if isinstance(flag, bool):
        return flag
    return (index + 1) % STOP_CHECK_EVERY == 0 and bool(flag > 0)


def gather_objects(value: Any, info: Dist) -> list[Any]:
    if info.world_size == 1:
        return [value]
    out: list[Any] = [None] * info.world_size
    dist.all_gather_object(out, value)
    return out


class Ledger:
    """The measured loop's bookkeeping: the step monitor, the energy window, the per-step record, the result
    (``fill`` is what ``result_guard`` calls however the run ends)."""

    def __init__(self, cfg: Config, args: argparse.Namespace, info: Dist, framework: str) -> None:
        self.cfg, self.args, self.info = cfg, args, info
        set_by_launcher = [k for k in os.environ.get("TPRIMAT_LAUNCHER_ENV", "").split(",") if k in os.environ]
        self.result = new_result(
            cfg, platform=args.platform, framework=framework, model=args.model,
            shape=workload_shape(cfg, args.model), gpu_info=collect_gpu_info(args.platform),
            run_index=args.run_index,
            source=Source(kind="callback", log_path=str(args.log_path) if args.log_path else None),
            launcher_env={k: os.environ[k] for k in set_by_launcher})
        self.result.training_config.world_size_started = info.world_size
        self.monitor = StepMonitor(info.device if info.device.type == "cuda" else None)
        self.power = MeasuredWindow.open(args.platform, info.local_rank, gpus_total=info.world_size,
                                         tokens_per_step=cfg.tokens_per_step, warmup_steps=cfg.skip_steps)
        self.shape = workload_shape(cfg, args.model)
        self.step_log: StepLog | None = None
        # held-out evaluation (issue 34): the first step's start (host clocks) and the evaluations so far
        self.run_start: tuple[float, float] | None = None  # (perf_counter, Unix time)
        self.evaluations: list[Any] = []
        self.stop_reason: str | None = None

    def fill(self, res: Result) -> None:
        monitor = self.monitor
        monitor.finish()  # the steps still in the device queue (idempotent; keeps what was read on a failed device)
        peak_allocated, peak_reserved = monitor.peak_memory()
        on_gpu = self.info.device.type == "cuda"
        record_steps(res, monitor.arrays(), skip_steps=self.cfg.skip_steps, shape=self.shape,
                     world_size=self.info.world_size, peak_allocated_gb=peak_allocated, peak_reserved_gb=peak_reserved,
                     memory_reason=None if on_gpu else "platform cpu: device memory not tracked")
        res.power_metrics = self.power.metrics(len(monitor.records)).model_copy(update=dict(
            zip(("window_start_unix", "window_end_unix"), monitor.window_unix, strict=True)))  # the launcher's window
        if self.cfg.evaluates:
            res.quality = build_quality(
                self.cfg, self.evaluations, reduction=PER_TOKEN_MEAN, held_out=FIXED_SET, platform=self.args.platform,
                gpus=self.info.world_size, run_start_unix=self.run_start[1] if self.run_start else None,
                stop=self.stop_reason, energy_reason="measured by the launcher from its energy counter trace "
                                                     "(train/launch/energy.py); this trainer reads no counter")

    def start_run(self) -> None:
        """The first training step starts: the origin of the evaluations' times (MLPerf's run_start)."""
        self.run_start = (time.perf_counter(), time.time())

    def evaluate(self, evaluator: Any, step: int, stop: StopRequest) -> str | None:
        """Evaluate after ``step`` (1-based) steps; returns why the run stops here (None: it goes on)."""
        if self.run_start is None:
            raise RuntimeError("evaluate() before start_run()")
        began = time.perf_counter()
        loss = evaluator.run(lambda: stop.signum is not None)
        ended = time.perf_counter()
        if loss is None:  # a signal during the evaluation: abandoned on every rank, nothing recorded
            return "stopped during the evaluation"
        since = ended - self.run_start[0]
        evaluation = make_evaluation(self.cfg, step=step, loss=loss, seconds=since, eval_seconds=ended - began,
                                     unix_s=self.run_start[1] + since)
        self.evaluations.append(evaluation)
        if self.info.rank == 0:
            print(f"evaluation at step {step}/{self.cfg.train_iters} | eval loss {loss:.6f} | "
                  f"{evaluation.eval_seconds:.3f} s | {since:.3f} s since the first step", flush=True)
        self.stop_reason = stop_reason(self.cfg, evaluation)
        return self.stop_reason

    def close(self) -> None:
        if self.step_log is not None:
            self.step_log.close()

    def describe(self, trainer: Any) -> None:
        """What ran, as the trainer built it: shape, effective settings, precision, compilation, fingerprint."""
        result, cfg = self.result, self.cfg
        self.shape = trainer.shape
        if hasattr(trainer, "effective_settings"):
            result.effective_settings = trainer.effective_settings()
        result.model_shape = ModelShapeBlock(**trainer.shape.as_dict())
        result.training_config.precision_detail = trainer.precision_detail
        if hasattr(trainer, "compiled"):  # tran: TRAN_COMPILE as it ran, compiled before the measured steps
            result.training_config.compiled = trainer.compiled
            result.training_config.compile_time_seconds = trainer.compile_time_seconds
        if self.info.rank == 0:
            result.fingerprint = fingerprint(cfg, trainer.shape, trainer.prefix, trainer.tokenizer_dir)
            # Every step also goes to the step record at once, so SIGKILL loses none (utils/result/step_log.py).
            self.step_log = StepLog(step_log_path(self.args.result), result, skip_steps=cfg.skip_steps,
                                    world_size=self.info.world_size)

    def profiler(self) -> Any:
        """``torch.profiler`` over PROFILE_STEP_START..END (or a null context), said in the result."""
        profiler, profiling = profiler_for(self.cfg, self.info, self.args.result)
        if profiling is not None:
            self.result.profiling = profiling
            if profiling.steps:
                first, last = profiling.steps
                self.result.warnings.append(f"steps {first}-{last} ran under torch.profiler; their step times "
                                            "include the profiler's overhead")
        return profiler

    def start_window(self) -> None:
        """The measured window opens: warm-up is over."""
        self.monitor.start_window()
        self.power.start()

    def report(self, records: Iterable[StepRecord]) -> None:
        """Steps whose time and loss were read (at once on cpu, a few steps late on a GPU)."""
        cfg = self.cfg
        for record in records:
            if self.step_log is not None:
                self.step_log.append(record.step, record.time_s, record.loss, record.lr, record.memory_allocated_gb)
            if self.info.rank == 0:
                print(f"step {record.step}/{cfg.train_iters} | loss {record.loss:.4f} | lr {record.lr:.3e} | "
                      f"time {record.time_s * 1000:.1f} ms | tokens/s {cfg.tokens_per_step / record.time_s:.0f}",
                      flush=True)
            if record.loss is None or not math.isfinite(record.loss):
                raise FloatingPointError(f"non-finite loss at step {record.step}")

    def end_window(self) -> None:
        """The measured window closes: the wall-clock check and the energy over the window (every rank's)."""
        check = self.monitor.wall_check()
        inside = math.fsum(e.eval_seconds or 0.0 for e in self.evaluations if e.step > self.cfg.skip_steps)
        if check is not None and inside:  # evaluations run between measured steps, inside the window
            check = dataclasses.replace(check, window_s=check.window_s - inside)
            self.result.warnings.append(
                f"{len(self.evaluations)} evaluation(s) ran inside the measured window ({inside:.3f} s): step times "
                "exclude them, the window's energy (power_metrics) includes them")
        if check is not None and check.warning:
            self.result.warnings.append(check.warning)
        self.power.stop(len(self.monitor.records), lambda local: gather_objects(local, self.info))


def train(cfg: Config, args: argparse.Namespace, info: Dist, stop: StopRequest, framework: str = "tran",
          make_trainer: Callable[[Config, str, Dist], Any] = Trainer) -> None:
    """Build, train TRAIN_ITERS steps under the monitor, and (rank 0) write the result however it ends;
    ``make_trainer`` builds :class:`train.tran.step.Trainer` (``tran``) or the DeepSpeed engine's (``deep``)."""
    ledger = Ledger(cfg, args, info, framework)
    monitor = ledger.monitor
    path = args.result if info.rank == 0 else None
    with contextlib.ExitStack() as closing, result_guard(path, ledger.result, ledger.fill,
                                                         expected_steps=cfg.train_iters):
        closing.callback(ledger.close)
        stop.install()  # replaces result_guard's raise-anywhere handler: stop at a step boundary instead
        trainer = make_trainer(cfg, args.model, info)
        ledger.describe(trainer)
        evaluator = trainer.evaluator() if cfg.evaluates else None
        if evaluator is not None and getattr(trainer, "compiled", False):
            ledger.result.warnings.append("TRAN_COMPILE: the first evaluation recompiles the layers in eval mode; "
                                          "that compile time is in its eval_seconds (quality.evaluations)")
        with ledger.profiler() as prof:
            for index in range(cfg.train_iters):
                if index == cfg.skip_steps:
                    ledger.start_window()
                if index == 0:
                    ledger.start_run()
                monitor.start_step()
                local_loss = trainer.step(index)
                loss, flag = reduce_loss(local_loss, stop.signum is not None, info)
                monitor.end_step(loss=loss, lr=lr_at(index, cfg))  # the rate this step applied
                if prof is not None:
                    prof.step()
                ledger.report(monitor.drain())
                if evaluator is not None and (index + 1) % cfg.eval_interval_steps == 0 and (
                        ledger.evaluate(evaluator, index + 1, stop) or evaluator.agreed(stop.signum is not None)):
                    break  # the eval loss is all-reduced and the stop agreed: every rank stops here, no further step
                if stop_agreed(flag, index):
                    break
            ledger.report(monitor.finish())
        ledger.end_window()
        if ledger.stop_reason is not None and ledger.evaluations[-1].loss is None:
            raise FloatingPointError(ledger.stop_reason)  # a non-finite eval loss: failed, its quality block kept
        if stop.signum is not None and len(monitor.records) < cfg.train_iters:
            raise Interrupted(stop.signum)  # result_guard records incomplete with the steps done


def run_worker(argv: list[str] | None, framework: str, description: str,
               add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
               bind: Callable[[argparse.Namespace], Callable[[Config, str, Dist], Any]] | None = None) -> int:
    """The torchrun entry of ``tran`` and ``deep``: arguments, config, distributed set-up, :func:`train`
    (``bind(args)``, deep's, gives the trainer factory once the worker's own arguments are parsed)."""
    parser = argparse.ArgumentParser(prog=f"python -m train.{framework}.worker", description=description)
    parser.add_argument("--model", required=True, choices=model_names())
    parser.add_argument("--result", required=True, type=Path, help="result JSON written by global rank 0")
    parser.add_argument("--platform", choices=platform_names(), default=None,
                        help="platform (default: PLATFORM or detection)")
    parser.add_argument("--run-index", type=int, default=None, help="repeat number k, recorded in the result")
    parser.add_argument("--log-path", type=Path, default=None, help="the launcher's log, recorded in the result")
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)
    stop = StopRequest()
    stop.install()  # from the very start, so an early SIGTERM is not a silent kill
    try:
        cfg = load_config()
        check_supported(cfg)
        if args.platform is None:
            args.platform = cfg.platform or detect_platform()
        cfg, _ = apply_profile(cfg, args.platform, framework, args.model)  # no recipe: identical, or the error
        cfg, _ = apply_cpu_precision(cfg, args.platform)  # cpu: the launcher's choice (train/launch/context.py)
        info = setup_distributed(cfg, args.platform)
    except (ConfigError, ValueError, RuntimeError) as exc:
        print(trainer_error(framework, str(exc)), file=sys.stderr)  # the launcher's reason (utils/result/failures.py)
        return 2

    try:
        train(cfg, args, info, stop, framework, bind(args) if bind is not None else Trainer)
        return 0
    except Interrupted as exc:
        print(f"train_{framework}: rank {info.rank}: interrupted by {exc}; partial result written by rank 0",
              file=sys.stderr)
        return 128 + exc.signum
    except Exception as exc:
        print(f"train_{framework}: rank {info.rank}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def exit_worker(code: int) -> NoReturn:
    """End a torchrun worker with ``code`` once its work is done, without the interpreter's finalization. gloo has no
    shutdown: a gloo thread still releasing the last collective at finalization aborts the rank after all is done
    (docs/PERFORMANCE.md, "The teardown abort"). Everything the job leaves is written before this."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed or broken pipe must not change the exit code
            stream.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    return run_worker(argv, "tran", "tran reference training (run under torchrun; normally started by python -m "
                      "train.launch --framework tran). Config comes from config.env plus environment overrides.")


if __name__ == "__main__":
    exit_worker(main())
