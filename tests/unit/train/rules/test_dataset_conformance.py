"""The vendor stacks' own dataset code feeds tran's tokens, labels and an all-ones loss mask.

What it judges: megatron-core's ``GPTDataset`` from the wheels of the two lines the images run
(0.12.0: NeMo 25.04's core, whose cached loss mask is handed out by reference; 0.15.0: MEGATRON_REF's,
whose dataset rewrites every pad id in ``tokens``/``labels`` to 0 and masks it), given the tokenizer
directory exactly as tprimat's launchers configure it (``--tokenizer-model`` of ``mega``/``prim``,
the NeMo recipe's ``data.tokenizer``), built as each framework builds its dataset tokenizer
(``train/settings/sample_probe.py``), over the real-format Llama 3.1, Qwen 2.5 and Mistral v0.3 tokenizers.
Hundreds of samples are read by one reader, as a persistent loader worker reads them, so a mask
changed in place in a cache shows. The reference is ``tran``'s ``MegatronSamples`` (every position
in the loss, no token rewritten: the fairness table, docs/SAMPLE_ORDER.md).

Under the images' own transformers (issue 40): the probe runs with the amd image's Hugging Face stack
(transformers 4.57.1) or the nvd image's (4.51.3) first on its path (``tests/helpers/megatron_core.py:
transformers_env``), never the virtualenv's transformers 5, which builds the slow tokenizer classes
from ``tokenizer.json`` alone and so hid that the sample tokenizers lacked the files Megatron's own
tokenizer needs. ``mega`` runs MEGATRON_REF on both images, so it is judged under both pins; NeMo runs
in the nvd image. Primus builds its dataset tokenizer with the legacy class of its own tree (not in
the wheels): the Primus conformance suite judges it (tests/conformance/).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.megatron_core import (
    WHEELS,
    ProbeRequest,
    ProbeResult,
    Samples,
    first_difference,
    transformers_env,
    transformers_pin,
    wheel_run,
)
from tests.helpers.preflight import fake_megatron
from tests.helpers.tokenizers import REAL_FORMAT_MODELS, real_format_tokenizer
from train.settings.samples import SampleSource
from utils.config.load import load_config
from utils.config.model import REPO_ROOT, Config
from utils.dataset.paths import dataset_prefix, eod_id, job_data, load_tokenizer, tokenizer_dir, vocab_size

SEQ_LEN = 64
SAMPLES = 400  # one reader: enough for a cache aliased by the first samples to empty the mask
SEED = 1234
# (wheel, how the stack builds the dataset's tokenizer, the launcher whose configuration is used, the image whose
# transformers the probe imports)
STACKS = {
    "mega@0.15.0/amd": ("0.15.0", "megatron-core", "mega", "amd"),
    "mega@0.15.0/nvd": ("0.15.0", "megatron-core", "mega", "nvd"),
    "nemo@0.12.0/nvd": ("0.12.0", "nemo-roles", "nemo", "nvd"),
}


def launch_tokenizer_dir(cfg: Config, model: str, launcher: str) -> Path:
    """The tokenizer directory the launcher hands the framework (and so its dataset), from its real plan."""
    from tests.helpers.megatron import make_context  # a real (not dry-run) plan writes what it names

    if launcher == "mega":
        from train.mega.plugin import plan

        argv = plan(make_context(cfg, "nvd", "mega", model)).argv
        return Path(argv[argv.index("--tokenizer-model") + 1])
    from train.nemo.plugin import overrides_for

    overrides = overrides_for(cfg, model, job_data(cfg, model), "conformance")
    return Path(overrides.fields["data"]["tokenizer"]["pretrained_model_name"])


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Config:
    """DATASET=sample with the real-format tokenizers in place, each model's documents encoded."""
    from data.encode import encode_documents
    from data.sample_corpus import SampleSpec, generate_documents

    root = tmp_path_factory.mktemp("dataset-conformance")
    cfg = load_config(REPO_ROOT / "config.env", environ={
        "DATASET": "sample", "DATA_DIR": str(root / "data"), "OUTPUT_DIR": str(root / "output"), "MODEL_SIZE": "tiny",
        "SL": str(SEQ_LEN), "SEED": str(SEED), "MBS": "1", "DP": "1", "GA": "1", "TP": "1", "PP": "1", "CP": "1",
        "GPUS_PER_NODE": "1", "NNODES": "1", "TRAIN_ITERS": str(SAMPLES), "WARMUP_STEPS": "1", "FP8": "false",
        "MEGATRON_PATH": str(fake_megatron(root))})  # the plan needs a pretrain_gpt.py; nothing runs it
    texts = [text for text in generate_documents(SampleSpec(seed=11, target_bytes=60_000)) if text.strip()]
    for model in REAL_FORMAT_MODELS:
        directory = real_format_tokenizer(model, tokenizer_dir(cfg, model))
        encode_documents(texts, load_tokenizer(directory), dataset_prefix(cfg, model), workers=1, progress=False,
                         fast_path=False)
    return cfg


