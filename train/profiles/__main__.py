"""``python -m train.profiles``: print the tuned recipe of vendor jobs, every value with its source.

The same lines ``--dry-run`` prints under ``PROFILE=tuned``, for one job or all of them. Exit 0, or 2 with one line
when the config is bad or a recipe does not fit.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from train.profiles.apply import TABLES, ProfileError, apply_profile
from train.profiles.recipe import Borrowed
from utils.config.load import load_config
from utils.config.rules import ConfigError


def jobs() -> list[tuple[str, str, str]]:
    """(platform, framework, model) of every job a vendor recipe covers."""
    out = []
    for platform, table in TABLES.items():
        for model, entry in table.recipes.items():
            recipe = entry.recipe if isinstance(entry, Borrowed) else entry
            out += [(platform, framework, model) for framework in recipe.frameworks]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m train.profiles", description=__doc__.split("\n\n")[0],
                                     epilog="Exit status: 0 printed, 2 bad config or a recipe that does not fit.")
    parser.add_argument("--platform", help="only this platform's jobs")
    parser.add_argument("--framework", help="only this framework's jobs")
    parser.add_argument("--model", help="only this model's jobs")
    args = parser.parse_args(argv)
    try:
        cfg = dataclasses.replace(load_config(), profile="tuned", profile_fallback=None)
        selected = [job for job in jobs() if all(want in (None, have) for want, have in
                                                  zip((args.platform, args.framework, args.model), job, strict=True))]
        if not selected:
            raise ProfileError(f"no vendor recipe for {args.platform or '*'}/{args.framework or '*'}/"
                               f"{args.model or '*'}")
        for platform, framework, model in selected:
            _, profile = apply_profile(cfg, platform, framework, model)
            print(f"== {platform} {framework} {model}")
            print("\n".join(profile.render()) + "\n")
    except (ConfigError, ProfileError) as exc:
        print(f"train.profiles: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
