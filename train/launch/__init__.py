"""The launch pipeline of one job.

entry, context, the plugin contract, the checks before launch (memory, preflight), the run with its guard and energy
trace, and the one result.
"""
