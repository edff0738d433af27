"""The result of a job.

its typed model, the validated atomic file, the version-1 migration, the per-step record written while it trains,
and the failure classification.
"""
