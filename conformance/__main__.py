"""``python -m conformance``: the same commands as the ``conformance`` console script."""

import sys

from conformance.entry_points.cli import main

sys.exit(main())