def tran_samples(cfg: Config, model: str, work: Path) -> Samples:
    """What tran and deep train on: Megatron's sample order, every position in the loss, ids as encoded."""
    from train.rules.samples import MegatronSamples

    tokenizer = load_tokenizer(tokenizer_dir(cfg, model))
    samples = MegatronSamples(prefix=dataset_prefix(cfg, model), seq_len=SEQ_LEN, seed=SEED, num_samples=SAMPLES,
                              cache_dir=work / "tran_cache", vocab_size=vocab_size(tokenizer), eod=eod_id(tokenizer))
    windows = np.stack([samples.sample(index) for index in range(SAMPLES)])
    return Samples(windows[:, :-1], windows[:, 1:], np.ones((SAMPLES, SEQ_LEN), dtype=np.float32))


@pytest.fixture(scope="module")
def with_validation(prepared: Config) -> Config:
    """``prepared`` with a held-out validation prefix per model (other documents), evaluation on: GBS 8, two global
    batches every 16 steps, TRAIN_ITERS 50."""
    from dataclasses import replace

    from data.encode import encode_documents
    from data.sample_corpus import SampleSpec, generate_documents
    from utils.dataset.paths import valid_prefix

    texts = [text for text in generate_documents(SampleSpec(seed=12, target_bytes=20_000)) if text.strip()]
    for model in REAL_FORMAT_MODELS:
        encode_documents(texts, load_tokenizer(tokenizer_dir(prepared, model)), valid_prefix(prepared, model),
                         workers=1, progress=False, fast_path=False)
    return replace(prepared, train_iters=50, mbs=8, eval_interval=16 * 8, eval_samples=16)


@dataclass(frozen=True)
class Build:
    """One sample build the preflight asks of megatron-core 0.15.0 under an image's transformers (``samples_digest``
    with its ``built``/``built_error``), run in that image's mega stack run: the job's config, where the ``.npz``
    went, or the framework's exception."""

    cfg: Config
    out: Path
    error: str | None


