"""``python -m evaluate.report_html``: see evaluate/report_html/cli.py."""

import sys

from evaluate.report_html.cli import main

sys.exit(main())
