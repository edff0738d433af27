"""The configuration.

config.env and the environment read into one typed Config, the per-key rules, env files, secrets, and the registry
of platforms, frameworks, models and their shapes.
"""
