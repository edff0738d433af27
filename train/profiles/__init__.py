"""PROFILE=identical|tuned: vendor recipes as data (``nvd.py``, ``amd.py``), applied to one job by ``apply.py``."""

from train.profiles.apply import IDENTICAL, AppliedProfile, ProfileError, apply_profile, available, find_recipe

__all__ = ["IDENTICAL", "AppliedProfile", "ProfileError", "apply_profile", "available", "find_recipe"]
