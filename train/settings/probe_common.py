"""Shared by the probes (runs inside the framework's Python: standard library only, no tprimat imports).

A probe reads one JSON request on stdin and prints one JSON answer on its last stdout line; anything the framework
prints itself goes to stderr, so the answer line is never mixed with it.
"""

from __future__ import annotations

import argparse
import contextlib
import enum
import functools
import importlib.util
import io
import json
import os
import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ANSWER_PREFIX = "TPRIMAT_PROBE "


def read_request() -> dict[str, Any]:
    """The JSON request on stdin; exit 2 with one line when it is not a JSON object."""
    try:
        request = json.loads(sys.stdin.read())
    except ValueError as exc:
        request = exc
    if not isinstance(request, dict):
        why = f"is not JSON ({request})" if isinstance(request, ValueError) else "must be a JSON object"
        print(f"probe: the request on stdin {why}", file=sys.stderr)
        sys.exit(2)
    return request


def parse_command_line() -> None:
    """``--help`` (the probe's own docstring) and no other argument: the request comes on stdin."""
    main = sys.modules["__main__"]
    spec = getattr(main, "__spec__", None)
    parser = argparse.ArgumentParser(
        prog=f"python -m {spec.name}" if spec else None,
        description=(main.__doc__ or "").strip().split("\n\n")[0] or None,
        epilog="Reads one JSON request on stdin; prints one answer line starting with "
               f"{ANSWER_PREFIX.strip()!r} on stdout (train/settings/probe_common.py).")
    parser.parse_args()


def plain(value: Any) -> Any:
    """A JSON scalar for one resolved value: enums by name, dtypes and other objects as ``str``."""
    if isinstance(value, enum.Enum):
        return value.name
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, (str, int, float, bool)) or v is None for v in value):
        return list(value)
    return str(value)


def namespace_values(namespace: Any) -> dict[str, Any]:
    """Every attribute of an argparse/SimpleNamespace as JSON scalars (nested namespaces skipped)."""
    out = {}
    for key, value in vars(namespace).items():
        if key.startswith("_") or (hasattr(value, "__dict__") and not isinstance(value, enum.Enum)):
            continue
        out[key] = plain(value)
    return out


def set_environment(env: dict[str, str]) -> None:
    """The variables the launch plan sets, over the environment the launcher inherits (as at launch)."""
    os.environ.update(env)


def attention_check(language_module_cls: Any, backend: Any) -> str | None:
    """Run Megatron's own NVTE_* check for ``backend`` (what model build runs); its message on failure."""
    holder = type("ConfigHolder", (), {})()
    holder.config = type("Config", (), {"attention_backend": backend})()
    before = {k: os.environ.get(k) for k in ("NVTE_FLASH_ATTN", "NVTE_FUSED_ATTN", "NVTE_UNFUSED_ATTN")}
    try:
        language_module_cls._set_attention_backend(holder)
    except AssertionError as exc:
        return str(exc)
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return None


def have_transformer_engine() -> bool:
    return importlib.util.find_spec("transformer_engine") is not None


