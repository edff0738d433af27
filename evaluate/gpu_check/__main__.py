"""``python -m evaluate.gpu_check``: the CLI of evaluate/gpu_check/cli.py."""

import sys

from evaluate.gpu_check.cli import main

sys.exit(main())
