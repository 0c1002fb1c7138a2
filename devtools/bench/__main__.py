"""``python -m devtools.bench``: the keystroke-replay benchmark (see ``--help``)."""

import sys

from .cli import main

sys.exit(main())