def stand_in_fused_rope() -> list[str]:
    """Let ``TransformerConfig`` accept ``apply_rope_fusion`` on a host without Transformer Engine or Apex (a CPU
    host); the stand-in is never called: no model is built. Returned: what was stood in."""
    try:
        # the framework's own code: importable only in its Python, where the probe runs
        from megatron.core.models.common.embeddings import rope_utils
    except ImportError:
        return []
    if rope_utils.fused_apply_rotary_pos_emb is not None:
        return []

    def absent(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("fused RoPE stand-in called: this host has no Transformer Engine or Apex")

    rope_utils.fused_apply_rotary_pos_emb = absent
    return ["fused RoPE kernel (no Transformer Engine/Apex on this host; only the config check sees it)"]


def stand_in_device_arch(major: int) -> list[str]:
    """Give Megatron's argument validation the target GPU's architecture on a host without a GPU. ``validate_args`` asks
    ``get_device_arch_version()`` when TP or CP > 1 (9: H100, and MI300X as ROCm reports it)."""
    # the framework's own code: importable only in its Python, where the probe runs
    from megatron.training import arguments

    if not hasattr(arguments, "get_device_arch_version"):
        return []
    import torch

    if torch.cuda.is_available():
        return []
    arguments.get_device_arch_version = lambda: major
    return [f"GPU architecture {major} for validate_args (no GPU on this host)"]


def megatron_lr_by_step(args: Any) -> dict[str, float]:
    """The LR Megatron's own scheduler gives optimizer steps 1, 2 and the last (``lr_step_*``). Built by
    ``get_optimizer_param_scheduler`` over a stand-in optimizer; step ``k`` uses the rate set after ``k - 1`` increments
    of the global batch size."""
    # the framework's own code: importable only in its Python, where the probe runs
    from megatron.training import global_vars
    from megatron.training.training import get_optimizer_param_scheduler

    holder = type("OptimizerStandIn", (), {})()
    holder.param_groups = [{}]
    global_vars.set_args(args)
    scheduler = get_optimizer_param_scheduler(holder)
    rates = {1: holder.param_groups[0]["lr"]}
    for step in range(2, int(args.train_iters) + 1):
        scheduler.step(increment=args.global_batch_size)
        rates[step] = holder.param_groups[0]["lr"]
    return lr_steps(rates, int(args.train_iters))


def scaled_init_std(config: Any) -> float | str:
    """The std of a built ``TransformerConfig``'s (or NeMo ``GPTConfig``'s) ``output_layer_init_method``. Read back from
    the ``functools.partial`` megatron-core (0.12 to 0.16) sets, not recomputed; any other callable is named instead."""
    method = getattr(config, "output_layer_init_method", None)
    if isinstance(method, functools.partial):
        std = method.keywords.get("std")
        if isinstance(std, (int, float)) and not isinstance(std, bool):
            return float(std)
        return f"partial({getattr(method.func, '__name__', method.func)}) without a numeric std"
    return f"{type(method).__name__} (not Megatron's scaled_init_method_normal)"


@dataclass(frozen=True)
class BuiltConfig:
    """The ``TransformerConfig`` a Megatron model provider builds (its values, or ``_error``) and what was stood in."""

    values: dict[str, Any]
    stand_ins: list[str]


def build_transformer_config(args: Any) -> BuiltConfig:
    """The one way both Megatron probes (mega, prim) build the ``TransformerConfig`` and read it back. The fused-RoPE
    stand-in goes in first, here, so no probe builds the config without it."""
    stand_ins = stand_in_fused_rope()
    try:
        # the framework's own code: importable only in its Python, where the probe runs
        from megatron.training.arguments import core_transformer_config_from_args

        config = core_transformer_config_from_args(args)
    except Exception as exc:  # e.g. a layout Megatron refuses (heads not divisible by TP)
        return BuiltConfig({"_error": f"{type(exc).__name__}: {exc}"}, stand_ins)
    values = {**namespace_values(config), "output_layer_init_method_std": scaled_init_std(config)}
    return BuiltConfig(values, stand_ins)


def megatron_record(args: Any, language_module_cls: Any, stand_ins: list[str]) -> dict[str, Any]:
    """What both Megatron probes (mega, prim) report of validated arguments: the attention check first (it stops
    model build), then the arguments, the LR by step and the ``TransformerConfig`` with every stand-in used."""
    problem = attention_check(language_module_cls, args.attention_backend)
    if problem:
        raise AssertionError(problem)
    config = build_transformer_config(args)
    return {"raw": namespace_values(args), "lr_by_step": megatron_lr_by_step(args),
            "transformer_config": config.values, "stand_ins": stand_ins + config.stand_ins}


def lr_steps(rates: dict[int, float], last: int) -> dict[str, float]:
    return {"lr_step_1": float(rates[1]), "lr_step_2": float(rates.get(2, rates[1])),
            "lr_step_last": float(rates[last])}


SETTING_PATTERNS = (
    re.compile(r"\b(NVTE_[A-Z_]+)\b"),
    re.compile(r"\bargs\.([a-z_][a-z0-9_]*)"),
    re.compile(r"--([a-z0-9][a-z0-9-]+)"),
)


def setting_in(message: str) -> str | None:
    """The setting a framework's message names: an ``NVTE_*`` variable, ``args.x``, else the first ``--flag``."""
    for pattern in SETTING_PATTERNS:
        match = pattern.search(message)
        if match:
            return match.group(1).replace("-", "_") if pattern.pattern.startswith("--") else match.group(1)
    return None


def _failing_line(exc: BaseException) -> str:
    """For a bare ``assert`` (no message): the framework's own failing line, e.g. ``assert args.x is not None``."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return type(exc).__name__
    last = frames[-1]
    return f"{last.line} ({Path(last.filename).name}:{last.lineno})"


class _Tee(io.TextIOBase):
    """Writes through to stderr and keeps the text, so an argparse error can be quoted."""

    def __init__(self, target: Any) -> None:
        self._target = target
        self._kept = io.StringIO()

    def write(self, text: str) -> int:
        self._target.write(text)
        self._kept.write(text)
        return len(text)

    def flush(self) -> None:
        self._target.flush()

    def lines(self) -> list[str]:
        return self._kept.getvalue().splitlines()


def answer(payload: dict[str, Any]) -> None:
    sys.stdout.write(ANSWER_PREFIX + json.dumps(payload, allow_nan=False) + "\n")
    sys.stdout.flush()


def run(probe: Any) -> int:
    """Call ``probe(request) -> dict``; print its answer, or the framework's rejection, on stdout. A rejection is any
    exception raised while the framework resolves the configuration: its message, not a traceback, is the answer. A
    missing module is no rejection but a broken environment (``unavailable``)."""
    parse_command_line()
    request = read_request()
    real_stdout, real_stderr = sys.stdout, sys.stderr
    tee = _Tee(real_stderr)
    try:
        with contextlib.redirect_stdout(tee), contextlib.redirect_stderr(tee):
            raw = probe(request)
            if request.get("samples"):
                raw = {**raw, **build_samples(request["samples"])}
    except SystemExit as exc:  # argparse printed "prog: error: unrecognized arguments: ..." and exited
        sys.stdout, sys.stderr = real_stdout, real_stderr
        said = [line for line in tee.lines() if "error:" in line]
        message = said[-1].split("error:", 1)[1].strip() if said else f"exit code {exc.code}"
        answer({"ok": False, "error": f"argument parser: {message}", "setting": setting_in(message)})
        return 0
    except ModuleNotFoundError as exc:  # a broken environment, not a configuration the framework refuses
        sys.stdout, sys.stderr = real_stdout, real_stderr
        traceback.print_exc(file=sys.stderr)
        answer({"ok": False, "unavailable": True, "missing_module": exc.name, "error": f"ModuleNotFoundError: {exc}"})
        return 0
    except BaseException as exc:  # every rejection is reported, whatever its type
        sys.stdout, sys.stderr = real_stdout, real_stderr
        traceback.print_exc(file=sys.stderr)
        message = str(exc) or _failing_line(exc)
        answer({"ok": False, "error": f"{type(exc).__name__}: {message}", "setting": setting_in(message)})
        return 0
    sys.stdout, sys.stderr = real_stdout, real_stderr
    answer({"ok": True, **raw})
    return 0


def build_samples(requests: list[dict[str, Any]]) -> dict[str, Any]:
    """The framework's own first samples (``train/settings/sample_probe.py``), in this Python after its settings:
    one fresh Python for both (issue 38). A failure is the answer's ``samples_error`` (the exception's own
    lines; the traceback on stderr), never a rejection of the settings."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        # after the settings: megatron-core's datasets only when samples are asked for
        from train.settings.sample_probe import samples

        for one in requests:
            if one.get("code_path") and one["code_path"] not in sys.path:
                sys.path.insert(0, one["code_path"])
            samples(one)
    except BaseException as exc:  # the framework's dataset or tokenizer code failed: said by the preflight
        traceback.print_exc()
        return {"samples_error": "".join(traceback.format_exception_only(type(exc), exc)).strip()}
    return {"samples_built": [one["out"] for one in requests]}


