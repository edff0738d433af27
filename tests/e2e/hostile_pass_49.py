"""Issue 49's own hostile pass: the MLPerf import and the Slurm path, each case run as a real process.

``python -m tests.e2e.hostile_pass_49 [--out FILE] [--only PREFIX]`` runs every case in a throwaway folder with
issue 33's judge (``tests/e2e/hostile_pass.py`` ``run_case``: no traceback, nothing raw a terminal acts on, no
hang, a non-zero exit for bad input, 128 + n for a signal) and prints one row a case. Ids: ``M`` the MLPerf import
(``python -m evaluate.mlperf import``) with hostile trees, archives, logs, system descriptions and options; ``L``
the Slurm path (``shell/slurm.sbatch``, ``shell/slurm_node.sh``, ``shell/slurm_throwaway.sh``, the Slurm facts a
result records and the "Slurm cancelled" reason, with fake ``scontrol``/``sinfo``/``srun``/``squeue`` on PATH and a
parent process named ``slurmstepd``). The table in docs/RELIABILITY.md is this script's output.
Not a test module: a pass that finds failures must still finish and report them.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import sys
import tarfile
import zipfile
from pathlib import Path

from tests.e2e.hostile_pass import ESC, Case, run_pass
from tests.helpers.paths import FIXTURES, REPO

SAMPLE = FIXTURES / "mlperf" / "v51_sample.tar.xz"
BIG_TREE = Path("/work/mlperf/v51")  # the built v5.1 tree (outside the repo); its signal cases need it
HUGE = "x" * 1_000_000
LONG = "x" * 100_000  # an environment value (one string of the environment may hold at most 128 KiB)
FAKES = {  # fake Slurm commands: each answers as its FAKE_* variable asks, else as a healthy two-node cluster
    "scontrol": '[ "${FAKE_SCONTROL:-}" = hang ] && exec sleep 1000\n'
                '[ -n "${FAKE_SCONTROL+x}" ] && { printf "%s" "$FAKE_SCONTROL"; exit 0; }; printf "n1\\nn2\\n"',
    "sinfo": '[ "${FAKE_SINFO:-}" = hang ] && exec sleep 1000\n'
             '[ -n "${FAKE_SINFO+x}" ] && { printf "%s" "$FAKE_SINFO"; exit 0; }; echo 127.0.0.1',
    "srun": 'echo "fake srun $*"; exit "${FAKE_SRUN_EXIT:-0}"',
    "squeue": '[ "${FAKE_SQUEUE:-}" = hang ] && exec sleep 1000\nprintf "%s" "${FAKE_SQUEUE:-}"',
}
ENDING = ("from utils.machine.slurm import slurm_ending; "
          "print(slurm_ending())")  # the reason job_result.py records, printed raw: the judge sees what it holds
RECORD = ("import json; from utils.machine.slurm import slurm_job; "
          "print(json.dumps(slurm_job()))")  # environment.slurm of a result


def _python(*args: str) -> list[str]:
    return [sys.executable, "-m", *args]


def _edit(text: str, key: str, value: str, count: int = 1) -> str:
    """The log with the value of its first ``count`` records of ``key`` replaced by the JSON text ``value``."""
    pattern = re.compile(rf'("key": "{key}", "value": )(.*?)(, "metadata")')
    return pattern.sub(lambda m: m.group(1) + value + m.group(3), text, count=count)


class Trees:
    """One healthy system (AMD's MI355X from the fixture) copied into hostile variants."""

    def __init__(self, root: Path) -> None:
        self.root = root
        with tarfile.open(SAMPLE) as archive:
            archive.extractall(root / "sample", filter="data")
        self.sample = root / "sample" / "training_results_v5.1"
        amd = self.sample / "AMD"
        self.system_name = next((amd / "systems").iterdir()).stem
        self.log = (amd / "results" / self.system_name / "llama31_8b" / "result_0.txt").read_text()
        self.system = json.loads((amd / "systems" / f"{self.system_name}.json").read_text())

    def tree(self, name: str, log: str | bytes | None = None, system: object = None, scaling: str | None = None,
             submitter: str = "Org", system_name: str | None = None) -> Path:
        """A ``training_results_v5.1`` tree of one run; ``system`` None: the healthy description."""
        top = self.root / name / "training_results_v5.1"
        system_name = system_name or self.system_name
        folder = top / submitter / "results" / system_name / "llama31_8b"
        folder.mkdir(parents=True)
        content = self.log if log is None else log
        (folder / "result_0.txt").write_bytes(content if isinstance(content, bytes) else content.encode("latin-1"))
        if scaling is not None:
            (folder / "scaling.json").write_text(scaling)
        (top / submitter / "systems").mkdir()
        text = json.dumps(self.system if system is None else system)
        (top / submitter / "systems" / f"{system_name}.json").write_text(text)
        return top


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]], mode: str = "w") -> Path:
    with tarfile.open(path, mode) as archive:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _info(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


def _mlperf_cases(root: Path) -> list[Case]:
    t = Trees(root)
    out = str(root / "mlperf-out")
    imp = ["evaluate.mlperf", "import", "--output-dir", out]
    run = "training_results_v5.1/Org/results/S/llama31_8b/result_0.txt"
    good = t.log.encode("latin-1")
    os.mkfifo(root / "result_0.txt")
    fifo_tree = t.tree("fifo-tree")
    fifo_log = next(fifo_tree.rglob("result_0.txt"))
    fifo_log.unlink()
    os.mkfifo(fifo_log)
    link_tree = t.tree("link-tree")
    link_log = next(link_tree.rglob("result_0.txt"))
    link_log.unlink()
    link_log.symlink_to("/etc/shadow")
    zero_tree = t.tree("zero-tree")
    (next(zero_tree.rglob("result_0.txt")).parent / "result_1.txt").symlink_to("/dev/zero")
    loop = t.tree("loop-tree")
    (loop / "Org" / "results" / "loop").symlink_to(loop / "Org" / "results")
    escaped = t.tree("esc-tree", submitter="Org\x1b[2J", system_name="Sys\x1b]0;t\x07\n# FORGED")
    zips = root / "zips"
    zips.mkdir()

    def zip_of(name: str, members: dict[str, bytes]) -> str:
        with zipfile.ZipFile(zips / name, "w", zipfile.ZIP_DEFLATED) as archive:
            for member, data in members.items():
                archive.writestr(member, data)
        return str(zips / name)

    bomb = zip_of("bomb.zip", {run: b"\0" * 60_000_000})
    slip = zip_of("slip.zip", {"../../escaped/" + run: good})
    absolute = zip_of("abs.zip", {"/tmp/" + run: good})
    backslash = zip_of("back.zip", {run.replace("/", "\\"): good})
    encrypted = Path(zip_of("enc.zip", {run: good}))
    raw = bytearray(encrypted.read_bytes())  # set the "encrypted" flag in the local and the central header
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = raw.find(signature)
        raw[at + offset] |= 1
    encrypted.write_bytes(bytes(raw))
    link_zip = zips / "link.zip"
    with zipfile.ZipFile(link_zip, "w") as archive:
        info = zipfile.ZipInfo(run)
        info.external_attr = (0o120777 << 16)
        archive.writestr(info, "/etc/shadow")
    tars = root / "tars"
    tars.mkdir()
    sym_tar = _tar(tars / "sym.tar", [(_info(run, tarfile.SYMTYPE, "/etc/shadow"), None)])
    hard_tar = _tar(tars / "hard.tar", [(_info(run, tarfile.LNKTYPE, "/etc/shadow"), None)])
    dev_tar = _tar(tars / "dev.tar", [(_info(run, tarfile.CHRTYPE), None)])
    fifo_tar = _tar(tars / "fifo.tar", [(_info(run, tarfile.FIFOTYPE), None)])
    big_tar = _tar(tars / "big.tar.gz", [(_info(run), b"\0" * 70_000_000)], "w:gz")
    ctrl_tar = _tar(tars / "ctrl.tar", [(_info(run.replace("Org", "Org\x1b[2J\n# FORGED")), good)])
    (tars / "trunc.tar.xz").write_bytes(SAMPLE.read_bytes()[:100_000])
    (tars / "text.zip").write_text("not an archive\n")
    (tars / "empty.tar").write_bytes(b"")
    deep = "[" * 100_000 + "]" * 100_000
    nested_log = t.log + f':::MLLOG {{"time_ms": 1, "key": "x", "value": {deep}, "metadata": {{}}}}\n'
    long_line = t.log + ":::MLLOG " + "x" * 20_000_000 + "\n"
    many = t.log + "".join(f':::MLLOG {{"namespace": "", "time_ms": {i}, "event_type": "POINT_IN_TIME", "key": '
                           f'"cache_clear", "value": true, "metadata": {{}}}}\n' for i in range(400_000))
    base_system = dict(t.system)
    return [
        # where the runs come from
        Case("M01", "import: a path that does not exist", _python(*imp, str(root / "none"))),
        Case("M02", "import: /dev/zero as the MLLOG", _python(*imp, "/dev/zero")),
        Case("M03", "import: a FIFO named result_0.txt", _python(*imp, str(root / "result_0.txt"))),
        Case("M04", "import: a tree whose result_0.txt is a FIFO", _python(*imp, str(fifo_tree))),
        Case("M05", "import: a tree whose log is a link to /etc/shadow", _python(*imp, str(link_tree))),
        Case("M06", "import: a tree with result_1.txt a link to /dev/zero (one good run beside)",
             _python(*imp, str(zero_tree)), expect="any"),
        Case("M07", "import: a tree holding a folder link loop", _python(*imp, str(loop)), expect="any"),
        Case("M08", "import: submitter and system folder names with escapes and a forged line",
             _python(*imp, str(escaped)), expect="any"),
        Case("M09", "import: a path argument with an escape and a newline", _python(*imp, str(root / f"a{ESC}b"))),
        Case("M10", "import: 20 MB on one MLLOG line", _python(*imp, str(t.tree("long", long_line))), expect="any"),
        Case("M11", "import: 400,000 extra MLLOG records", _python(*imp, str(t.tree("many", many))), expect="any"),
        Case("M12", "import: a record nested 100,000 deep", _python(*imp, str(t.tree("nested", nested_log))),
             expect="any"),
        Case("M13", "import: a binary log", _python(*imp, str(t.tree("binary", os.urandom(65536))))),
        Case("M14", "import: an empty log", _python(*imp, str(t.tree("empty", b"")))),
        # archives
        Case("M15", "import: a zip bomb (60 MB of zeros in one member)", _python(*imp, bomb)),
        Case("M16", "import: zip-slip (a member named ../../)", _python(*imp, slip)),
        Case("M17", "import: a zip member with an absolute name", _python(*imp, absolute)),
        Case("M18", "import: a zip member with backslashes", _python(*imp, backslash)),
        Case("M19", "import: an encrypted zip member", _python(*imp, str(encrypted))),
        Case("M20", "import: a zip member that is a symbolic link", _python(*imp, str(link_zip))),
        Case("M21", "import: a tar member that is a symbolic link", _python(*imp, str(sym_tar))),
        Case("M22", "import: a tar member that is a hard link", _python(*imp, str(hard_tar))),
        Case("M23", "import: a tar member that is a character device", _python(*imp, str(dev_tar))),
        Case("M24", "import: a tar member that is a FIFO", _python(*imp, str(fifo_tar))),
        Case("M25", "import: a tar.gz member of 70 MB", _python(*imp, str(big_tar))),
        Case("M26", "import: a tar member name with an escape and a forged line", _python(*imp, str(ctrl_tar))),
        Case("M27", "import: a tar.xz cut at 100 kB (the runs read before the cut are imported, whole; the archive is "
                    "one refusal)", _python(*imp, str(tars / "trunc.tar.xz")), expect="any"),
        Case("M28", "import: a text file named .zip", _python(*imp, str(tars / "text.zip"))),
        Case("M29", "import: an empty .tar", _python(*imp, str(tars / "empty.tar"))),
        # the log's figures
        Case("M30", "import: time_ms NaN in every record", _python(*imp, str(t.tree(
            "nan", re.sub(r'"time_ms": \d+', '"time_ms": NaN', t.log)))), expect="any"),
        Case("M31", "import: run_stop before run_start", _python(*imp, str(t.tree("backwards", re.sub(
            r'("time_ms": )\d+(, "event_type": "INTERVAL_END", "key": "run_stop")', r"\g<1>1\2", t.log)))),
             expect="any"),
        Case("M32", "import: eval_accuracy -1e300", _python(*imp, str(t.tree(
            "neg-eval", _edit(t.log, "eval_accuracy", "-1e300", 14)))), expect="any"),
        Case("M33", "import: eval_accuracy Infinity", _python(*imp, str(t.tree(
            "inf-eval", _edit(t.log, "eval_accuracy", "Infinity", 14)))), expect="any"),
        Case("M34", "import: global_batch_size 0", _python(*imp, str(t.tree(
            "gbs0", _edit(t.log, "global_batch_size", "0")))), expect="any"),
        Case("M35", "import: global_batch_size 1e30", _python(*imp, str(t.tree(
            "gbs-huge", _edit(t.log, "global_batch_size", "1e30")))), expect="any"),
        Case("M36", "import: max_sequence_length -8192", _python(*imp, str(t.tree(
            "sl-neg", _edit(t.log, "max_sequence_length", "-8192")))), expect="any"),
        Case("M37", "import: submission_org of 1,000,000 characters with escapes", _python(*imp, str(t.tree(
            "org-huge", _edit(t.log, "submission_org", json.dumps(ESC + HUGE))))), expect="any"),
        Case("M38", "import: submission_benchmark an object", _python(*imp, str(t.tree(
            "bench-obj", _edit(t.log, "submission_benchmark", '{"a": [1]}'))))),
        Case("M39", "import: run_stop status with escapes", _python(*imp, str(t.tree("status-esc", t.log.replace(
            '"status": "success"', '"status": ' + json.dumps(ESC))))),
             expect="any"),
        Case("M40", "import: a lone surrogate in submission_platform", _python(*imp, str(t.tree(
            "surrogate", _edit(t.log, "submission_platform", '"\\ud800x"')))), expect="any"),
        # the system description and scaling.json
        Case("M41", "import: system description nested 100 deep", _python(*imp, str(t.tree(
            "sys-deep", system=json.loads("[" * 100 + "]" * 100))))),
        Case("M42", "import: accelerators_per_node -8", _python(*imp, str(t.tree(
            "sys-neg", system=dict(base_system, accelerators_per_node="-8"))))),
        Case("M43", "import: number_of_nodes 10^30", _python(*imp, str(t.tree(
            "sys-huge", system=dict(base_system, number_of_nodes="1" + "0" * 30))))),
        Case("M44", "import: accelerator name claiming both vendors, with escapes", _python(*imp, str(t.tree(
            "sys-both", system=dict(base_system, accelerator_model_name="NVIDIA H100 " + ESC + " AMD MI355X"))))),
        Case("M45", "import: hw_notes of 1,000,000 characters", _python(*imp, str(t.tree(
            "sys-notes", system=dict(base_system, hw_notes=ESC + HUGE)))), expect="any"),
        Case("M46", "import: scaling.json NaN", _python(*imp, str(t.tree("scale-nan", scaling='{"scaling_factor": '
                                                                                          'NaN}'))), expect="any"),
        Case("M47", "import: scaling.json -1e308", _python(*imp, str(t.tree(
            "scale-neg", scaling='{"scaling_factor": -1e308}'))), expect="any"),
        Case("M48", "import: scaling.json a string with escapes", _python(*imp, str(t.tree(
            "scale-str", scaling=json.dumps({"scaling_factor": ESC})))), expect="any"),
        # options and the output folder
        Case("M49", "import: --round with an escape, --check", _python(*imp, "--round", "5.1" + ESC, "--check",
                                                                      str(t.sample / "AMD"))),
        Case("M50", "import: --round ../../x", _python(*imp, "--round", "../../x", str(t.sample / "AMD")),
             expect="any"),
        Case("M51", "import: --output-dir is a file", _python("evaluate.mlperf", "import", "--output-dir",
                                                             str(SAMPLE), str(t.sample / "AMD"))),
        Case("M52", "import: --output-dir under /proc", _python("evaluate.mlperf", "import", "--output-dir",
                                                               "/proc/self/x", str(t.sample / "AMD"))),
        Case("M53", "import: --output-dir a link to itself", _python("evaluate.mlperf", "import", "--output-dir",
                                                                    str(_link(root / "self-link", "self-link")),
                                                                    str(t.sample / "AMD"))),
        Case("M54", "import: two rounds at once", _python(*imp, str(t.sample / "AMD"),
                                                          str(_round_copy(t.sample / "AMD", root)))),
        Case("M55", "import: the same run twice", _python(*imp, str(t.sample / "AMD"), str(t.sample / "AMD")),
             expect="any"),
        Case("M56", "import: --benchmark bert (not offered)", _python(*imp, "--benchmark", "bert",
                                                                       str(t.sample / "AMD"))),
        # signals during a long import
        Case("M57", "SIGTERM to an import of the 390-run tree", _python(*imp, str(BIG_TREE)), send=signal.SIGTERM,
             delay=2.0, expect="signal"),
        Case("M58", "SIGINT to an import of the 390-run tree", _python(*imp, str(BIG_TREE)), send=signal.SIGINT,
             delay=2.0, expect="signal"),
    ]


def _link(path: Path, target: str) -> Path:
    path.symlink_to(target)
    return path


def _round_copy(folder: Path, root: Path) -> Path:
    other = root / "v50" / "training_results_v5.0" / folder.name
    shutil.copytree(folder, other)
    return other


def _slurm_cases(root: Path) -> list[Case]:
    fakes = root / "fake-bin"
    fakes.mkdir()
    for name, body in FAKES.items():
        (fakes / name).write_text(f"#!/bin/sh\n{body}\n")
        (fakes / name).chmod(0o755)
    stepd = root / "slurmstepd"  # a parent of this name: what utils.machine.slurm.under_slurmstepd looks for
    shutil.copy("/bin/bash", stepd)
    path = f"{fakes}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    job = {"PATH": path, "SLURM_SUBMIT_DIR": str(REPO), "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_JOB_NUM_NODES": "2",
           "DP": "16"}
    sbatch = ["bash", str(REPO / "shell" / "slurm.sbatch")]
    node = ["bash", str(REPO / "shell" / "slurm_node.sh")]
    ending = [str(stepd), "-c", f"{sys.executable} -c '{ENDING}'; exit $?"]  # no exec: the parent stays
    record = [sys.executable, "-c", RECORD]
    in_job = {"PATH": path, "SLURM_JOB_ID": "42"}
    return [
        Case("L01", "slurm.sbatch: healthy (fake scontrol, sinfo, srun)", sbatch, env=job, expect="ok"),
        Case("L02", "slurm.sbatch: outside sbatch (no SLURM_SUBMIT_DIR)", sbatch, env={"PATH": path}),
        Case("L03", "slurm.sbatch: step 'train; rm -rf /'", [*sbatch, "train; rm -rf /"], env=job),
        Case("L04", "slurm.sbatch: SLURM_JOB_NUM_NODES with an escape", sbatch,
             env=dict(job, SLURM_JOB_NUM_NODES="2" + ESC)),
        Case("L05", "slurm.sbatch: SLURM_JOB_NUM_NODES=0", sbatch, env=dict(job, SLURM_JOB_NUM_NODES="0")),
        Case("L06", "slurm.sbatch: SLURM_JOB_NUM_NODES=10^20", sbatch,
             env=dict(job, SLURM_JOB_NUM_NODES="1" + "0" * 20)),
        Case("L07", "slurm.sbatch: 3 nodes for a 16-GPU world", sbatch, env=dict(job, SLURM_JOB_NUM_NODES="3")),
        Case("L08", "slurm.sbatch: sinfo answers an address with escapes", sbatch, env=dict(job, FAKE_SINFO=ESC)),
        Case("L09", "slurm.sbatch: sinfo answers 100,000 characters", sbatch, env=dict(job, FAKE_SINFO=LONG)),
        Case("L10", "slurm.sbatch: sinfo answers nothing (the node name is used)", sbatch,
             env=dict(job, FAKE_SINFO=""), expect="ok"),
        Case("L11", "slurm.sbatch: scontrol names no node", sbatch, env=dict(job, FAKE_SCONTROL="")),
        Case("L12", "slurm.sbatch: scontrol names a node 'n1;reboot'", sbatch,
             env=dict(job, FAKE_SCONTROL="n1;reboot\n", FAKE_SINFO="")),
        Case("L13", "slurm.sbatch: sinfo hangs (bounded: the node's name is used, with a line)", sbatch,
             env=dict(job, FAKE_SINFO="hang"), expect="ok"),
        Case("L14", "slurm.sbatch: srun fails (a node's step failed)", sbatch, env=dict(job, FAKE_SRUN_EXIT="3")),
        Case("L15", "slurm.sbatch: MASTER_PORT=0 in the environment", sbatch, env=dict(job, MASTER_PORT="0")),
        Case("L16", "slurm.sbatch: scontrol hangs (bounded at 10 s)", sbatch, env=dict(job, FAKE_SCONTROL="hang")),
        Case("L17", "slurm_node.sh: outside a job step (no SLURM_NODEID)", [*node, "train"], env={"NNODES": "2"}),
        Case("L18", "slurm_node.sh: step 'x'", [*node, "x" + ESC]),
        Case("L19", "slurm_node.sh: SLURM_NODEID=5 of 2 nodes (the container step refuses it)",
             ["bash", "-c", f"NODE_RANK=5 NNODES=2 exec {sys.executable} -m utils.config.load --before-launch cpu"],
             env={"DP": "16"}),
        Case("L20", "config: NODE_RANK with an escape", _python("utils.config.load", "--before-launch", "cpu"),
             env={"NODE_RANK": "1" + ESC, "NNODES": "2", "DP": "16"}),
        Case("L21", "config: NNODES=-2", _python("utils.config.load", "--before-launch", "cpu"), env={"NNODES": "-2"}),
        Case("L22", "slurm_throwaway.sh: an unknown flag with an escape", [
            "bash", str(REPO / "shell" / "slurm_throwaway.sh"), "--bogus" + ESC]),
        Case("L23", "slurm_throwaway.sh: no Slurm on PATH", ["bash", str(REPO / "shell" / "slurm_throwaway.sh"),
                                                            "true"], env={"PATH": "/nonexistent:/bin"}),
        Case("L24", "result's slurm record: SLURM_JOB_NODELIST of 100,000 characters with escapes", record,
             env={"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": ESC + LONG}, expect="ok"),
        Case("L25", "result's slurm record: SLURM_JOB_ID=-1, 1e3, 10^13 (not recorded)", ["bash", "-c", " && ".join(
            f"SLURM_JOB_ID={v} {sys.executable} -c '{RECORD}'" for v in ("-1", "1e3", "1" + "0" * 13))],
             env={"SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "n1"}, expect="ok"),
        Case("L26", "Slurm's reason: squeue answers a state and reason with escapes", ending,
             env=dict(in_job, FAKE_SQUEUE="CANCELLED " + ESC.replace(" ", "").replace("\n", "")), expect="ok"),
        Case("L27", "Slurm's reason: squeue hangs (bounded at 5 s)", ending, env=dict(in_job, FAKE_SQUEUE="hang"),
             expect="ok"),
        Case("L28", "Slurm's reason: squeue answers 100,000 characters", ending,
             env=dict(in_job, FAKE_SQUEUE="CANCELLED " + LONG), expect="ok"),
    ]


def _cases(root: Path) -> list[Case]:
    (root / "m").mkdir()
    (root / "l").mkdir()
    return _mlperf_cases(root / "m") + _slurm_cases(root / "l")


def main(argv: list[str] | None = None) -> int:
    return run_pass("tests.e2e.hostile_pass_49", __doc__ or "", _cases, argv)


if __name__ == "__main__":
    sys.exit(main())
