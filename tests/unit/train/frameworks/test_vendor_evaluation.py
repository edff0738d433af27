"""Held-out evaluation on the vendor stacks (issue 34): Megatron's arguments, Primus's refusal, NeMo's recipe fields,
the dry runs that show them, and a mega result's quality block read from the stand-in Megatron's log."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers.megatron import make_config, make_context, parse_flags
from tests.helpers.nemo import make_tokenizer
from tests.helpers.paths import FAKES
from train.launch.job_guard import Signals, run_logged
from train.launch.launcher import show_plan
from train.launch.target_watch import TargetWatch, watcher_for
from train.logs import build_result
from train.logs.quality import MEGATRON_BLOCKS, MEGATRON_REDUCTION, record_path
from train.mega import plugin as mega_plugin
from train.megatron import args as megatron_args
from train.nemo.plugin import overrides_for
from train.prim import plugin as prim_plugin
from utils.dataset.paths import dataset_prefix, job_data, tokenizer_dir, valid_prefix
from utils.spec.models import get_shape

# GBS 64 (the fixture workload: MBS 1 x DP 8 x GA 8): evaluate 128 samples (2 global batches) every 320 (5 steps)
EVAL = {"EVAL_INTERVAL": "320", "EVAL_SAMPLES": "128"}


def _mega_flags(cfg, model: str = "llama") -> dict[str, list[str]]:
    shape = get_shape(model, cfg.model_size)
    data = job_data(cfg, model)
    return parse_flags(mega_plugin.megatron_args(cfg, shape, "nvd", data.prefix, data.tokenizer_dir, valid=data.valid))


def test_megatron_arguments_with_evaluation_on_and_off(tmp_path: Path) -> None:
    off = _mega_flags(make_config(tmp_path))
    assert off["--eval-iters"] == ["0"] and "--exit-signal-handler" not in off
    assert off["--split"] == ["100,0,0"] and "--valid-data-path" not in off and "--train-data-path" not in off
    cfg = make_config(tmp_path, **EVAL, TARGET_LOSS="3.3")
    on = _mega_flags(cfg)
    assert on["--eval-iters"] == ["2"] and on["--eval-interval"] == ["5"] and on["--exit-signal-handler"] == []
    # one data source only (Megatron's validate_args): the training and the validation prefix, no --data-path
    assert on["--train-data-path"] == [str(dataset_prefix(cfg, "llama"))]
    assert on["--valid-data-path"] == [str(valid_prefix(cfg, "llama"))]
    assert not {"--data-path", "--split", "--test-data-path", "--full-validation"} & set(on)


def test_the_mega_plan_names_the_worker_the_target_watch_signals(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, **EVAL, TARGET_LOSS="3.3")
    ctx = make_context(cfg, "nvd", "mega", "llama", dry_run=True)
    plan = mega_plugin.plan(ctx)
    assert plan.stop_script == "pretrain_gpt.py"
    watch = watcher_for(cfg, plan, ctx.log_path)
    assert watch is not None and watch.target_loss == pytest.approx(3.3) and watch.stop_at_target
    assert mega_plugin.plan(make_context(make_config(tmp_path), "nvd", "mega", "llama", dry_run=True)).stop_script \
        is None


def test_primus_gets_the_evaluation_keys_but_refuses_them_before_launch(tmp_path: Path) -> None:
    (tmp_path / "primus" / "examples").mkdir(parents=True)
    (tmp_path / "primus" / "examples" / "run_pretrain.sh").write_text("", encoding="utf-8")
    cfg = make_config(tmp_path, **EVAL, PRIMUS_PATH=str(tmp_path / "primus"))
    plan = prim_plugin.plan(make_context(cfg, "amd", "prim", "qwen", dry_run=True))
    _, text = plan.generated(".primus.yaml")
    overrides = yaml.safe_load(text)["modules"]["pre_trainer"]["overrides"]
    assert overrides["eval_iters"] == 2 and overrides["eval_interval"] == 5 and overrides["exit_signal_handler"]
    assert overrides["valid_data_path"] == str(valid_prefix(cfg, "qwen")) and overrides["test_data_path"] is None
    assert any("prim cannot evaluate at Primus v0.5.0" in note for note in plan.notes)
    with pytest.raises(FileNotFoundError, match=r"^prim cannot evaluate at Primus v0.5.0: .*\.view\(-1\)"):
        prim_plugin.plan(make_context(cfg, "amd", "prim", "qwen"))


def test_nemo_recipe_fields_validate_on_the_validation_prefix(tmp_path: Path) -> None:
    make_tokenizer(tokenizer_dir(make_config(tmp_path), "llama"), 300)
    plain = make_config(tmp_path)
    off = overrides_for(plain, "llama", job_data(plain, "llama"), "x", write=False).fields
    assert off["trainer.limit_val_batches"] == 0 and isinstance(off["data"]["paths"], list)
    cfg = make_config(tmp_path, **EVAL)
    fields = overrides_for(cfg, "llama", job_data(cfg, "llama"), "x", write=False).fields
    assert fields["trainer.limit_val_batches"] == 2 and fields["trainer.val_check_interval"] == 5
    assert fields["trainer.num_sanity_val_steps"] == 0 and fields["trainer.limit_test_batches"] == 0
    valid = str(valid_prefix(cfg, "llama"))
    assert fields["data"]["paths"] == {"train": [str(dataset_prefix(cfg, "llama"))], "validation": [valid],
                                       "test": [valid]}


@pytest.mark.parametrize("platform, framework, model, shown", [
    ("nvd", "mega", "llama", ["--eval-iters 2", "--eval-interval 5", "--exit-signal-handler", "--valid-data-path",
                              "evaluation: not MLPerf's measure: evaluation k reads the k-th block"]),
    ("amd", "prim", "qwen", ["eval_iters: 2", "eval_interval: 5", "valid_data_path:", "prim cannot evaluate",
                             "Primus v26.2 is the first release that evaluates correctly"]),
    ("nvd", "nemo", "llama", ['"trainer.limit_val_batches": 2', '"trainer.val_check_interval": 5', '"validation"']),
])
def test_every_vendor_dry_run_shows_the_evaluation_settings(tmp_path: Path, capsys, platform: str, framework: str,
                                                            model: str, shown: list[str]) -> None:
    from train.launch.context import load_plugin

    cfg = make_config(tmp_path, **EVAL, TARGET_LOSS="3.3")
    make_tokenizer(tokenizer_dir(cfg, model), 300)
    assert show_plan(make_context(cfg, platform, framework, model, dry_run=True), load_plugin(framework)) == 0
    out = capsys.readouterr().out
    missing = [text for text in shown if text not in out]
    assert not missing, f"{framework} dry run lacks {missing}"


def test_a_stopped_mega_run_gives_an_ok_result_with_its_quality_block(tmp_path: Path) -> None:
    """The stand-in Megatron under the launcher's watch: stopped at the target, the result says so (ok)."""
    cfg = make_config(tmp_path, TRAIN_ITERS="40", MBS="1", DP="1", GA="8", GPUS_PER_NODE="1", EVAL_INTERVAL="32",
                      EVAL_SAMPLES="8", TARGET_LOSS="5")
    ctx = make_context(cfg, "nvd", "mega", "llama")
    ctx.log_path.parent.mkdir(parents=True)
    argv = [sys.executable, str(FAKES / "megatron_lm" / "pretrain_gpt.py"),
            *megatron_args.render_cli({**megatron_args.evaluation_settings(cfg), "train_iters": 40,
                                       "global_batch_size": 8, "valid_data_path": ["/v"]})]
    watch = TargetWatch(record_path(ctx.log_path), "pretrain_gpt.py", cfg.target_loss, cfg.stop_at_target)
    env = {**os.environ, "TPRIMAT_FAKE_STEP_S": "0.01", "TPRIMAT_FAKE_EVAL_LOSSES": "7,6,5,4",
           "TPRIMAT_FAKE_SIGNAL_WAIT_S": "5", "TPRIMAT_FAKE_SIGNAL_AT": "3",  # 5 <= TARGET_LOSS: the third
           "TPRIMAT_FAKE_WATCH_RECORD": str(record_path(ctx.log_path))}  # the others wait only for the watcher
    with Signals() as signals:
        code = run_logged(argv, env, None, ctx.log_path, signals, watch=watch)
    assert code == 0 and watch.stopped
    result = build_result(cfg, log_path=ctx.log_path, platform="nvd", framework="mega", model="llama",
                          returncode=code, shape=get_shape("llama", "full"))
    quality = result.quality
    assert quality is not None and quality.reduction == MEGATRON_REDUCTION
    # issue 50: Megatron's continuing blocks are not MLPerf's fixed held-out set, and the result says so
    assert quality.fixed_set is False and quality.measure == MEGATRON_BLOCKS.words
    assert quality.measure.startswith("not MLPerf's measure")
    assert [(e.step, e.loss) for e in quality.evaluations] == [(4, 7.0), (8, 6.0), (12, 5.0)]
    assert quality.reached and quality.stopped_at_target and quality.samples_to_target == 12 * 8
    assert quality.tokens_to_target == 12 * 8 * cfg.sl and quality.run_start_unix is not None
    times = [e.seconds for e in quality.evaluations]
    assert times == sorted(times) and quality.time_to_target_s == pytest.approx(times[-1])
    assert result.status == "ok", result.error  # stopped at target: ok, not incomplete
    assert "energy_to_target_kwh" in quality.null_reasons


