"""The time-to-quality interface (issue 34): config keys, the quality block and build_quality's arithmetic."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from utils.config.load import load_config
from utils.config.rules import ConfigError
from utils.dataset.paths import dataset_prefix, valid_prefix
from utils.measure.quality import FIXED_SET, PER_TOKEN_MEAN, build_quality, make_evaluation, stop_reason
from utils.schema.quality import Quality

BASE = {"MODEL_SIZE": "tiny", "MBS": "1", "DP": "1", "GA": "2", "GPUS_PER_NODE": "1", "TRAIN_ITERS": "10",
        "WARMUP_STEPS": "1"}


def cfg_with(**keys: str):
    return load_config(environ={**BASE, **keys})


def test_evaluation_is_off_by_default():
    cfg = cfg_with()
    assert not cfg.evaluates and cfg.eval_interval_steps == 0 and cfg.eval_iters == 0
    assert cfg.target_loss is None and cfg.stop_at_target is True


def test_steps_and_iterations_derive_from_gbs():
    cfg = cfg_with(EVAL_INTERVAL="8", EVAL_SAMPLES="4", TARGET_LOSS="3.3")
    assert (cfg.evaluates, cfg.eval_interval_steps, cfg.eval_iters, cfg.target_loss) == (True, 4, 2, 3.3)


@pytest.mark.parametrize("keys, words", [
    ({"EVAL_INTERVAL": "3", "EVAL_SAMPLES": "4"}, "EVAL_INTERVAL=3: must be a multiple of GBS=2"),
    ({"EVAL_INTERVAL": "4", "EVAL_SAMPLES": "0"}, "set both"),
    ({"EVAL_INTERVAL": "-2", "EVAL_SAMPLES": "4"}, "EVAL_INTERVAL=-2: must not be negative"),
    ({"TARGET_LOSS": "2.0"}, "needs evaluation on"),
    ({"EVAL_INTERVAL": "4", "EVAL_SAMPLES": "4", "TARGET_LOSS": "0"}, "TARGET_LOSS=0.0: must be greater than 0"),
    ({"EVAL_INTERVAL": "4", "EVAL_SAMPLES": "4", "TARGET_LOSS": "nan"}, "finite"),
    ({"STOP_AT_TARGET": "maybe"}, "expected true or false"),
])
def test_bad_evaluation_keys_are_one_line_errors(keys, words):
    with pytest.raises(ConfigError, match=words) as caught:
        cfg_with(**keys)
    assert "\n" not in str(caught.value)


def test_the_validation_prefix_is_beside_the_training_one():
    cfg = cfg_with(DATASET="sample")
    assert valid_prefix(cfg, "llama").parent == dataset_prefix(cfg, "llama").parent
    assert valid_prefix(cfg, "llama").name == "sample-llama-valid_text_document"


def _evals(cfg, losses):
    return [make_evaluation(cfg, step=2 * (i + 1), loss=loss, seconds=10.0 * (i + 1), eval_seconds=0.5,
                            unix_s=1000.0 + 10.0 * (i + 1)) for i, loss in enumerate(losses)]


def test_the_first_evaluation_at_or_below_the_target_counts():
    cfg = cfg_with(EVAL_INTERVAL="4", EVAL_SAMPLES="2", TARGET_LOSS="5.0")
    evals = _evals(cfg, [6.0, 5.0, 4.0])  # 5.0 is at the target: reached (MLPerf's <=)
    q = build_quality(cfg, evals, reduction=PER_TOKEN_MEAN, held_out=FIXED_SET, platform="nvd", gpus=8,
                      run_start_unix=1000.0, energy=lambda start, end: ((end - start) / 100.0, None))
    assert q.reached and not q.stopped_at_target
    assert (q.time_to_target_s, q.samples_to_target, q.tokens_to_target) == (20.0, 8, 8 * cfg.sl)
    assert q.energy_to_target_kwh == pytest.approx(0.2) and q.gpu_hours_to_target == pytest.approx(20 * 8 / 3600)


def test_a_stop_at_the_target_is_recorded_and_nulls_have_reasons():
    cfg = cfg_with(EVAL_INTERVAL="4", EVAL_SAMPLES="2", TARGET_LOSS="5.0")
    evals = _evals(cfg, [6.0, 4.5])
    stop = stop_reason(cfg, evals[-1])
    assert stop and "stopped at target" in stop and stop_reason(cfg, evals[0]) is None
    q = build_quality(cfg, evals, reduction=PER_TOKEN_MEAN, held_out=FIXED_SET, platform="cpu", gpus=1,
                      run_start_unix=1000.0, stop=stop, energy_reason="cpu: no energy counter")
    assert q.stopped_at_target and q.energy_to_target_kwh is None and q.gpu_hours_to_target is None
    assert set(q.null_reasons) == {"energy_to_target_kwh", "gpu_hours_to_target"}


def test_a_target_never_reached_and_a_nan_loss():
    cfg = cfg_with(EVAL_INTERVAL="4", EVAL_SAMPLES="2", TARGET_LOSS="1.0")
    evals = _evals(cfg, [6.0, math.nan])
    assert evals[1].loss is None and "nan" in evals[1].loss_reason
    assert "not finite" in stop_reason(cfg, evals[1])
    q = build_quality(cfg, evals, reduction=PER_TOKEN_MEAN, held_out=FIXED_SET, platform="cpu", gpus=1)
    assert not q.reached and q.time_to_target_s is None and q.null_reasons["time_to_target_s"]


def test_the_block_refuses_inconsistent_figures():
    cfg = cfg_with(EVAL_INTERVAL="4", EVAL_SAMPLES="2", TARGET_LOSS="5.0")
    good = build_quality(cfg, _evals(cfg, [6.0, 4.0]), reduction=PER_TOKEN_MEAN, held_out=FIXED_SET, platform="nvd",
                         gpus=1, run_start_unix=1000.0, energy_reason="none")
    data = good.model_dump()
    with pytest.raises(ValidationError, match="does not follow"):
        Quality.model_validate({**data, "evaluations": data["evaluations"][::-1]})
    with pytest.raises(ValidationError, match="time_to_target_s"):
        Quality.model_validate({**data, "time_to_target_s": 1.0})
    with pytest.raises(ValidationError, match="samples_to_target"):
        Quality.model_validate({**data, "samples_to_target": data["samples_to_target"] + 1})
    with pytest.raises(ValidationError, match="tokens_to_target"):
        Quality.model_validate({**data, "tokens_to_target": data["tokens_to_target"] + 1})
    names = ("time_to_target_s", "samples_to_target", "tokens_to_target", "energy_to_target_kwh",
             "gpu_hours_to_target")
    with pytest.raises(ValidationError, match="not reached, but"):
        Quality.model_validate({**data, "reached": False, **dict.fromkeys(names),
                                "null_reasons": dict.fromkeys(names, "x")})
    with pytest.raises(ValidationError, match="null without a reason"):
        Quality.model_validate({**data, "null_reasons": {}})
