"""utils/monitor.py: the synchronized step timer and its per-step arrays."""

from __future__ import annotations

import pytest

from utils.monitor import StepMonitor


def test_step_monitor_with_a_fake_clock():
    ticks = iter([0.0, 0.5, 1.0, 1.25])
    monitor = StepMonitor(clock=lambda: next(ticks))
    monitor.start_step()
    first = monitor.end_step(loss=2.0, lr=1e-3)
    monitor.start_step()
    monitor.end_step(loss=float("nan"), lr=1e-3)
    assert (first.step, first.time_s, first.loss) == (1, 0.5, 2.0)
    arrays = monitor.arrays()
    assert arrays["step_times"] == [0.5, 0.25]
    assert arrays["loss_values"] == [2.0, None]  # NaN is recorded as null, never as a number
    assert arrays["learning_rates"] == [1e-3, 1e-3]
    assert arrays["memory_allocated_gb"] == [None, None]
    with pytest.raises(RuntimeError):
        monitor.end_step()


def test_cpu_has_no_device_memory():
    monitor = StepMonitor()
    assert monitor.peak_memory() == (None, None)


def test_monitor_module_is_only_the_timer():
    import utils.monitor as module

    public = {name for name in vars(module) if not name.startswith("_") and callable(getattr(module, name))}
    assert {"StepMonitor", "StepRecord"} <= public
    assert not {"fill_result", "performance_block", "memory_block", "LightningMeasurement"} & public
