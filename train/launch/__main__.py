"""``python -m train.launch``: the launcher's entry (train/launch/launcher.py), as the job scripts call it."""

import sys

from train.launch.launcher import main

sys.exit(main())
