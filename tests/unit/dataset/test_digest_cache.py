"""The samples digest kept across jobs (utils/dataset/digest_cache.py): the stored digest is the fresh one, word for
word; anything that decides the samples gives a new key; a bad entry is computed again (issue 38)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tests.helpers.tokenizers import real_format_tokenizer
from train.settings.samples import SampleSource
from utils.config.load import load_config
from utils.config.model import REPO_ROOT, Config
from utils.dataset.digest_cache import DigestStore, Entry, entry_key, job_window, store_folder
from utils.dataset.paths import JobData, dataset_prefix, eod_id, job_data, load_tokenizer, tokenizer_dir, vocab_size

SEQ_LEN = 32


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Config:
    """DATASET=sample with a real-format Llama tokenizer and a few kB of documents encoded."""
    from data.encode import encode_documents
    from data.sample_corpus import SampleSpec, generate_documents

    root = tmp_path_factory.mktemp("digest-cache")
    cfg = load_config(REPO_ROOT / "config.env", environ={
        "DATASET": "sample", "DATA_DIR": str(root / "data"), "OUTPUT_DIR": str(root / "output"), "MODEL_SIZE": "tiny",
        "SL": str(SEQ_LEN), "SEED": "1234", "MBS": "2", "DP": "1", "GA": "2", "TP": "1", "PP": "1", "CP": "1",
        "GPUS_PER_NODE": "1", "NNODES": "1", "TRAIN_ITERS": "20", "WARMUP_STEPS": "1", "FP8": "false"})
    texts = [text for text in generate_documents(SampleSpec(seed=3, target_bytes=20_000)) if text.strip()]
    directory = real_format_tokenizer("llama", tokenizer_dir(cfg, "llama"), vocab_size=400, corpus_bytes=40_000)
    encode_documents(texts, load_tokenizer(directory), dataset_prefix(cfg, "llama"), workers=1, progress=False,
                     fast_path=False)
    return cfg


@pytest.fixture
def samples_module(monkeypatch: pytest.MonkeyPatch):
    """train.settings.samples with tran's samples (train/rules/samples.py: reference_samples) counted."""
    from train.rules import samples as rules
    from train.settings import samples

    calls = []
    real = rules.reference_samples

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(rules, "reference_samples", counted)
    samples.calls = calls
    return samples


def trans_samples(cfg: Config, data: JobData, work: Path) -> list:
    """tran's samples of the job, as samples_digest builds them (not counted)."""
    from train.rules.samples import reference_samples

    tokenizer = load_tokenizer(data.tokenizer_dir)
    return reference_samples(data, job_window(cfg, data), (vocab_size(tokenizer), eod_id(tokenizer)), work)


def _entries(cfg: Config) -> list[Path]:
    return sorted((cfg.data_dir / ".tprimat" / "samples").glob("*.json"))


def _clear(cfg: Config) -> None:
    for path in _entries(cfg):
        path.unlink()


def test_the_stored_digest_is_the_fresh_one_word_for_word(prepared: Config, samples_module, monkeypatch) -> None:
    llama = job_data(prepared, "llama")
    _clear(prepared)
    first = samples_module.samples_digest(prepared, llama, "tran")
    assert first[0].startswith("sha256:") and len(samples_module.calls) == 1 and len(_entries(prepared)) == 1
    again = samples_module.samples_digest(prepared, llama, "deep")  # another job, same dataset and workload
    assert again == first and len(samples_module.calls) == 1  # not built again
    from utils.dataset import digest_cache

    monkeypatch.setattr(digest_cache, "store_folder", lambda data_dir, output_dir: None)  # no store: as before
    assert samples_module.samples_digest(prepared, llama, "tran") == first and len(samples_module.calls) == 2
    assert samples_module.dry_run_note(prepared, llama).startswith(f"samples_digest {first[0]}: ")


def test_what_decides_the_samples_gives_a_new_key(prepared: Config, samples_module, tmp_path: Path) -> None:
    llama = job_data(prepared, "llama")
    _clear(prepared)
    base = samples_module.samples_digest(prepared, llama, "tran")
    seeded = replace(prepared, seed=prepared.seed + 1)
    other_seed = samples_module.samples_digest(seeded, job_data(seeded, "llama"), "tran")
    assert other_seed[0] != base[0] and len(samples_module.calls) == 2
    longer = replace(prepared, train_iters=21)
    assert samples_module.samples_digest(longer, job_data(longer, "llama"), "tran")[1] == base[1]
    assert len(samples_module.calls) == 3  # the dataset's size decides the shuffle
    bin_path = Path(f"{dataset_prefix(prepared, 'llama')}.bin")
    bin_path.write_bytes(bin_path.read_bytes())  # rewritten in place with the same bytes: a new identity
    assert samples_module.samples_digest(prepared, llama, "tran") == base and len(samples_module.calls) == 4


def test_a_malformed_entry_is_computed_again(prepared: Config, samples_module) -> None:
    llama = job_data(prepared, "llama")
    _clear(prepared)
    fresh = samples_module.samples_digest(prepared, llama, "tran")
    (entry,) = _entries(prepared)
    for text in ("{not json", json.dumps({"key": entry.stem, "digest": "md5:x", "how": "?"}), "[]"):
        entry.write_text(text, encoding="utf-8")
        assert samples_module.samples_digest(prepared, llama, "tran") == fresh
    assert len(samples_module.calls) == 4 and json.loads(entry.read_text())["digest"] == fresh[0]


