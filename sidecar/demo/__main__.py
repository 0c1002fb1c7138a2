"""``python -m sidecar.demo``."""

from .cli import main

raise SystemExit(main())
