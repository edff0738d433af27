"""``python -m evaluate.mlperf``: see ``evaluate/mlperf/cli.py``."""

import sys

from evaluate.mlperf.cli import main

sys.exit(main())
