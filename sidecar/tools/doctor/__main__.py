"""``python -m sidecar.tools.doctor``: the same as ``sidecar doctor`` (see cli.py)."""

import sys

from .cli import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
