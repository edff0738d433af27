"""Training: the launch pipeline, the framework packages, the fairness rules (docs/ARCHITECTURE.md).

Signals, module by module (``utils/io/signals.py``). Run as ``python -m``, the entry points in
``ANSWERED`` (no job runs inside them) answer SIGINT/SIGTERM/SIGHUP with one line and 128 + n from this first
import on, as every entry point of ``utils``, ``data`` and ``evaluate`` does. The ones in ``OWN_HANDLERS``
keep Python's defaults here because they handle signals themselves: the launcher forwards them to the job and
records it (``train/launch/job_guard.py``), the trainers under torchrun stop at a step boundary and write what
they measured (``train/tran/worker.py``'s ``StopRequest``, ``train/nemo/entry.py``), and the probes run inside
a framework's own Python as children of the preflight, which ends them. ``tests/unit/machine/test_signals.py``
holds every ``python -m train...`` entry point to one of the two lists.
"""

from utils.io.signals import answer_signals_when_run

ANSWERED = ("train.launch.jobs", "train.launch.preflight", "train.profiles")
OWN_HANDLERS = ("train.launch", "train.launch.launcher", "train.tran.worker", "train.deep.worker",
                "train.nemo.entry", "train.megatron.probe", "train.prim.probe", "train.nemo.probe",
                "train.settings.sample_probe")

answer_signals_when_run(__name__, only=ANSWERED)
