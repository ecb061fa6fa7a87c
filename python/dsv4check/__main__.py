"""python3 -m dsv4check run | identify | bench-overhead (see cli.py)."""

import sys

from .cli import main

sys.exit(main())
