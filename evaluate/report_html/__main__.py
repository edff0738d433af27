"""``python -m evaluate.report_html``: see evaluate/report_html/cli.py.

Once :func:`main` returned (the page written atomically, the children of background.py ended) and the standard
streams are flushed, the process ends with ``os._exit``: Python's own finalization of the modules the page loaded
(matplotlib, numpy, pydantic: their objects freed one by one) is about 0.2 s of the 2 s the quick benchmark's page
may take on the 2-core machine (issue 37), work a process about to end has no need of. ``--help`` and usage
errors leave through ``SystemExit`` as before.
"""

import os
import sys

from evaluate.report_html.cli import main

code = main()
for stream in (sys.stdout, sys.stderr):
    stream.flush()
os._exit(code)