def test_the_store_is_atomic_and_falls_back_to_the_output_folder(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.write_text("a file where the data folder should be", encoding="utf-8")
    folder = store_folder(data, tmp_path / "out")
    assert folder == tmp_path / "out" / ".tprimat" / "samples"
    store = DigestStore(folder)
    key = entry_key({"a": 1})
    assert key != entry_key({"a": 2}) and store.get(key) is None
    store.put(key, Entry("sha256:" + "0" * 64, "how"), {"a": 1})
    assert store.get(key) == Entry("sha256:" + "0" * 64, "how")
    assert sorted(p.name for p in folder.iterdir()) == [f"{key}.json"]  # no temporary file left
    DigestStore(None).put(key, Entry("sha256:1", "x"), {})  # keeps nothing, raises nothing
    assert DigestStore(None).get(key) is None


def test_a_frameworks_own_digest_is_kept_per_python_and_a_difference_still_stops(
        prepared: Config, samples_module, monkeypatch) -> None:
    """mega's own samples (here tran's, from a stand-in for the probe) are stored; a new PYTHONPATH is a new key;
    samples that differ stop the job even where tran's digest came from the store (tran's rebuilt to name where)."""
    llama = job_data(prepared, "llama")
    _clear(prepared)
    probed = []

    def fake_probe(plan, source, work):
        probed.append(plan.given)
        return trans_samples(prepared, plan.data, work / "probe")

    monkeypatch.setattr(samples_module, "framework_samples", fake_probe)
    tran = samples_module.samples_digest(prepared, llama, "tran")
    digest, how = samples_module.samples_digest(prepared, llama, "mega", SampleSource(sys.executable))
    assert digest == tran[0] and how.endswith("equal to tran's") and len(probed) == 1
    assert samples_module.samples_digest(prepared, llama, "mega", SampleSource(sys.executable)) == (digest, how)
    assert len(probed) == 1  # the framework's Python was not started again
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/nowhere", os.environ.get("PYTHONPATH", "")]))
    assert samples_module.samples_digest(prepared, llama, "mega", SampleSource(sys.executable)) == (digest, how)
    assert len(probed) == 2

    def other_samples(plan, source, work):
        found = trans_samples(prepared, plan.data, work / "probe")
        found[1].tokens[3] = 0
        return found

    monkeypatch.setattr(samples_module, "framework_samples", other_samples)
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    with pytest.raises(samples_module.SamplesDiffer, match=r"sample 1, position 3: tokens \d+ against \d+"):
        samples_module.samples_digest(prepared, llama, "mega", SampleSource(sys.executable))


def test_the_settings_probe_builds_the_pending_samples_in_the_same_python(prepared: Config, samples_module,
                                                                           monkeypatch, tmp_path: Path) -> None:
    """mega's settings probe gets the sample request where the store lacks the digest (one fresh Python, issue 38);
    the preflight reads its .npz as it read the sample probe's, and the framework's failure is said in the same
    words; a stored digest sends no request."""
    llama = job_data(prepared, "llama")
    import numpy as np

    _clear(prepared)
    pending = samples_module.pending_samples(prepared, llama, "mega", sys.executable, None)
    assert pending is not None and pending.request["tokenizer"] == "megatron-core" and pending.work.is_dir()
    ours = trans_samples(prepared, llama, tmp_path / "tran")
    np.savez(pending.out, tokens=np.stack([s.tokens for s in ours]), labels=np.stack([s.labels for s in ours]),
             loss_mask=np.stack([s.loss_mask for s in ours]))
    from train.settings import sample_probe

    monkeypatch.setattr(sample_probe.subprocess, "run", lambda *a, **k: pytest.fail("no second Python"))
    built = SampleSource(sys.executable, built=pending.out)
    digest, how = samples_module.samples_digest(prepared, llama, "mega", built)
    assert how == f"{len(ours)} samples of mega's own GPTDataset, equal to tran's"
    assert digest == samples_module.samples_digest(prepared, llama, "tran")[0]
    samples_module.done_with(pending)
    assert not pending.work.exists()
    assert samples_module.pending_samples(prepared, llama, "mega", sys.executable, None) is None  # stored now
    assert samples_module.pending_samples(prepared, llama, "tran", sys.executable, None) is None
    monkeypatch.setenv("PYTHONPATH", "/another")
    failed = "Traceback (most recent call last):\n  ...\nValueError: Unable to instantiate HuggingFace AutoTokenizer"
    with pytest.raises(samples_module.SamplesUnavailable, match=r"^mega's own dataset or tokenizer code failed in "
                       r".*: ValueError: Unable to instantiate HuggingFace AutoTokenizer \(train/settings/"):
        samples_module.samples_digest(prepared, llama, "mega", SampleSource(sys.executable, None, None, failed))


def test_the_probe_answers_its_settings_and_the_samples_outcome(monkeypatch, capsys) -> None:
    from train.settings import probe_common, sample_probe

    def fail(request):
        raise ValueError("Unable to instantiate HuggingFace AutoTokenizer")

    monkeypatch.setattr(sample_probe, "samples", fail)
    monkeypatch.setattr(probe_common, "parse_command_line", lambda: None)
    monkeypatch.setattr(probe_common, "read_request", lambda: {"samples": [{"out": "/x/samples.npz"}]})
    assert probe_common.run(lambda request: {"raw": {"a": 1}}) == 0
    answer = json.loads(capsys.readouterr().out.strip().splitlines()[-1][len(probe_common.ANSWER_PREFIX):])
    assert answer["ok"] is True and answer["raw"] == {"a": 1}
    assert answer["samples_error"] == "ValueError: Unable to instantiate HuggingFace AutoTokenizer"
    monkeypatch.setattr(sample_probe, "samples", lambda request: None)
    assert probe_common.run(lambda request: {"raw": {}}) == 0
    answer = json.loads(capsys.readouterr().out.strip().splitlines()[-1][len(probe_common.ANSWER_PREFIX):])
    assert answer["samples_built"] == ["/x/samples.npz"] and "samples_error" not in answer
