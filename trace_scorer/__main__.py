"""``python -m trace_scorer`` is the ``trace-scorer`` command."""

import sys

from trace_scorer.cli import main

sys.exit(main())
