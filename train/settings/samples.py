"""The fed-sample digest of a job: its first two global batches, built by the framework's own dataset code.

Equal data and tokenizer fingerprints do not prove equal training data, so the preflight builds the first two
global batches with each framework's own ``GPTDataset`` and tokenizer in its Python
(:mod:`train.settings.sample_probe`), compares them with ``tran``'s (``train/rules/samples.py: reference_samples``)
and records their digest (``utils/dataset/sample_digest.py``). A difference stops the job naming the first differing
sample; data not on this machine gives no digest, with the reason; a probe that fails stops the job before launch
(:class:`SamplesUnavailable`), as the same code would fail on the GPUs. With evaluation on, all EVAL_SAMPLES of the
fixed held-out set are checked too (``utils/dataset/digest_cache.py: job_window``). What the digest needs is
resolved once into a plan (``digest_plan``), and what is computed is kept by one call (``keep_digests``).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from train.settings.sample_probe import (
    FRAMEWORK_DATASET_CODE,
    TOKENIZER_KIND,
    SampleSource,
    SamplesUnavailable,
    framework_samples,
    sample_request,
)
from utils.config.model import REPO_ROOT, Config
from utils.dataset.digest_cache import Entry, FrameworkSide, digest_plan, keep_digests
from utils.dataset.paths import JobData
from utils.dataset.sample_digest import DIGEST_KEY, digest_samples


class SamplesDiffer(RuntimeError):
    """The framework's dataset feeds other samples than tran's: the first difference, in words."""


@dataclass(frozen=True)
class PendingSamples:
    """A framework's own samples to build in its settings probe, so one fresh Python does both (issue 38): the
    request (``train/settings/probe_common.py`` runs it after the settings), its scratch folder (removed with
    :func:`done_with`)."""

    request: dict[str, Any]
    work: Path

    @property
    def out(self) -> Path:
        return Path(self.request["out"])


def _side(framework: str, python: str, code_path: Path | None) -> FrameworkSide | None:
    """What keys ``framework``'s own samples; None for a framework without its own dataset code."""
    if framework not in TOKENIZER_KIND:
        return None
    return FrameworkSide(framework, TOKENIZER_KIND[framework], python, code_path, FRAMEWORK_DATASET_CODE)


def pending_samples(cfg: Config, data: JobData, framework: str, python: str, code_path: Path | None
                    ) -> PendingSamples | None:
    """The samples ``framework``'s probe should build alongside its settings; None where none are needed (a
    framework without its own dataset code, the data not here, or its digest already stored)."""
    side = _side(framework, python, code_path)
    if side is None or cfg.evaluates:  # with evaluation on, samples_digest builds both splits in the sample probe
        return None
    try:
        plan = digest_plan(cfg, data, side, REPO_ROOT)
    except Exception:  # whatever fails here fails again in samples_digest, which says it as before
        return None
    if plan.answer is not None or plan.given is None:
        return None
    work = Path(tempfile.mkdtemp(prefix="tprimat-samples-"))
    request = sample_request(data, plan.window, framework, plan.given, work)
    return PendingSamples({**request, "code_path": str(code_path) if code_path else None}, work)


def done_with(pending: PendingSamples | None) -> None:
    """Remove a pending request's scratch folder (its index cache and ``.npz``)."""
    if pending is not None:
        shutil.rmtree(pending.work, ignore_errors=True)


def samples_digest(cfg: Config, data: JobData, framework: str, source: SampleSource | None = None
                   ) -> tuple[str | None, str]:
    """(digest or None, how it was obtained or why not); :class:`SamplesDiffer` when the framework's differ,
    :class:`SamplesUnavailable` when its own dataset or tokenizer code fails. None only where the data is not here.

    A digest computed before on this machine for the same inputs is reused (``utils/dataset/digest_cache.py``), with
    the same answer word for word. ``source``: where the framework's own samples come from (None: tran's are the
    job's), already built by its settings probe (:func:`pending_samples`) or built here by its sample probe.
    Each step once: the plan (what is stored, what to build), the framework's samples, tran's where they are not
    stored or must name a difference, then what is kept. A failure of the framework's code is raised after tran's
    digest is kept, and data tran cannot read is said first, as tran's.
    """
    side = _side(framework, source.python, source.code) if source is not None else None
    plan = digest_plan(cfg, data, side, REPO_ROOT)
    if plan.answer is not None:
        return plan.answer
    assert plan.reference is not None, "a plan without an answer has tran's key"
    stored = plan.reference.entry
    with tempfile.TemporaryDirectory(prefix="tprimat-samples-") as scratch:
        theirs, failure = None, None
        if source is not None and plan.given is not None:
            try:
                theirs = framework_samples(plan, source, Path(scratch))
            except SamplesUnavailable as exc:
                failure = exc
        theirs_digest = digest_samples(theirs) if theirs is not None else None
        ours, failed = None, plan.unreadable
        if stored is None or (theirs_digest is not None and theirs_digest != stored.digest):
            # tran's samples: not stored, or to name where the framework's differ
            from train.rules.samples import reference_samples  # torch and megatron-core: only where they are built

            try:
                ours = reference_samples(data, plan.window, plan.facts, Path(scratch)) if plan.facts else None
            except Exception as exc:  # unreadable data or tokenizer: data/ready.py reports it before a real launch
                failed = exc
            if ours is None and stored is None:
                return None, f"no samples digest: tran's samples cannot be built ({type(failed).__name__}: {failed})"
        if plan.given_error is not None:  # the framework's tokenizer could not be made: said after tran's samples
            raise plan.given_error
        held_out = " and its validation split" if data.valid is not None else ""
        ours_how = f"{len(ours)} samples of train/rules/samples.py{held_out}" if ours is not None else ""
        theirs_entry = None
        if theirs is not None and theirs_digest is not None:
            valid = f" ({len(theirs) - plan.window.train[1]} of them validation samples)" if cfg.evaluates else ""
            theirs_entry = Entry(theirs_digest, f"{len(theirs)} samples{valid} of {framework}'s own GPTDataset, "
                                                "equal to tran's")
        kept = keep_digests(plan, ours, ours_how, theirs, theirs_entry)
    if failure is not None:
        raise failure
    if kept.difference is not None:
        where = f" (samples from {plan.window.train[1]} on are validation samples)" if cfg.evaluates else ""
        raise SamplesDiffer(f"{framework}'s dataset feeds other samples than tran's: {kept.difference} "
                            f"({framework} against tran{where}); docs/SAMPLE_ORDER.md")
    return kept.entry.digest, kept.entry.how


def dry_run_note(cfg: Config, data: JobData) -> str | None:
    """The dry run's line: the digest of tran's samples (what the preflight checks every framework against),
    where the encoded data is here and readable; None otherwise (the dry run says nothing it cannot know)."""
    try:
        digest, _ = samples_digest(cfg, data, "tran")
    except Exception:  # data that cannot be read yet is data/ready.py's to report before a real launch
        return None
    held_out = f" and the first {cfg.eval_samples} validation samples" if cfg.evaluates else ""
    return f"{DIGEST_KEY} {digest}: the first two global batches{held_out} as tran feeds them; the preflight " \
           "checks the framework's own against it" if digest else None