def preflight_builds(prepared: Config, image: str, root: pytest.TempPathFactory) -> dict[tuple[str, str], Config]:
    """The preflight sample builds that ride on ``image``'s mega@0.15.0 stack run (one interpreter for all of them,
    not one each), by (what, model): the tokenizer-cannot-be-built cases' job with the files the releases carry
    ("full") and its copy with ``tokenizer.json`` alone ("bare"); on amd, the digest test's job ("digest")."""
    full = replace(prepared, train_iters=2, mbs=8)
    builds = {}
    for model in ("qwen", "mistral"):
        builds["full", model] = full
        builds["bare", model] = _without_slow_files(full, model, root.mktemp(f"bare-{model}-{image}"))
    if image == "amd":
        builds["digest", "qwen"] = replace(prepared, train_iters=SAMPLES // 8, mbs=8)  # GBS 8: 16 samples
    return builds


@pytest.fixture(scope="module")
def stack_runs(prepared: Config, with_validation: Config, tmp_path_factory: pytest.TempPathFactory
               ) -> tuple[dict[tuple[str, ...], ProbeResult], dict[tuple[str, str, str], Build]]:
    """Every stack's samples of every model, and its validation samples (issue 34): one probe process per stack;
    the mega stacks' processes also build the preflight's samples of :func:`preflight_builds`, keyed
    (what, model, image)."""
    from train.settings.sample_probe import sample_request
    from utils.dataset.digest_cache import job_window
    from utils.dataset.framework_tokenizer import framework_tokenizer
    from utils.dataset.paths import valid_prefix

    dataset_samples, digest_count = job_window(with_validation, job_data(with_validation, "llama")).valid

    found: dict[tuple[str, ...], ProbeResult] = {}
    built: dict[tuple[str, str, str], Build] = {}
    for stack, (version, tokenizer_kind, launcher, image) in STACKS.items():
        requests = [ProbeRequest(tokenizer_kind, launch_tokenizer_dir(prepared, model, launcher),
                                 dataset_prefix(prepared, model), SEQ_LEN, SEED, SAMPLES)
                    for model in REAL_FORMAT_MODELS]
        requests += [ProbeRequest(tokenizer_kind, launch_tokenizer_dir(prepared, model, launcher),
                                  valid_prefix(prepared, model), SEQ_LEN, SEED, digest_count,
                                  split="valid", dataset_samples=dataset_samples)
                     for model in REAL_FORMAT_MODELS]
        configs = preflight_builds(prepared, image, tmp_path_factory) if launcher == "mega" else {}
        # what samples_digest asks of the framework's Python: the tokenizer it is given, as the preflight gives it
        groups = [[sample_request(job_data(cfg, model), job_window(cfg, job_data(cfg, model)), "mega",
                                  framework_tokenizer(tokenizer_dir(cfg, model), cfg.output_dir)[0],
                                  tmp_path_factory.mktemp(f"{what}-{model}-{image}"))]
                  for (what, model), cfg in configs.items()]
        results, answers = wheel_run(version, requests, tmp_path_factory.mktemp(f"wheel-{version}-{image}"), image,
                                     groups)
        keys = [(stack, model) for model in REAL_FORMAT_MODELS] + [(stack, model, "valid")
                                                                    for model in REAL_FORMAT_MODELS]
        found.update(dict(zip(keys, results, strict=True)))
        for ((what, model), cfg), group, answer in zip(configs.items(), groups, answers, strict=True):
            built[what, model, image] = Build(cfg, Path(group[0]["out"]), answer.get("samples_error"))
    return found, built


@pytest.fixture(scope="module")
def stack_samples(stack_runs: tuple[dict[tuple[str, ...], ProbeResult], dict]) -> dict[tuple[str, ...], ProbeResult]:
    """Every stack's samples of every model, and its validation samples."""
    return stack_runs[0]


@pytest.fixture(scope="module")
def built(stack_runs: tuple[dict, dict[tuple[str, str, str], Build]]) -> dict[tuple[str, str, str], Build]:
    """The preflight's sample builds of the mega stack runs (:func:`preflight_builds`)."""
    return stack_runs[1]


def digest_of(build: Build, model: str) -> tuple[str | None, str]:
    """``samples_digest`` of the build's job as the preflight judges samples its settings probe built."""
    import sys

    from tests.helpers.megatron_core import side_env
    from train.settings.samples import samples_digest

    assert build.error is None and build.out.is_file(), build
    return samples_digest(build.cfg, job_data(build.cfg, model), "mega",
                          SampleSource(sys.executable, side_env("0.15.0"), built=build.out))


@pytest.mark.parametrize("model", REAL_FORMAT_MODELS)
@pytest.mark.parametrize("stack", STACKS)
def test_stack_feeds_trans_samples_with_every_position_in_the_loss(
        prepared: Config, stack_samples: dict[tuple[str, str], ProbeResult], tmp_path: Path, stack: str,
        model: str) -> None:
    version, _, launcher, image = STACKS[stack]
    theirs = stack_samples[stack, model]
    assert theirs.core_version == version and "/.side/" in theirs.core_file, theirs.core_file  # the wheel's code
    assert theirs.transformers_version == transformers_pin(image)  # the image's transformers, not the .venv's
    ours = tran_samples(prepared, model, tmp_path)
    eod = eod_id(load_tokenizer(tokenizer_dir(prepared, model)))
    assert (ours.labels == eod).sum() > SAMPLES // 10, "too few ends of documents for the check to mean anything"
    difference = first_difference(theirs.samples, ours)
    assert difference is None, (f"{stack} ({WHEELS[version]}), {model}: {difference}; the dataset took pad id "
                                f"{theirs.pad} (EOD {eod}) from {launch_tokenizer_dir(prepared, model, launcher)}")


def test_preflight_digest_equals_tran_and_a_difference_stops_the_job(
        built: dict[tuple[str, str, str], Build], monkeypatch) -> None:
    """The preflight's samples_digest on megatron-core 0.15.0's own dataset (built in the amd stack run); with
    Qwen's pad left in, it stops (the sample probe's own process: the path a difference takes end to end)."""
    import sys

    from tests.helpers.megatron_core import side_env
    from train.settings import samples

    cfg = built["digest", "qwen", "amd"].cfg  # GBS 8: the digest covers the first 16 samples
    site = side_env("0.15.0")
    monkeypatch.setenv("PYTHONPATH", str(transformers_env("amd")))  # after the wheel: the amd image's transformers
    digest, how = digest_of(built["digest", "qwen", "amd"], "qwen")
    reference, _ = samples.samples_digest(cfg, job_data(cfg, "qwen"), "tran")
    assert digest is not None and digest == reference and "equal to tran's" in how
    from utils.dataset import digest_cache

    monkeypatch.setattr(digest_cache, "framework_tokenizer", lambda source, output_dir: (source, None))  # the bug
    with pytest.raises(samples.SamplesDiffer, match=r"sample \d+, position \d+: (tokens|labels) \d+ against \d+"):
        samples.samples_digest(cfg, job_data(cfg, "qwen"), "mega", SampleSource(sys.executable, site))


def test_the_dry_run_states_trans_digest_where_the_data_is_here(prepared: Config, tmp_path: Path) -> None:
    from dataclasses import replace

    from train.settings.samples import dry_run_note, samples_digest

    digest, _ = samples_digest(prepared, job_data(prepared, "llama"), "tran")
    assert dry_run_note(prepared, job_data(prepared, "llama")).startswith(f"samples_digest {digest}: ")
    nothing = replace(prepared, data_dir=tmp_path / "nothing")
    assert dry_run_note(nothing, job_data(nothing, "llama")) is None


def _without_slow_files(cfg: Config, model: str, root: Path) -> Config:
    """``cfg`` with DATA_DIR a copy of its data whose ``model`` tokenizer has only ``tokenizer.json`` (as before)."""
    import shutil
    from dataclasses import replace

    shutil.copytree(cfg.data_dir, root / "data")
    changed = replace(cfg, data_dir=root / "data", output_dir=root / "output")
    for name in ("vocab.json", "merges.txt", "tokenizer.model"):
        (tokenizer_dir(changed, model) / name).unlink(missing_ok=True)
    return changed


@pytest.mark.parametrize("image", ["amd", "nvd"])
@pytest.mark.parametrize("model", ["qwen", "mistral"])
def test_the_preflight_stops_when_megatrons_own_tokenizer_cannot_be_built(
        built: dict[tuple[str, str, str], Build], monkeypatch, model: str, image: str) -> None:
    """Issue 40, findings 1 and 2: with only tokenizer.json (the sample tokenizers before), Megatron's tokenizer at
    MEGATRON_REF cannot build Qwen2Tokenizer or LlamaTokenizer under the images' transformers, and that exception
    stops the job (it once became "no samples digest"); with the files the releases carry it builds.

    Both builds ran in the image's mega@0.15.0 stack run (:func:`preflight_builds`), through the function the
    settings probe runs for the preflight; the preflight's judgement of them runs here. The same stop through the
    sample probe's own process: the next test."""
    import sys

    from tests.helpers.megatron_core import side_env
    from train.settings import samples

    monkeypatch.setenv("PYTHONPATH", str(transformers_env(image)))
    digest, how = digest_of(built["full", model, image], model)
    assert digest is not None and "equal to tran's" in how  # the files the releases carry: it builds
    bare = built["bare", model, image]
    assert bare.error is not None, f"built with tokenizer.json alone: {bare}"
    with pytest.raises(samples.SamplesUnavailable, match=r"Unable to instantiate HuggingFace AutoTokenizer"):
        samples.samples_digest(bare.cfg, job_data(bare.cfg, model), "mega",
                               SampleSource(sys.executable, side_env("0.15.0"), error=bare.error))
    elsewhere = replace(bare.cfg, data_dir=bare.cfg.data_dir.parent / "nothing")
    digest, how = samples.samples_digest(elsewhere, job_data(elsewhere, model), "mega",
                                         SampleSource(sys.executable, side_env("0.15.0")))
    assert digest is None and how.startswith("no samples digest:")  # only missing data skips the digest


def test_a_tokenizer_that_cannot_be_built_stops_the_job_from_the_sample_probes_own_process(
        prepared: Config, tmp_path: Path, monkeypatch) -> None:
    """The stop above through ``python -m train.settings.sample_probe`` in the framework's Python, as
    ``samples_digest`` runs it where the settings probe built nothing: its exit status and its stderr's exception
    line (one model and image: the process path does not depend on them)."""
    import sys

    from tests.helpers.megatron_core import side_env
    from train.settings import samples

    monkeypatch.setenv("PYTHONPATH", str(transformers_env("amd")))
    bare = _without_slow_files(replace(prepared, train_iters=2, mbs=8), "qwen", tmp_path)
    with pytest.raises(samples.SamplesUnavailable, match=r"Unable to instantiate HuggingFace AutoTokenizer"):
        samples.samples_digest(bare, job_data(bare, "qwen"), "mega", SampleSource(sys.executable, side_env("0.15.0")))


def test_a_tree_without_compiled_helpers_gets_them_from_megatrons_compile_helpers(
        prepared: Config, tmp_path: Path, monkeypatch) -> None:
    """Issue 40: a fresh Megatron-LM tree has no compiled dataset helpers until pretrain_gpt.py compiles them, after
    the preflight; the sample probe compiles them with Megatron's own compile_helpers (here: the 0.15.0 wheel's code
    without its compiled module, pybind11 from the amd side environment)."""
    import os
    import shutil
    import sys
    from dataclasses import replace

    from tests.helpers.megatron_core import side_env
    from train.settings import samples

    source = os.environ.get("TPRIMAT_MEGATRON_LM")
    if not source or not (Path(source) / "megatron" / "core" / "datasets" / "Makefile").is_file():
        pytest.skip("needs a Megatron-LM tree (TPRIMAT_MEGATRON_LM, the conformance runner's): the megatron-core "
                    "wheels carry no megatron/core/datasets/Makefile, which compile_helpers runs")
    tree = tmp_path / "megatron-core"
    shutil.copytree(side_env("0.15.0"), tree)
    datasets = tree / "megatron" / "core" / "datasets"
    shutil.copy2(Path(source) / "megatron" / "core" / "datasets" / "Makefile", datasets / "Makefile")
    for compiled in datasets.glob("helpers_cpp*.so"):
        compiled.unlink()
    monkeypatch.setenv("PYTHONPATH", str(transformers_env("amd")))
    cfg = replace(prepared, train_iters=2, mbs=8)
    digest, how = samples.samples_digest(cfg, job_data(cfg, "llama"), "mega", SampleSource(sys.executable, tree))
    assert digest is not None and "equal to tran's" in how, how
    assert list(datasets.glob("helpers_cpp*.so")), "compile_helpers wrote no module into the tree"


@pytest.mark.parametrize("model", REAL_FORMAT_MODELS)
@pytest.mark.parametrize("stack", STACKS)
def test_validation_samples_are_trans_on_each_stacks_own_dataset_code(
        with_validation: Config, stack_samples: dict[tuple[str, ...], ProbeResult], tmp_path: Path, stack: str,
        model: str) -> None:
    """Issue 34: the validation split as each stack's own megatron-core builds --valid-data-path (NeMo: its data
    module's "validation" path) at Megatron's size, equal to tran's, so equal across stacks."""
    from train.rules.samples import reference_samples
    from utils.dataset.digest_cache import job_window

    data = job_data(with_validation, model)
    window, tokenizer = job_window(with_validation, data), load_tokenizer(data.tokenizer_dir)
    facts = vocab_size(tokenizer), eod_id(tokenizer)
    reference = reference_samples(data, window, facts, tmp_path / "tran")[window.train[1]:]
    ours = Samples(*(np.stack([getattr(s, name) for s in reference]) for name in ("tokens", "labels", "loss_mask")))
    assert len(reference) == 16
    difference = first_difference(stack_samples[stack, model, "valid"].samples, ours)
    assert difference is None, f"{stack}, {model}: validation samples: {difference}"


def test_the_preflight_digest_covers_the_validation_samples(with_validation: Config, monkeypatch) -> None:
    import sys
    from dataclasses import replace

    from tests.helpers.megatron_core import side_env
    from train.settings import samples

    monkeypatch.setenv("PYTHONPATH", str(transformers_env("amd")))
    llama = job_data(with_validation, "llama")
    source = SampleSource(sys.executable, side_env("0.15.0"))
    digest, how = samples.samples_digest(with_validation, llama, "mega", source)
    reference, _ = samples.samples_digest(with_validation, llama, "tran")
    assert digest == reference and "(16 of them validation samples)" in how, how
    off = replace(with_validation, eval_interval=0, eval_samples=0)
    training_only, _ = samples.samples_digest(off, job_data(off, "llama"), "tran")
    assert training_only != digest
