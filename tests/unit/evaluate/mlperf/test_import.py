"""Each published run of the sample becomes one schema-valid result, labelled as MLPerf's, never as tprimat's."""

from __future__ import annotations

from evaluate.analysis.results import load_directory
from evaluate.mlperf.cli import main
from evaluate.mlperf.result import PUBLISHED_MEASURE
from tests.helpers.mlperf import SAMPLE, SAMPLE_SYSTEMS
from tests.helpers.paths import REPO
from tests.helpers.proc import main_in_process
from utils.result.file import read_result
from utils.spec.registry import PUBLISHED_FRAMEWORK


def test_every_run_is_a_valid_result_labelled_as_published(imported):
    loaded = load_directory(imported)  # the strict reader and the plausibility bounds compare uses
    assert not loaded.skipped and not loaded.duplicates and len(loaded.results) == 90
    seen = set()
    for item in loaded.results:
        result, published = item.result, item.result.published
        assert published is not None and result.framework == PUBLISHED_FRAMEWORK and result.source.kind == "mlperf"
        accelerator, gpus = SAMPLE_SYSTEMS[(published.submitter, published.system_id)]
        assert accelerator in published.accelerator and result.gpu_info.device_count == gpus
        assert result.platform == ("amd" if accelerator.startswith("MI") else "nvd")
        assert (published.round, published.benchmark, published.division) == ("5.1", "llama31_8b", "closed")
        assert published.availability and published.framework and published.origin.startswith("MLPerf Training v5.1")
        assert published.log.startswith(f"{published.submitter}/results/{published.system_id}/llama31_8b/result_")
        assert result.model == "llama" and result.profile == "mlperf" and result.status == "ok" and published.counted
        # a closed-division run evaluates as the reference does (training_rules.adoc line 443): MLPerf's fixed set
        assert result.quality is not None and result.quality.fixed_set is True
        assert result.quality.measure == PUBLISHED_MEASURE
        seen.add(published.log)
    assert len(seen) == 90


def test_no_path_of_this_machine_is_in_a_result(imported):
    for path in imported.glob("train_*.json"):
        text = path.read_text()
        assert str(imported) not in text and str(REPO) not in text and str(SAMPLE.parent) not in text


def test_time_to_train_is_samples_over_samples_per_second(imported):
    """The decomposition is exact, and its parts are MLPerf's: the time is run_stop - run_start; the samples the
    last evaluation's before run_stop (the RCP checker's), the first at the target."""
    for path in imported.glob("train_*.json"):
        result = read_result(path)
        perf, quality = result.performance_metrics, result.quality
        assert perf is not None and quality is not None and quality.reached and quality.target_loss == 3.3
        samples_per_second = perf.tokens_per_second / result.training_config.sequence_length
        assert abs(quality.samples_to_target / samples_per_second - perf.total_time_seconds) < 1e-6
        assert result.finished_at and result.started_at and perf.total_time_seconds >= quality.time_to_target_s > 0
        assert quality.evaluations[-1].loss <= 3.3 < quality.evaluations[-2].loss
        assert result.effective_settings and "opt_base_learning_rate" in result.effective_settings.settings


def test_the_console_names_each_system_and_its_score(tmp_path, capsys):
    done = main_in_process(main, capsys, "import", str(SAMPLE), "--output-dir", str(tmp_path))
    assert done.returncode == 0 and "90 result(s) written" in done.stdout and "(90 ok); 0 file(s)" in done.stdout
    assert "AMD/MI355X_EPYC_9575F_pytorch: 8 GPUs, 10 runs, 10 counted, MLPerf score 99.7085 min" in done.stdout
    assert "University-of-Florida/hpg.dgxb200x8.n32: 256 GPUs" in done.stdout
    again = main_in_process(main, capsys, "import", str(SAMPLE), "--output-dir", str(tmp_path))
    assert again.returncode == 0 and "90 result(s) written" in again.stdout  # a second import rewrites, no duplicate
    assert len(list(tmp_path.glob("train_*.json"))) == 90