def _with_evaluations(source: Path, target: Path, every: int, *, arguments: dict[str, int] | None = None) -> Path:
    """``source`` with Megatron's evaluation lines (timer, then the line between dashes) after every ``every``-th
    iteration line, at MEGATRON_REF's format (megatron/training/training.py:2672-2700, megatron/core/timers.py:
    318-335), and ``arguments`` added to its arguments block."""
    from tests.fixtures.logs.generate_foreign import arguments_block

    lines: list[str] = []
    for line in source.read_text(encoding="utf-8").splitlines():
        lines.append(line)
        if line.startswith("-" * 24 + " arguments") and arguments:
            lines += arguments_block(arguments)[1:-1]
        if " iteration " in line and "elapsed time per iteration" in line:
            step = int(line.split(" iteration ")[1].split("/")[0])
            if step % every == 0:
                value = 8.0 - step / 50
                text = f" validation loss at iteration {step} | lm loss value: {value:.6E} | lm loss PPL: 1.0E+03 | "
                lines += ["(min, max) time across ranks (ms):", "    evaluate " + "." * 39 + ": (2000.00, 2500.00)",
                          "-" * (len(text) + 1), text, "-" * (len(text) + 1)]
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


def test_a_foreign_megatron_log_gets_its_evaluations_in_log_analysis_mode(tmp_path: Path) -> None:
    from tests.helpers.paths import FIXTURES
    from train.logs.analyse import AnalysisOptions, analyse_files

    log = _with_evaluations(FIXTURES / "logs" / "foreign" / "megatron_core012_gbs128_llama.log",
                            tmp_path / "evaluated.log", 20, arguments={"eval_iters": 4, "eval_interval": 20})
    result = analyse_files([log], AnalysisOptions(platform="nvd")).result
    quality = result.quality
    assert quality is not None and (quality.eval_samples, quality.eval_interval_steps) == (4 * 128, 20)
    assert [e.step for e in quality.evaluations] == [20, 40, 60, 80, 100]
    first = quality.evaluations[0]
    assert first.loss == pytest.approx(7.6) and first.eval_seconds == pytest.approx(2.5)
    assert first.samples == 20 * 128 and first.tokens == 20 * 128 * 4096
    # no wall clock in a log alone: the logged step times up to step 20 plus the evaluation's own 2.5 s
    assert first.seconds == pytest.approx(sum(result.step_times[:20]) + 2.5)
    assert not quality.reached and quality.target_loss is None
    assert any("logged step times plus the logged evaluation times" in w for w in result.warnings)


