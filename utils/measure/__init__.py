"""Measurement of a running job.

step timing, the metrics from per-step arrays, energy and power, the launcher's energy trace, and the memory
estimate before it starts.
"""
