"""``python -m evaluate.history``: see ``evaluate/history/cli.py``."""

import sys

from evaluate.history.cli import main

sys.exit(main())
