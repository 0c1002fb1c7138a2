"""``python -m sidecar`` is the ``sidecar`` command."""

import sys

from .cli import main

sys.exit(main())
