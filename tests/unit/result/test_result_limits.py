"""What reading a result may cost: bounded by the most steps a run can have (issue 33, family 4).

A 510 MB result, under the 512 MiB byte limit, expanded to more than 5.5 GB in memory and ended compare with a
MemoryError. Now TRAIN_ITERS has a bound (utils/config/rules.py ``MAX_TRAIN_ITERS``), a result's per-step arrays
hold at most that many entries (utils/schema/block.py ``MAX_STEPS``), and the reader refuses a file with more bytes,
values or containers than the largest result such a run can write (``RESULT_LIMITS``) before parsing it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.evaluate import make_result
from tests.helpers.paths import REPO
from utils.config.load import load_config
from utils.config.rules import MAX_TRAIN_ITERS, RULES, ConfigError
from utils.io.json_input import JsonInputError, read_json
from utils.measure.quality import non_finite_reason
from utils.result.file import ResultError, read_result
from utils.schema.block import MAX_INT
from utils.schema.limits import MAX_STEPS
from utils.schema.model import (
    PER_STEP_ARRAYS,
    RESULT_BASE_CONTAINERS,
    RESULT_BASE_VALUES,
    RESULT_LIMITS,
    Result,
    result_bytes,
)
from utils.schema.quality import TO_TARGET_FIELDS, Evaluation, Quality


def test_one_bound_of_steps_from_the_config_rules_to_the_reader() -> None:
    from train.profiles.mlperf import MAX_STEPS as MLPERF_STEPS

    assert RULES["train_iters"].maximum == MAX_TRAIN_ITERS == MAX_STEPS
    assert MLPERF_STEPS <= MAX_TRAIN_ITERS, "the longest schedule tprimat sets must be a TRAIN_ITERS it accepts"
    schema = Result.model_json_schema()
    for name in PER_STEP_ARRAYS:
        assert schema["properties"][name]["maxItems"] == MAX_STEPS, name
    assert Quality.model_json_schema()["properties"]["evaluations"]["maxItems"] == MAX_STEPS
    assert RESULT_LIMITS.max_bytes == result_bytes(MAX_STEPS, MAX_STEPS)  # an evaluation after every step


def test_train_iters_past_the_bound_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"TRAIN_ITERS={MAX_TRAIN_ITERS + 1}: must be at most {MAX_TRAIN_ITERS}$"):
        load_config(environ={"TRAIN_ITERS": str(MAX_TRAIN_ITERS + 1), "WARMUP_STEPS": "1"})


def _largest_evaluations(steps: int) -> list[Evaluation]:
    """Evaluations with the longest value each member takes (the reason of a NaN loss, counts at MAX_INT)."""
    longest_float = 1.2345678901234567e-17  # 23 characters: the longest repr a finite float has, with its sign
    made = []
    for step in range(1, steps + 1):
        nan = step % 2 == 0
        made.append(Evaluation(step=MAX_STEPS - steps + step, samples=MAX_INT, tokens=MAX_INT, seconds=longest_float,
                               loss=None if nan else -longest_float,
                               loss_reason=non_finite_reason(float("nan")) if nan else None,
                               eval_seconds=longest_float, unix_s=longest_float))
    return made


def test_a_real_result_fits_the_per_step_budget(tmp_path: Path) -> None:
    """The largest result of N steps, evaluated at every step, as write_result writes it: within
    ``result_bytes(N, N)``, and within the values and containers the limits allow per step."""
    steps = 400
    quality = Quality(eval_samples=8, eval_interval_samples=8, eval_interval_steps=1,
                      reduction="per-token mean over all evaluated tokens", evaluations=_largest_evaluations(steps),
                      null_reasons={name: "no TARGET_LOSS: nothing to reach" for name in TO_TARGET_FIELDS})

    def longest(result: Result) -> None:
        for name in PER_STEP_ARRAYS:  # every entry at the longest repr a float takes
            setattr(result, name, [1.2345678901234567e-17] * len(result.step_times))
        result.quality = quality

    path = make_result(tmp_path, "nvd", "tran", TRAIN_ITERS=str(steps), WARMUP_STEPS="2", mutate=longest)
    raw = path.read_bytes()
    assert len(raw) <= result_bytes(steps, steps), (len(raw), result_bytes(steps, steps))
    containers = raw.count(b"[") + raw.count(b"{")
    values = raw.count(b",") + containers + 1
    per_step_values = (RESULT_LIMITS.max_values - RESULT_BASE_VALUES) // MAX_STEPS
    assert values <= RESULT_BASE_VALUES // 10 + per_step_values * steps, values
    assert containers <= RESULT_BASE_CONTAINERS // 10 + steps, containers
    assert read_result(path).quality is not None


def test_the_value_and_container_limits_are_checked_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "many.json"
    path.write_text("[" + "0," * 99 + "0]")  # 101 values: the array and its 100 numbers
    assert len(read_json(path, max_values=101)) == 100
    with pytest.raises(JsonInputError, match="up to 101 values, over the limit of 100"):
        read_json(path, max_values=100)
    path.write_text("[" + "[]," * 9 + "[]]")
    with pytest.raises(JsonInputError, match="11 arrays and objects, over the limit of 10"):
        read_json(path, max_containers=10)


# The reader in a process of its own, its peak memory measured around the read (ru_maxrss, KiB on Linux).
_MEASURE = """
import json, resource, sys
from pathlib import Path
from evaluate.analysis.results import load_results
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
loaded = load_results([Path(p) for p in sys.argv[1:]])
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"grew_kib": after - before, "loaded": [str(r.path) for r in loaded.results],
                  "skipped": [why for _, why in loaded.skipped]}))
"""


def test_a_forged_result_of_short_numbers_costs_no_memory_and_the_others_are_compared(tmp_path: Path) -> None:
    """More values than the largest result holds, in a file far under the byte limit: refused in one line before
    it is decoded or parsed (parsed, these 4-byte numbers take 32 bytes each and more in the model), and the
    good result beside it is read."""
    good = make_result(tmp_path / "out", "nvd", "tran")
    forged = tmp_path / "out" / "train_amd_tran_llama.json"
    count = RESULT_LIMITS.max_values + 1
    text = good.read_text()
    head, tail = text.split('"step_times": [', 1)
    with forged.open("wb") as sink:
        sink.write(f'{head}"step_times": ['.encode())
        sink.write(b"0.5," * count)
        sink.write(tail.encode())
    size_kib = forged.stat().st_size // 1024
    assert forged.stat().st_size < RESULT_LIMITS.max_bytes
    proc = subprocess.run([sys.executable, "-c", _MEASURE, str(good), str(forged)], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["loaded"] == [str(good)], seen
    [why] = seen["skipped"]
    assert "\n" not in why and "values, over the limit of" in why and forged.name in why, why
    # the bytes read once, joined once; never the 32 bytes a parsed number takes (about 8x the file)
    assert seen["grew_kib"] < 3 * size_kib, (seen["grew_kib"], size_kib)


def test_a_result_past_the_limits_is_a_result_error(tmp_path: Path) -> None:
    path = tmp_path / "train_nvd_tran_llama.json"
    path.write_text('{"step_times": [' + "[]," * RESULT_LIMITS.max_containers + "[]]}")
    with pytest.raises(ResultError, match="arrays and objects, over the limit"):
        read_result(path)
