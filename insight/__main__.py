"""``python -m insight RUN_DIR`` (see insight.cli)."""

import sys

from insight.cli import main

sys.exit(main())
