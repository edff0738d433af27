"""The fed-sample digest: equal samples give one digest; any token, label or mask change another."""

from __future__ import annotations

import numpy as np

from utils.dataset.sample_digest import FedSample, digest_samples, first_difference, global_sample_count


def _samples(count: int = 4, length: int = 8) -> list[FedSample]:
    rng = np.random.default_rng(0)
    windows = rng.integers(0, 600, size=(count, length + 1))
    return [FedSample(w[:-1], w[1:], np.ones(length, dtype=np.float32)) for w in windows]


def test_the_digest_depends_on_values_not_on_array_types() -> None:
    samples = _samples()
    as_other_types = [FedSample(s.tokens.astype(np.int32), list(s.labels), s.loss_mask.astype(np.float64))
                      for s in samples]
    assert digest_samples(samples) == digest_samples(as_other_types)
    assert digest_samples(samples).startswith("sha256:") and len(digest_samples(samples)) == 7 + 64


def test_a_rewritten_eod_or_a_masked_position_changes_it_and_is_located() -> None:
    samples = _samples()
    reference = digest_samples(samples)
    for name, value in (("tokens", 0), ("labels", 0), ("loss_mask", 0.0)):
        changed = [FedSample(s.tokens.copy(), s.labels.copy(), s.loss_mask.copy()) for s in samples]
        getattr(changed[2], name)[5] = value
        assert digest_samples(changed) != reference, name
        assert first_difference(samples, changed).startswith(f"sample 2, position 5: {name} ")
    assert first_difference(samples, samples) is None
    assert digest_samples(samples[:3]) != reference and first_difference(samples, samples[:3]) == "4 samples against 3"


def test_two_global_batches() -> None:
    assert global_sample_count(64) == 128
