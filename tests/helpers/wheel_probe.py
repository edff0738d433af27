"""Run in a megatron-core wheel's Python: the sample probe's requests, then the preflight's own sample builds.

``python -m tests.helpers.wheel_probe REQUESTS.json BUILDS.json ANSWERS.json`` (``tests/helpers/megatron_core.py:
wheel_run``). Why one interpreter for both: each fresh Python imports torch, megatron-core and the image's
transformers again (about 10 s on the 2-core VM, docs/PERFORMANCE.md), and the dataset conformance tests need
several builds under the same wheel and image. The requests go through the sample probe's own ``main``
(``train/settings/sample_probe.py``), exactly as ``python -m train.settings.sample_probe REQUESTS.json`` runs them;
each group of BUILDS goes through ``train/settings/probe_common.py: build_samples``, the function the settings
probe runs for the preflight (issue 38), whose answer (``samples_built`` or ``samples_error``) is written to
ANSWERS.json in order, for ``train/settings/samples.py: samples_digest`` (``SampleSource.built``/``error``).
Standard library and the probes' own modules only, as the probes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from train.settings.probe_common import build_samples
    from train.settings.sample_probe import main as sample_probe

    if len(argv) != 3:
        print("usage: python -m tests.helpers.wheel_probe REQUESTS.json BUILDS.json ANSWERS.json", file=sys.stderr)
        return 2
    requests, builds, answers = (Path(arg) for arg in argv)
    status = sample_probe([str(requests)])
    if status != 0:
        return status
    groups = json.loads(builds.read_text(encoding="utf-8"))
    answers.write_text(json.dumps([build_samples(group) for group in groups]), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
