"""What tprimat runs: the registry of platforms, frameworks and models, and each model's shape.

Imports at most utils/io.
"""
