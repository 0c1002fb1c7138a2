"""``python -m sidecar.tools.demo``."""

from .cli import main

raise SystemExit(main())