def test_a_foreign_log_without_the_evaluation_sizes_says_so(tmp_path: Path) -> None:
    from tests.helpers.paths import FIXTURES
    from train.logs.analyse import AnalysisOptions, analyse_files

    log = _with_evaluations(FIXTURES / "logs" / "foreign" / "megatron_core012_gbs128_llama.log",
                            tmp_path / "evaluated.log", 50)
    result = analyse_files([log], AnalysisOptions(platform="nvd")).result
    assert result.quality is None
    assert any("2 evaluation line(s) found, but the log states no eval iterations" in w for w in result.warnings)


@pytest.mark.slow
def test_the_launcher_stops_a_torchrun_megatron_job_at_its_target(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """launch -> preflight -> torchrun -> the stand-in Megatron (tests/fakes/megatron_lm) -> the target watch
    signals its worker (not torchrun) -> exit 0 -> collect: a result stopped at target, ok, with its quality block."""
    from dataclasses import replace

    from tests.helpers.preflight import FAKE_COMMIT, fake_megatron, point_at_fakes
    from tests.helpers.proc import free_port
    from train.launch.launcher import launch
    from utils.result.file import read_result

    point_at_fakes(monkeypatch, tmp_path / "preflight")
    tree = fake_megatron(tmp_path / "run")  # the stand-in is the tree the plan runs
    cfg = make_config(tmp_path, MEGATRON_PATH=str(tree), MEGATRON_REF=FAKE_COMMIT, GPUS_PER_NODE="1", DP="1",
                      GA="8", TRAIN_ITERS="40", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                      EVAL_INTERVAL="32", EVAL_SAMPLES="8", TARGET_LOSS="5")
    tokenizer_dir(cfg, "llama").mkdir(parents=True)
    (tokenizer_dir(cfg, "llama") / "tokenizer.json").write_text("{}", encoding="utf-8")
    for suffix in (".bin", ".idx"):  # stand-in data: the stand-in reads none (data checks: tests/unit/data/)
        Path(f"{dataset_prefix(cfg, 'llama')}{suffix}").write_bytes(b"")
    monkeypatch.setattr(megatron_args, "tokenizer_size", lambda *_: (128256, "test stand-in"))
    monkeypatch.setattr("train.launch.checks.dataset_problem", lambda cfg, model: None)
    ctx = replace(make_context(cfg, "nvd", "mega", "llama"), force=True)  # the 8B on one GPU: past the memory check
    # the stand-in waits up to 10 s for the SIGTERM after the third evaluation (5 <= TARGET_LOSS), and after the
    # others only until the watcher has recorded them (tests/fakes/megatron_lm/pretrain_gpt.py)
    for key, value in {"TPRIMAT_FAKE_STEP_S": "0.01", "TPRIMAT_FAKE_EVAL_LOSSES": "7,6,5,4",
                       "TPRIMAT_FAKE_SIGNAL_WAIT_S": "10", "TPRIMAT_FAKE_SIGNAL_AT": "3",
                       "TPRIMAT_FAKE_WATCH_RECORD": str(record_path(ctx.log_path))}.items():
        monkeypatch.setenv(key, value)
    assert launch(ctx, mega_plugin) == 0
    result = read_result(ctx.result_path)
    assert result.status == "ok", result.error
    quality = result.quality
    assert quality.stopped_at_target and [e.step for e in quality.evaluations] == [4, 8, 12]
    assert len(result.step_times) == 12 and quality.time_to_target_s > 0
    assert "[exiting program after receiving SIGTERM.]" in ctx.log_path.read_text(encoding="utf-8")


def test_a_foreign_nemo_log_names_its_evaluations_even_without_a_sequence_length(tmp_path: Path) -> None:
    """NeMo's console states no SL: the evaluations are found (val_loss after a validation block) and the result
    says why it has no quality block."""
    from tests.helpers.paths import FIXTURES
    from train.logs.analyse import AnalysisOptions, analyse_files
    from train.logs.scan import scan_file

    lines = (FIXTURES / "logs" / "foreign" / "nemo_console_llama.log").read_text(encoding="utf-8").splitlines()
    out = []
    for line in lines:
        if "Training epoch 0, iteration 10/" in line:
            out += ["Validation: iteration 1/2", "Validation: iteration 2/2"]
        out.append(line + (" | val_loss: 6.25" if "iteration 10/" in line or "iteration 11/" in line else ""))
    log = tmp_path / "nemo_evaluated.log"
    log.write_text("\n".join(out) + "\n", encoding="utf-8")
    scan = scan_file(log)
    assert [(e.iteration, e.loss) for e in scan.evaluations] == [(10, 6.25)] and scan.validation_steps == 2
    result = analyse_files([log], AnalysisOptions(model="llama")).result
    assert result.quality is None
    assert any("1 evaluation line(s) found, but the log states no SL" in w for w in result.warnings)
